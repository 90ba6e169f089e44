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
	empty := filepath.Join(dir, "empty.yaml")
	zero := filepath.Join(dir, "zero.yaml")
	os.WriteFile(good, []byte("health_check_interval: 5s\n"), 0o600)
	os.WriteFile(bad, []byte("helth_check_interval: 5s\nhysteresis: 1\nlevels:\n  - {name: Minor, priority_threshold: 10, cpu_percent: 150}\n  - {name: minor, priority_threshold: 20, cpu_precent: 90}\n"), 0o600)
	os.WriteFile(empty, []byte("# nothing yet\n"), 0o600)
	os.Symlink("/dev/zero", zero)
	const placeholder = "change-me-to-a-long-random-string"

	tests := []struct {
		name    string
		args    []string
		environ []string
		code    int
		stdout  []string
		stderr  []string
		hidden  []string // never in stdout or stderr
	}{
		{name: "embedded defaults", args: []string{"validate"}, code: 0, stdout: []string{"config OK: embedded defaults (no --config given)\n"}},
		{name: "good file", args: []string{"validate", "--config", good}, code: 0, stdout: []string{"config OK: " + good + "\n"}},
		{name: "every problem at once", args: []string{"validate", "--config", bad}, code: 2, stderr: []string{
			"helth_check_interval: unknown key (did you mean health_check_interval?)",
			"levels[1].cpu_precent: unknown key (did you mean levels[1].cpu_percent?)",
			"hysteresis: must be in [0, 1) (was 1)",
			"levels[0].cpu_percent: must be in (0, 100] (was 150)",
			"levels[1].name: duplicates levels[0].name (Minor): names are unique ignoring case (was minor)",
		}},
		{name: "env is validated too", args: []string{"validate"}, environ: []string{"DEGRADED_HEALTH_CHECK_INTERVAL=0s", "DEGRADED_ADDR=http://x"}, code: 2,
			stderr: []string{"health_check_interval: must be >= 10ms (was 0s, from DEGRADED_HEALTH_CHECK_INTERVAL)"}},
		{name: "env value that does not decode", args: []string{"validate"}, environ: []string{"DEGRADED_HEALTH_CHECK_INTERVAL=abc"}, code: 2,
			stderr: []string{`health_check_interval: must be a duration such as 30s or 1m (was "abc", from DEGRADED_HEALTH_CHECK_INTERVAL)`}},
		{name: "mistyped variables", args: []string{"validate"}, environ: []string{"DEGRADED_AUTH_TOKEN=secret-value", "DEGRADED_HEALTH_CHECK_INTERVL=5s", "DEGRADED_TOKEN=t"}, code: 0,
			stdout: []string{
				"warning: DEGRADED_AUTH_TOKEN names no config key (did you mean DEGRADED_AUTH__TOKEN?)\n" +
					"warning: DEGRADED_HEALTH_CHECK_INTERVL names no config key (did you mean DEGRADED_HEALTH_CHECK_INTERVAL?)\n" +
					"config OK: embedded defaults (no --config given)\n",
			},
			hidden: []string{"secret-value", "DEGRADED_TOKEN"}},
		{name: "missing file", args: []string{"validate", "--config", filepath.Join(dir, "nope.yaml")}, code: 2, stderr: []string{"nope.yaml"}},
		{name: "a config that never ends", args: []string{"validate", "--config", zero}, code: 2, stderr: []string{zero, "larger than the 1 MiB limit"}},
		{name: "empty file", args: []string{"validate", "--config", empty}, code: 0,
			stdout: []string{"warning: " + empty + ": file is empty, so the embedded defaults apply\nconfig OK: " + empty + "\n"}},
		{name: "warning", args: []string{"validate"}, environ: []string{"DEGRADED_ERROR_RATE_WINDOW=10s"}, code: 0, stdout: []string{"warning: error_rate_window", "config OK"}},
		{name: "protected mode", args: []string{"validate"}, environ: []string{"DEGRADED_LISTEN=0.0.0.0:8470"}, code: 2, stderr: []string{"listen: a non-loopback address needs auth.token"}},
		{name: "token with a trailing newline", args: []string{"validate"}, environ: []string{"DEGRADED_AUTH__TOKEN=secret-value\n"}, code: 2,
			stderr: []string{"auth.token: must not start or end with whitespace"}, hidden: []string{"secret-value"}},
		{name: "shared tokens", args: []string{"validate"}, environ: []string{"DEGRADED_AUTH__TOKEN=secret-value", "DEGRADED_AUTH__REPORT_TOKEN=secret-value"}, code: 2,
			stderr: []string{"auth.report_token: must differ from the admin token"}, hidden: []string{"secret-value"}},
		{name: "the systemd example's placeholder", args: []string{"validate"}, environ: []string{"DEGRADED_AUTH__REPORT_TOKEN=" + placeholder}, code: 2,
			stderr: []string{"auth.report_token: must not be the example's placeholder"}, hidden: []string{placeholder}},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2, stderr: []string{"unknown command"}},
		{name: "unknown flag", args: []string{"serve", "--frob"}, code: 2, stderr: []string{"unknown flag: --frob"}},
		{name: "unknown subcommand", args: []string{"override", "frob"}, code: 0, stdout: []string{"Usage:"}},
		{name: "argument to a command that takes none", args: []string{"serve", "extra"}, code: 2,
			stderr: []string{"degraded: unknown command \"extra\" for \"degraded serve\"\n"}},
		{name: "missing required flag", args: []string{"override", "set", "Major", "--ttl", "1m"}, code: 2,
			stderr: []string{"degraded: required flag(s) \"reason\" not set\n"}},
		{name: "no command", args: nil, code: 0, stdout: []string{"Usage:"}},
		{name: "help", args: []string{"help", "serve"}, code: 0, stdout: []string{"Usage:"}},
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
			for _, h := range tt.hidden {
				if strings.Contains(stdout+stderr, h) {
					t.Errorf("output shows %q:\nstdout: %s\nstderr: %s", h, stdout, stderr)
				}
			}
		})
	}
}
