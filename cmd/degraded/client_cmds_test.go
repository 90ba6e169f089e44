package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/controller/controllertest"
	"github.com/degraded/degraded/internal/daemon/daemontest"
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
	ctl  *controller.Controller
	win  *cliWindow
	srv  *daemontest.Server
	url  string
	env  []string
	down atomic.Bool // drop every connection, as a dead daemon would
}

func newCLIDaemon(t *testing.T) *cliDaemon {
	t.Helper()
	tab, err := levels.NewTable([]levels.Level{
		{Name: "Minor", PriorityThreshold: 10, Thresholds: levels.Thresholds{levels.ErrorRate: 1, levels.CPU: 60}, Disable: []string{"recommendations"}},
		{Name: "Major", PriorityThreshold: 50, Thresholds: levels.Thresholds{levels.ErrorRate: 10, levels.CPU: 80}},
	})
	if err != nil {
		t.Fatal(err)
	}
	d := &cliDaemon{win: &cliWindow{}}
	d.ctl, err = controller.New(controller.Options{Table: tab, Errors: d.win, Rules: levels.Rules{MinimumLevelDuration: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, d.ctl)
	tokens := func() api.Tokens { return api.Tokens{Admin: "adm"} }
	h := api.NewServer(api.Deps{Controller: d.ctl, Outcomes: d.win, Tokens: tokens})
	srv := daemontest.NewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.down.Load() {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		h.Handler().ServeHTTP(w, r)
	}))
	daemontest.RunAPI(t, h) // serves the event streams; ends them before srv closes
	d.srv, d.url = srv, srv.URL
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
		"Level     Minor (1 of 2): sheds priority below 10",
		"Source    auto (recommended: Minor)", "Reason    error_rate 6.00% > 1% (Minor)",
		"Override  none", "Disabled  recommendations",
		"next level: Major", "error rate  6.00%", "> 10.00%", "(100 attempts, 6 failures in the window)",
		"cpu         off    > 80.00%", "memory      off    -", // the daemon publishes signals.status
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "n/a") || strings.Contains(out, "Reports") {
		t.Errorf("status says n/a, or shows refused reports where none were:\n%s", out)
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
		{"unknown level", d.env, []string{"override", "set", "Panic", "--ttl", "1m", "--reason", "x"}, 2, `unknown level "Panic": the daemon's levels are Normal, Minor, Major`},
		{"ttl over the maximum", d.env, []string{"override", "set", "Major", "--ttl", "48h", "--reason", "x"}, 2, "ttl must be between"},
		{"missing reason", d.env, []string{"override", "set", "Major", "--ttl", "1m"}, 2, "reason"},
		{"missing level", d.env, []string{"override", "set", "--ttl", "1m", "--reason", "x"}, 2, "accepts 1 arg"},
		{"bad ttl", d.env, []string{"override", "set", "Major", "--ttl", "soon", "--reason", "x"}, 2, "ttl"},
		{"report without counts", d.env, []string{"report"}, 2, "--success and/or --failure"},
		{"report negative", d.env, []string{"report", "--success", "-1"}, 2, "success must be an integer"},
		{"bad address", nil, []string{"status", "--addr", "ftp://127.0.0.1:8470"}, 2, "--addr"},
		{"host:port unreachable", nil, []string{"status", "--addr", strings.TrimPrefix(dead, "http://")}, 1, "cannot reach degraded at " + dead},
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

// waitOutput waits, up to 10s, until out holds want.
func waitOutput(t *testing.T, out *lockedBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("watch output lacks %q:\n%s", want, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestOverrideLevelIgnoresCase(t *testing.T) {
	d := newCLIDaemon(t)
	code, out, errOut := runCLI(t, d.env, "override", "set", "mAJOR", "--ttl", "1m", "--reason", "INC-9")
	if code != 0 || !strings.Contains(out, "override pin Major until") {
		t.Fatalf("override set mAJOR: exit %d %q %q, want Major pinned", code, out, errOut)
	}
	if st := d.ctl.State(); st.Level != "Major" {
		t.Errorf("daemon at %q, want Major", st.Level)
	}
}

func TestAddrWithoutScheme(t *testing.T) {
	d := newCLIDaemon(t)
	code, out, errOut := runCLI(t, nil, "status", "--addr", strings.TrimPrefix(d.url, "http://"))
	if code != 0 || !strings.Contains(out, "Level     Normal (0 of 2): nothing shed") {
		t.Errorf("status --addr host:port: exit %d %q %q, want the status at Normal with nothing shed", code, out, errOut)
	}
	env := []string{"DEGRADED_ADDR=" + strings.TrimPrefix(d.url, "http://"), "DEGRADED_TOKEN=adm"}
	if code, _, errOut := runCLI(t, env, "override", "clear"); code != 0 {
		t.Errorf("DEGRADED_ADDR as host:port: exit %d %q", code, errOut)
	}
}

// A newer daemon counts refused reports and the live window in "reports",
// and each signal's state in signals.status: status shows them.
func TestStatusShowsRefusedReportsAndTheLiveWindow(t *testing.T) {
	levelsDoc := `{"levels":[{"name":"Normal","index":0,"priority_threshold":0},` +
		`{"name":"Minor","index":1,"priority_threshold":10,"error_rate_percent":1,"cpu_percent":60},` +
		`{"name":"Major","index":2,"priority_threshold":50,"error_rate_percent":10,"cpu_percent":80}]}`
	state := func(refused int64) string {
		return fmt.Sprintf(`{"level":"Normal","index":0,"priority_threshold":0,"source":"auto","recommended":"Normal","reason":"started",`+
			`"since":"2026-12-01T09:00:00Z","sequence":0,"override":null,"disabled_features":[],`+
			`"signals":{"cpu_percent":null,"memory_percent":null,"error_rate_percent":null,"window_attempts":0,"window_failures":0,`+
			`"status":{"cpu":"failed","memory":"off","error_rate":"absent"}},`+
			`"reports":{"refused_total":%d,"last_refused_at":"2026-12-01T10:00:00Z","window_attempts":5,"window_failures":1}}`, refused)
	}
	var refused atomic.Int64
	refused.Store(12)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/level":
			fmt.Fprintln(w, state(refused.Load()))
		case "/v1/levels":
			fmt.Fprintln(w, levelsDoc)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	code, out, errOut := runCLI(t, nil, "status", "--addr", srv.URL)
	if code != 0 {
		t.Fatalf("status: exit %d %s", code, errOut)
	}
	for _, want := range []string{
		"Level     Normal (0 of 2): nothing shed",
		"Reports   12 refused (last 2026-12-01T10:00:00Z, ",
		": check the report token",
		"(5 attempts, 1 failures in the window)",
		"cpu         failed  > 60.00%", "memory      off     -", "error rate  absent  > 1.00%",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	refused.Store(0)
	if _, out, _ := runCLI(t, nil, "status", "--addr", srv.URL); strings.Contains(out, "Reports") {
		t.Errorf("with no refused reports status should not mention them:\n%s", out)
	}
	if _, out, _ := runCLI(t, nil, "status", "--addr", srv.URL, "--json"); !strings.Contains(out, `"refused_total":0`) {
		t.Errorf("status --json should pass the daemon's document through, reports included: %s", out)
	}
}
