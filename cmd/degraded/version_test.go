package main

import (
	"os"
	"os/exec"
	"path/filepath"
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := versionText(tt.bi, tt.ok)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("versionText = %q, lacks %q", got, w)
				}
			}
		})
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
