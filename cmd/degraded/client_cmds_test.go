package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/levels"
)

// cliWindow is a fake error window that sums what it is given.
type cliWindow struct {
	mu                sync.Mutex
	success, failures int64
}

func (w *cliWindow) Record(_ time.Time, s, f int64) {
	w.mu.Lock()
	w.success += s
	w.failures += f
	w.mu.Unlock()
}

func (w *cliWindow) Totals(time.Time) (int64, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.success + w.failures, w.failures
}

// cliDaemon serves the real API over HTTP with admin token "adm".
type cliDaemon struct {
	ctl *controller.Controller
	win *cliWindow
	url string
	env []string
}

func newCLIDaemon(t *testing.T) *cliDaemon {
	t.Helper()
	v := func(f float64) *float64 { return &f }
	tab, err := levels.NewTable([]levels.Level{
		{Name: "Minor", PriorityThreshold: 10, ErrorRatePercent: v(1), CPUPercent: v(60), Disable: []string{"recommendations"}},
		{Name: "Major", PriorityThreshold: 50, ErrorRatePercent: v(10), CPUPercent: v(80)},
	})
	if err != nil {
		t.Fatal(err)
	}
	d := &cliDaemon{win: &cliWindow{}}
	d.ctl, err = controller.New(controller.Options{Table: tab, Errors: d.win, MinimumLevelDuration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	tokens := new(atomic.Pointer[api.Tokens])
	tokens.Store(&api.Tokens{Admin: "adm"})
	srv := httptest.NewServer(api.NewServer(api.Deps{Controller: d.ctl, Outcomes: d.win, Tokens: tokens}))
	t.Cleanup(srv.Close)
	d.url = srv.URL
	d.env = []string{"DEGRADED_ADDR=" + srv.URL, "DEGRADED_TOKEN=adm"}
	return d
}

func TestStatus(t *testing.T) {
	d := newCLIDaemon(t)
	d.win.Record(time.Now(), 94, 6)
	d.ctl.Check(context.Background())

	code, out, errOut := runCLI(t, d.env, "status")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"Level     Minor (1 of 2): priority < 10 shed",
		"Source    auto (recommended: Minor)", "Reason    error_rate 6.00% > 1% (Minor)",
		"Override  none", "Disabled  recommendations",
		"next level: Major", "error rate  6.00%", "> 10.00%", "(100 attempts, 6 failures in the window)",
		"cpu", "n/a", "> 80.00%",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}

	code, out, _ = runCLI(t, d.env, "status", "--json")
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || doc["level"] != "Minor" || doc["earliest_recovery_at"] == nil {
		t.Errorf("status --json: exit %d %v %v", code, err, doc)
	}
}

func TestOverrideSetAndClear(t *testing.T) {
	d := newCLIDaemon(t)
	code, out, errOut := runCLI(t, d.env, "override", "set", "Major", "--ttl", "15m", "--reason", "INC-42")
	if code != 0 || !strings.Contains(out, "override pin Major until") || !strings.Contains(out, "level now Major, sequence 1") {
		t.Fatalf("override set: exit %d %q %q", code, out, errOut)
	}
	if st := d.ctl.State(); st.Override == nil || st.Override.Reason != "INC-42" || st.Override.Mode != controller.ModePin {
		t.Fatalf("daemon state after set: %+v", st.Override)
	}
	code, out, _ = runCLI(t, d.env, "override", "set", "Minor", "--ttl", "1h", "--reason", "floor it", "--floor", "--json")
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || doc["override"].(map[string]any)["mode"] != "floor" {
		t.Fatalf("override set --floor --json: exit %d %q", code, out)
	}

	code, out, _ = runCLI(t, d.env, "override", "clear")
	if code != 0 || !strings.Contains(out, "override cleared") {
		t.Fatalf("override clear: exit %d %q", code, out)
	}
	code, out, _ = runCLI(t, d.env, "override", "clear")
	if code != 0 || !strings.Contains(out, "no override was active") {
		t.Errorf("override clear again: exit %d %q, want a no-op", code, out)
	}
	if h := d.ctl.History(10); len(h) != 3 {
		t.Errorf("history has %d entries, want set, set, clear", len(h))
	}
}

func TestReport(t *testing.T) {
	d := newCLIDaemon(t)
	code, out, errOut := runCLI(t, d.env, "report", "--success", "950", "--failure", "50")
	if code != 0 || out != "accepted 1000 outcomes\n" {
		t.Fatalf("report: exit %d %q %q", code, out, errOut)
	}
	if a, f := d.win.Totals(time.Now()); a != 1000 || f != 50 {
		t.Errorf("window holds %d attempts %d failures, want 1000 and 50", a, f)
	}
	if code, out, _ := runCLI(t, d.env, "report", "--failure", "1", "--json"); code != 0 || out != "{\"accepted\":1}\n" {
		t.Errorf("report --json: exit %d %q", code, out)
	}
}

func TestClientCommandErrors(t *testing.T) {
	d := newCLIDaemon(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()

	tests := []struct {
		name    string
		env     []string
		args    []string
		code    int
		message string
	}{
		{"unreachable names the address", nil, []string{"status", "--addr", dead}, 1, "cannot reach degraded at " + dead},
		{"unreachable from the environment", []string{"DEGRADED_ADDR=" + dead}, []string{"watch"}, 1, "cannot reach degraded at " + dead},
		{"wrong token", []string{"DEGRADED_ADDR=" + d.url, "DEGRADED_TOKEN=nope"}, []string{"override", "clear"}, 1, "refused the token"},
		{"flag beats environment", d.env, []string{"override", "set", "Major", "--ttl", "1m", "--reason", "x", "--token", "nope"}, 1, "refused the token"},
		{"unknown level", d.env, []string{"override", "set", "Panic", "--ttl", "1m", "--reason", "x"}, 2, `unknown level "Panic"`},
		{"ttl over the maximum", d.env, []string{"override", "set", "Major", "--ttl", "48h", "--reason", "x"}, 2, "ttl must be between"},
		{"missing reason", d.env, []string{"override", "set", "Major", "--ttl", "1m"}, 2, "reason"},
		{"missing level", d.env, []string{"override", "set", "--ttl", "1m", "--reason", "x"}, 2, "accepts 1 arg"},
		{"bad ttl", d.env, []string{"override", "set", "Major", "--ttl", "soon", "--reason", "x"}, 2, "ttl"},
		{"report without counts", d.env, []string{"report"}, 2, "--success and/or --failure"},
		{"report negative", d.env, []string{"report", "--success", "-1"}, 2, "success must be an integer"},
		{"bad address", nil, []string{"status", "--addr", "127.0.0.1:8470"}, 2, "--addr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, tt.env, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.message) {
				t.Errorf("exit %d %q, want %d with %q", code, errOut, tt.code, tt.message)
			}
		})
	}
	if d.ctl.State().Sequence != 0 {
		t.Error("a refused command changed the daemon's state")
	}
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestWatch(t *testing.T) {
	d := newCLIDaemon(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut lockedBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"watch"}, d.env, &out, &errOut) }()

	waitOutput := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(out.String(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("watch output lacks %q:\n%s", want, out.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitOutput("#0  Normal")
	if _, err := d.ctl.SetOverride(controller.OverrideRequest{Level: "Major", Mode: controller.ModePin, TTL: time.Minute, Reason: "INC-7"}); err != nil {
		t.Fatal(err)
	}
	waitOutput("#1  Major")
	waitOutput("[override pin Major until")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("watch ended with %v after Ctrl-C, want nil (exit 0)", err)
	}
	if n := strings.Count(out.String(), "\n"); n != 2 {
		t.Errorf("watch printed %d lines, want one per change:\n%s", n, out.String())
	}
}
