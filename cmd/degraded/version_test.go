package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionText(t *testing.T) {
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want []string
	}{
		{"no build information", nil, false, []string{"revision unknown"}},
		{"no VCS information", &debug.BuildInfo{GoVersion: "go1.26.10", Main: debug.Module{Version: "(devel)"}},
			true, []string{"degraded (devel)\n", "revision unknown", "built with go1.26.10"}},
		{"a tagged, clean build", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-11-30T08:00:00Z"}, {Key: "vcs.modified", Value: "false"},
		}}, true, []string{"degraded v1.2.3\n", "revision 0123abcd (committed 2026-11-30T08:00:00Z)\n"}},
		{"a dirty tree", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261130080000-0123abcd+dirty"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"},
		}}, true, []string{"revision 0123abcd (modified)\n"}},
		{"an older Go than the toolchain line", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, true, []string{
			"built with go1.26.8\n",
			"warning: built with go1.26.8, older than go.mod's toolchain " + toolchain + ": rebuild with GOTOOLCHAIN=" + toolchain + "\n",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := versionText(tt.bi, tt.ok)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("versionText = %q, lacks %q", got, w)
				}
			}
			if bi := tt.bi; bi != nil && olderGo(bi.GoVersion) == "" && strings.Contains(got, "warning") {
				t.Errorf("versionText = %q: a warning for a Go that is not older than %s", got, toolchain)
			}
		})
	}
}

// TestOlderGo: a binary built with a Go older than go.mod's toolchain
// line says so, in `version` and in serve's start line; the toolchain's
// own release, newer ones and versions that cannot be compared do not.
func TestOlderGo(t *testing.T) {
	for _, tt := range []struct {
		goVersion string
		older     bool
	}{
		{"go1.26.8", true},
		{"go1.26.9 X:boringcrypto", true},
		{"go1.25.3", true},
		{toolchain, false},
		{"go1.26.11", false},
		{"go1.27rc1", false},
		{"devel go1.27-0123abcd Mon Nov 30 08:00:00 2026 +0000", false},
		{"", false},
	} {
		note := olderGo(tt.goVersion)
		if (note != "") != tt.older {
			t.Errorf("olderGo(%q) = %q, want a warning: %v", tt.goVersion, note, tt.older)
		}
		line := startLine("http://127.0.0.1:8470", tt.goVersion)
		if !strings.HasPrefix(line, "degraded listening on http://127.0.0.1:8470") || strings.Contains(line, "older than") != tt.older {
			t.Errorf("start line for %q: %q", tt.goVersion, line)
		}
	}
}

// TestToolchainMatchesGoMod: the toolchain the binary compares itself
// with is go.mod's toolchain line, and the README names it.
func TestToolchainMatchesGoMod(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "toolchain" {
			line = f[1]
		}
	}
	if line != toolchain {
		t.Errorf("go.mod's toolchain line is %q, cmd/degraded's toolchain constant %q: keep them equal", line, toolchain)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "toolchain "+toolchain) {
		t.Errorf("README.md does not name the toolchain line `toolchain %s`", toolchain)
	}
}

// TestServeStartLine: serve's first line on stdout says where it listens
// and, built with a Go older than go.mod's toolchain line (as `go test`
// with GOTOOLCHAIN=local on this machine's go1.26.8 does), that too.
func TestServeStartLine(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "degraded.yaml")
	if err := os.WriteFile(cfg, []byte("data_dir: \"\"\nsignals: {cpu: {source: off}, memory: {source: off}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", cfg, "--listen", "127.0.0.1:0"}, nil, &out, &errOut)
	}()
	waitOutput(t, &out, "\n")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v\n%s", err, errOut.String())
	}
	line := strings.SplitAfter(out.String(), "\n")[0]
	m := listening.FindStringSubmatch(line)
	if m == nil || line != startLine(m[1], runtime.Version()) {
		t.Fatalf("serve's start line %q, want %q", line, startLine("URL", runtime.Version()))
	}
	older := olderGo(runtime.Version()) != ""
	if strings.Contains(line, "older than go.mod's toolchain "+toolchain) != older || strings.Contains(errOut.String(), "older than go.mod's toolchain "+toolchain) != older {
		t.Errorf("built with %s: the start line %q and the log should say it is older than %s: %v\n%s", runtime.Version(), line, toolchain, older, errOut.String())
	}
}

// TestVersionOfARealBuild builds the binary with VCS stamping on (this
// machine's Go sets GOFLAGS=-buildvcs=false) and checks that `version`
// names the commit that `git rev-parse HEAD` names. Go stamps only a
// checkout whose .git is a directory, so a git worktree is first cloned.
func TestVersionOfARealBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("no commit to compare with: %v", err)
	}
	root := strings.TrimSpace(string(top))
	dir := filepath.Join(root, "cmd", "degraded")
	if fi, err := os.Stat(filepath.Join(root, ".git")); err != nil || !fi.IsDir() {
		clone := filepath.Join(t.TempDir(), "src")
		if out, err := exec.Command("git", "clone", "-q", "--shared", root, clone).CombinedOutput(); err != nil {
			t.Fatalf("git clone of the worktree: %v\n%s", err, out)
		}
		dir = filepath.Join(clone, "cmd", "degraded")
	}
	bin := filepath.Join(t.TempDir(), "degraded")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildvcs=true: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("degraded version: %v", err)
	}
	want := "revision " + strings.TrimSpace(string(head))
	if !strings.Contains(string(out), want) || strings.Contains(string(out), "revision unknown") {
		t.Errorf("degraded version printed %q, want a line %q", out, want)
	}
}
