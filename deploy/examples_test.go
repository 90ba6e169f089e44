package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/degraded/degraded/config"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// loadExample loads an example config as the daemon would, with its
// token_file pointed at a temporary file (validation reads it).
func loadExample(t *testing.T, path string, environ []string) (*config.Config, error) {
	t.Helper()
	dir := t.TempDir()
	token := filepath.Join(dir, "admin-token")
	if err := os.WriteFile(token, []byte("test-admin-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`(?m)^(\s*token_file:\s*).*$`).ReplaceAllString(read(t, path), "${1}"+token)
	tmp := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(config.LoadOptions{Path: tmp, Environ: environ}) // warnings are fine
	return cfg, err
}

// TestSystemdExample: the unit's config validates, and the unit and the
// config agree on where things are.
func TestSystemdExample(t *testing.T) {
	// The operator replaces the placeholder report token; here the
	// environment does (TestSystemdPlaceholderRefused: as shipped, it fails).
	cfg, err := loadExample(t, filepath.Join("systemd", "degraded.yaml"), []string{"DEGRADED_AUTH__REPORT_TOKEN=a-real-report-token"})
	if err != nil {
		t.Fatalf("systemd/degraded.yaml does not validate: %v", err)
	}
	unit := read(t, filepath.Join("systemd", "degraded.service"))
	for _, want := range []string{
		"ExecStart=/usr/local/bin/degraded serve --config /etc/degraded/degraded.yaml",
		"StateDirectory=" + strings.TrimPrefix(cfg.DataDir, "/var/lib/"),
		"ExecReload=/bin/kill -HUP $MAINPID",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("degraded.service lacks %q", want)
		}
	}
	if cfg.DataDir != "/var/lib/degraded" {
		t.Errorf("data_dir %q, want the unit's state directory /var/lib/degraded", cfg.DataDir)
	}
	if !cfg.IsLoopback() {
		t.Errorf("the per-host example should listen on loopback, not %s", cfg.Listen)
	}
}

// TestSystemdHardening rates the unit's sandbox with systemd-analyze, where
// it is installed, and fails if it gets weaker than "OK".
func TestSystemdHardening(t *testing.T) {
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("needs systemd-analyze")
	}
	// verify wants ExecStart to exist; the rating does not look at it.
	unit := regexp.MustCompile(`(?m)^ExecStart=.*$`).ReplaceAllString(read(t, filepath.Join("systemd", "degraded.service")), "ExecStart=/bin/true")
	path := filepath.Join(t.TempDir(), "degraded.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "verify", path).CombinedOutput(); err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "security", "--offline=yes", "--no-pager", path).CombinedOutput()
	if err != nil {
		t.Skipf("systemd-analyze security --offline not available here: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for degraded.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	if level, _ := strconv.ParseFloat(string(m[1]), 64); level > 2.0 {
		t.Errorf("exposure level %v, want at most 2.0 (\"OK\"):\n%s", level, out)
	}
}

// TestKubernetesExample: the sidecar's config validates with the
// environment the sidecar gives it, needs that environment, and names
// paths the manifest mounts.
func TestKubernetesExample(t *testing.T) {
	path := filepath.Join("kubernetes", "degraded.yaml")
	manifest := read(t, filepath.Join("kubernetes", "sidecar.yaml"))

	if _, err := loadExample(t, path, nil); err == nil || !strings.Contains(err.Error(), "report_token") {
		t.Errorf("without DEGRADED_AUTH__REPORT_TOKEN the config should be refused (it listens beyond loopback); got %v", err)
	}
	m := regexp.MustCompile(`(?m)^\s*token_file:\s*(\S+)`).FindStringSubmatch(read(t, path))
	if m == nil {
		t.Fatal("kubernetes/degraded.yaml sets no auth.token_file")
	}
	tokenFile := m[1]
	cfg, err := loadExample(t, path, []string{"DEGRADED_AUTH__REPORT_TOKEN=test-report-token"})
	if err != nil {
		t.Fatalf("kubernetes/degraded.yaml does not validate: %v", err)
	}
	if cfg.Signals.CPU.Source != "cgroup" || cfg.Signals.Memory.Source != "cgroup" {
		t.Errorf("signals %+v, want both from the cgroup", cfg.Signals)
	}
	for what, want := range map[string]string{
		"the report token from the Secret":  "name: DEGRADED_AUTH__REPORT_TOKEN",
		"the config file":                   "args: [serve, --config, /etc/degraded/config/degraded.yaml]",
		"the config volume":                 "mountPath: /etc/degraded/config,",
		"the token file's directory":        "mountPath: " + filepath.Dir(tokenFile) + ",",
		"the state directory":               "mountPath: " + cfg.DataDir + "}",
		"the pod cgroup link's directory":   "mountPath: " + filepath.Dir(cfg.Signals.CgroupPath) + ",",
		"the link the init container makes": "ln -sfn \"$dir\" " + cfg.Signals.CgroupPath,
		"a liveness probe on /healthz":      "livenessProbe:\n            httpGet: {path: /healthz",
		"a readiness probe on /readyz":      "readinessProbe:\n            httpGet: {path: /readyz",
		"the listen port":                   "containerPort: " + cfg.Listen[strings.LastIndex(cfg.Listen, ":")+1:] + "}",
	} {
		if !strings.Contains(manifest, want) {
			t.Errorf("sidecar.yaml lacks %s: %q", what, want)
		}
	}
	kust := read(t, filepath.Join("kubernetes", "kustomization.yaml"))
	for _, want := range []string{"- sidecar.yaml", "- degraded.yaml", "name: degraded-config"} {
		if !strings.Contains(kust, want) {
			t.Errorf("kustomization.yaml lacks %q", want)
		}
	}
}
