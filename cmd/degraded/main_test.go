package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs the program in-process and returns its exit code and output.
func runCLI(t *testing.T, environ []string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, environ, &stdout, &stderr)
	code := exitCode(err, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("health_check_interval: 5s\n"), 0o600)
	os.WriteFile(bad, []byte("health_check_intreval: 5s\nhysteresis: 1\nlevels:\n  - {name: Minor, priority_threshold: 10, cpu_percent: 150}\n"), 0o600)

	tests := []struct {
		name    string
		args    []string
		environ []string
		code    int
		stdout  []string
		stderr  []string
	}{
		{name: "embedded defaults", args: []string{"validate"}, code: 0, stdout: []string{"config OK"}},
		{name: "good file", args: []string{"validate", "--config", good}, code: 0, stdout: []string{"config OK"}},
		{name: "every problem at once", args: []string{"validate", "--config", bad}, code: 2, stderr: []string{
			"health_check_intreval: unknown key",
			"hysteresis: must be in [0, 1) (was 1)",
			"levels[0].cpu_percent: must be in (0, 100] (was 150)",
		}},
		{name: "env is validated too", args: []string{"validate"}, environ: []string{"DEGRADED_HEALTH_CHECK_INTERVAL=0s", "DEGRADED_ADDR=http://x"}, code: 2, stderr: []string{"health_check_interval: must be > 0 (was 0s)"}},
		{name: "missing file", args: []string{"validate", "--config", filepath.Join(dir, "nope.yaml")}, code: 2, stderr: []string{"nope.yaml"}},
		{name: "warning", args: []string{"validate"}, environ: []string{"DEGRADED_ERROR_RATE_WINDOW=10s"}, code: 0, stdout: []string{"warning: error_rate_window", "config OK"}},
		{name: "protected mode", args: []string{"validate"}, environ: []string{"DEGRADED_LISTEN=0.0.0.0:8470"}, code: 2, stderr: []string{"listen: a non-loopback address needs auth.token"}},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2, stderr: []string{"unknown command"}},
		{name: "unknown flag", args: []string{"serve", "--frob"}, code: 2, stderr: []string{"unknown flag: --frob"}},
		{name: "version", args: []string{"version"}, code: 0, stdout: []string{"degraded "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.environ, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout, stderr)
			}
			for _, w := range tt.stdout {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout %q lacks %q", stdout, w)
				}
			}
			for _, w := range tt.stderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
		})
	}
}
