package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// operatorsConfig is fastConfig with two operators beside the admin token:
// fmt it with alice's token file.
const operatorsConfig = `
listen: 127.0.0.1:0
data_dir: ""
health_check_interval: 100ms
signals: {cpu: {source: off}, memory: {source: off}}
auth:
  token: admin-secret
  report_token: report-secret
  operators:
    - {name: alice, token_file: %q}
    - {name: bob.ops, token: bob-secret}
`

// TestWhoDidIt: against the real binary, every override change and reload
// is recorded under who asked: the operator's name for their token,
// "admin" for auth.token, "signal" for SIGHUP; a rotated token_file takes
// effect on SIGHUP; a bad operator is refused at start, named.
func TestWhoDidIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	aliceFile := filepath.Join(dir, "alice")
	if err := os.WriteFile(aliceFile, []byte("alice-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := start(t, "serve", "--config", writeConfig(t, dir, fmt.Sprintf(operatorsConfig, aliceFile)))
	change := func(method, token, body string, want int) {
		t.Helper()
		if resp, b := d.request(t, method, "/v1/override", token, body); resp.StatusCode != want {
			t.Fatalf("%s /v1/override with %q: %d %s, want %d", method, token, resp.StatusCode, b, want)
		}
	}
	pin := `{"level":"Major","mode":"pin","ttl":"15m","reason":"INC-42"}`
	change("PUT", "alice-1", pin, 200)
	change("DELETE", "bob-secret", "", 200)
	change("PUT", "admin-secret", pin, 200)
	change("PUT", "report-secret", pin, http.StatusUnauthorized)

	// alice's secret is rotated: the old one stops working on reload.
	if err := os.WriteFile(aliceFile, []byte("alice-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, d, "config reloaded")
	change("DELETE", "alice-1", "", http.StatusUnauthorized)
	change("DELETE", "alice-2", "", 200)
	// A reload that switches the mode is a history entry: bob's by POST
	// /-/reload, the signal's by SIGHUP.
	writeConfig(t, dir, fmt.Sprintf(operatorsConfig, aliceFile)+"mode: shadow\n")
	if resp, b := d.request(t, "POST", "/-/reload", "bob-secret", ""); resp.StatusCode != 200 {
		t.Fatalf("POST /-/reload with bob's token: %d %s, want 200", resp.StatusCode, b)
	}
	writeConfig(t, dir, fmt.Sprintf(operatorsConfig, aliceFile))
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	until(t, 10*time.Second, "the SIGHUP reload back to enforce", func() bool {
		_, b := d.request(t, "GET", "/v1/level", "", "")
		return !strings.Contains(b, `"shadow":true`)
	})

	_, body := d.request(t, "GET", "/v1/history", "", "")
	var h struct {
		Transitions []struct {
			Reason, Actor string
		} `json:"transitions"`
	}
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tr := range h.Transitions {
		if strings.HasPrefix(tr.Reason, "override") || strings.Contains(tr.Reason, "mode ") {
			got = append(got, tr.Actor)
		}
	}
	if want := "signal bob.ops alice admin bob.ops alice"; strings.Join(got, " ") != want { // newest first
		t.Errorf("the actors of the override and mode entries, newest first: %v, want %s\n%s", got, want, body)
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}

	bad := writeConfig(t, t.TempDir(), strings.Replace(fmt.Sprintf(operatorsConfig, aliceFile), "{name: bob.ops, token: bob-secret}", "{name: Bob, token: admin-secret}", 1))
	code, _, stderr := runCLI(t, nil, "validate", "--config", bad)
	for _, want := range []string{"auth.operators[1].name: must match", "auth.operators[1].token: must differ from the admin token"} {
		if code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("validate of a bad operator: exit %d, stderr %q; want exit 2 naming %q", code, stderr, want)
		}
	}
	if strings.Contains(stderr, "admin-secret") {
		t.Errorf("validate showed a token: %s", stderr)
	}
}
