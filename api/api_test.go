package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/controller/controllertest"
	"github.com/degraded/degraded/levels"
	"github.com/prometheus/client_golang/prometheus"
)

func testTable(t testing.TB) *levels.Table {
	t.Helper()
	tab, err := levels.NewTable([]levels.Level{
		{Name: "Minor", PriorityThreshold: 10, Thresholds: levels.Thresholds{levels.ErrorRate: 1, levels.CPU: 60}, Disable: []string{"recommendations"}},
		{Name: "Moderate", PriorityThreshold: 30, Thresholds: levels.Thresholds{levels.ErrorRate: 5, levels.CPU: 70}},
		{Name: "Major", PriorityThreshold: 50, Thresholds: levels.Thresholds{levels.ErrorRate: 10, levels.CPU: 80}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// window is a fake error window that sums what it is given.
type window struct {
	mu       sync.Mutex
	success  int64
	failures int64
}

func (w *window) Record(_ time.Time, s, f int64) {
	w.mu.Lock()
	w.success += s
	w.failures += f
	w.mu.Unlock()
}

func (w *window) Totals(time.Time) (int64, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.success + w.failures, w.failures
}

type rig struct {
	c      *controller.Controller
	m      *Metrics
	win    *window
	reg    *prometheus.Registry
	tokens *atomic.Pointer[Tokens]
	srv    *Server
	h      http.Handler
	// stop ends srv.Run, which ends every stream and long-poll, and waits
	// for it; the rig calls it when the test ends.
	stop func()
}

// newRig is a server over a running controller that health-checks only
// when the test asks (its first check ran at the start).
func newRig(t testing.TB, d Deps) *rig {
	t.Helper()
	r := newIdleRig(t, d)
	controllertest.Run(t, r.c)
	return r
}

// newIdleRig is newRig before the controller runs: no health check yet.
func newIdleRig(t testing.TB, d Deps) *rig {
	t.Helper()
	return newIdleRigEvery(t, d, 1000*time.Hour)
}

// newIdleRigEvery is newIdleRig with a health check every interval once
// the controller runs (the interval also sizes the samples kept).
func newIdleRigEvery(t testing.TB, d Deps, interval time.Duration) *rig {
	t.Helper()
	r := &rig{win: &window{}, reg: prometheus.NewRegistry(), tokens: new(atomic.Pointer[Tokens])}
	tab := testTable(t)
	var names []string
	for _, l := range tab.Levels() {
		names = append(names, l.Name)
	}
	m := NewMetrics(r.reg, names)
	c, err := controller.New(controller.Options{Table: tab, Errors: r.win, Observer: m, HealthCheckInterval: interval,
		Rules: levels.Rules{MinimumLevelDuration: time.Minute, Hysteresis: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	r.c, r.m = c, m
	r.tokens.Store(&Tokens{})
	d.Controller, d.Outcomes, d.Gatherer, d.Metrics = c, r.win, r.reg, m
	d.Tokens = func() Tokens { return *r.tokens.Load() }
	r.srv = NewServer(d)
	r.h = r.srv.Handler()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.srv.Run(ctx) }()
	r.stop = sync.OnceFunc(func() {
		stop()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Server.Run returned %v, want context.Canceled", err)
		}
	})
	t.Cleanup(r.stop) // after the controller stops; goleak then checks that Run's goroutines are gone
	return r
}

// testHost is the Host of the rig's requests: a loopback name, as the
// CLI sends to a daemon on its default address.
const testHost = "localhost:8470"

// newRequest is httptest.NewRequest sent to testHost.
func newRequest(method, target, body string) *http.Request {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.Host = testHost
	return req
}

// do performs a request against the handler and returns the recorder.
// hdr holds name, value pairs; "Host" sets the request's Host.
func (r *rig) do(method, target, body string, hdr ...string) *httptest.ResponseRecorder {
	req := newRequest(method, target, body)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	r.h.ServeHTTP(w, req)
	return w
}

func decodeBody[T any](t *testing.T, w *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("body %q: %v", w.Body.String(), err)
	}
	return v
}

func (r *rig) fail(t *testing.T, success, failure int) {
	t.Helper()
	body, _ := json.Marshal(map[string]int{"success": success, "failure": failure})
	if w := r.do("POST", "/v1/outcomes", string(body)); w.Code != http.StatusAccepted {
		t.Fatalf("outcomes: %d %s", w.Code, w.Body)
	}
	r.c.Check(context.Background())
}

func TestLevelDocument(t *testing.T) {
	r := newRig(t, Deps{})
	r.fail(t, 939, 61)
	w := r.do("GET", "/v1/level", "")
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/level: %d %s", w.Code, w.Header().Get("Content-Type"))
	}
	var doc map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"level", "index", "priority_threshold", "disabled_features", "source", "recommended", "reason", "since", "earliest_recovery_at", "sequence", "override", "signals"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("state document lacks %q", k)
		}
	}
	if doc["level"] != "Moderate" || doc["reason"] != "error_rate 6.10% > 5% (Moderate)" || doc["override"] != nil {
		t.Errorf("document %v, want Moderate by error_rate with no override", doc)
	}
	sig := doc["signals"].(map[string]any)
	if sig["cpu_percent"] != nil || sig["window_attempts"] != 1000.0 || sig["window_failures"] != 61.0 {
		t.Errorf("signals %v, want cpu null (off) and the window counts", sig)
	}
	if !strings.Contains(w.Body.String(), `"error_rate 6.10% > 5% (Moderate)"`) {
		t.Errorf("reason must be readable in the raw JSON, without \\u003e: %s", w.Body)
	}
	if got := w.Header().Get("ETag"); got != `W/"1"` {
		t.Errorf("ETag %q, want W/\"1\"", got)
	}
	if w := r.do("GET", "/v1/level", "", "If-None-Match", `W/"1"`); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Errorf("If-None-Match current: %d, want 304 without a body", w.Code)
	}
	if w := r.do("GET", "/v1/level", "", "If-None-Match", `W/"0"`); w.Code != 200 {
		t.Errorf("If-None-Match stale: %d, want 200", w.Code)
	}
}

// levelDocument is the state document as encoding/json writes it: the
// state and the reports seen (outside sequence coverage: they never change
// the ETag). The server writes it by hand, and must write the same bytes.
type levelDocument struct {
	*controller.State
	Reports   reports    `json:"reports"`
	StateFile *stateFile `json:"state_file"`
}

// reports says whether outcome reports arrive: refused ones, for their
// token, and the error window's live totals.
type reports struct {
	RefusedTotal   int64      `json:"refused_total"`
	LastRefusedAt  *time.Time `json:"last_refused_at"`
	WindowAttempts int64      `json:"window_attempts"`
	WindowFailures int64      `json:"window_failures"`
	// WouldShed is shadow_would_shed_total by level: what clients and
	// GET /v1/admit admitted in shadow mode that enforcement would have shed.
	WouldShed map[string]int64 `json:"would_shed"`
}

// GET /v1/level shares the encoding of the published state with the SSE
// event; it must still answer exactly what encoding the whole document
// answers, and never a state older than the one published.
// report posts outcomes with the report token and runs a health check.
func (r *rig) report(t *testing.T, success, failure int) {
	t.Helper()
	body := fmt.Sprintf(`{"success":%d,"failure":%d}`, success, failure)
	if w := r.do("POST", "/v1/outcomes", body, "Authorization", "Bearer rep"); w.Code != http.StatusAccepted {
		t.Fatalf("outcomes: %d %s", w.Code, w.Body)
	}
	r.c.Check(context.Background())
}

func TestLevelDocumentIsFreshAndWhole(t *testing.T) {
	r := newRig(t, Deps{})
	r.tokens.Store(&Tokens{Admin: "s3cret", Report: "rep"})
	for i, step := range []func(){
		func() {},
		func() { r.report(t, 939, 61) },
		func() { r.report(t, 1, 0) }, // reports move, the state does not
		func() {
			if w := r.do("PUT", "/v1/override", `{"level":"Major","mode":"pin","ttl":"1m","reason":"INC-7"}`, "Authorization", "Bearer s3cret"); w.Code != 200 {
				t.Fatalf("PUT /v1/override: %d %s", w.Code, w.Body)
			}
		},
		func() { r.do("POST", "/v1/outcomes", `{"success":1}`, "Authorization", "Bearer wrong") }, // refused
		func() { r.m.addWouldShed(map[string]int64{"Major": 3, "Nonesuch": 1}) },
	} {
		step()
		got := r.do("GET", "/v1/level", "").Body.String()
		var seen struct{ Reports reports }
		if err := json.Unmarshal([]byte(got), &seen); err != nil {
			t.Fatalf("step %d: %v: %s", i, err, got)
		}
		doc := levelDocument{State: r.c.State(), Reports: seen.Reports}
		var want strings.Builder
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(doc); err != nil {
			t.Fatal(err)
		}
		if got != want.String() {
			t.Errorf("step %d: GET /v1/level\n got %s\nwant %s", i, got, want.String())
		}
		if a, f := r.win.Totals(time.Now()); seen.Reports.WindowAttempts != a || seen.Reports.WindowFailures != f {
			t.Errorf("step %d: reports %+v, want the window's %d attempts and %d failures", i, seen.Reports, a, f)
		}
	}
	var last struct{ Reports reports }
	_ = json.Unmarshal(r.do("GET", "/v1/level", "").Body.Bytes(), &last)
	if rep := last.Reports; rep.RefusedTotal != 1 || rep.LastRefusedAt == nil || rep.WouldShed["Major"] != 3 || rep.WouldShed["unknown"] != 1 {
		t.Errorf("reports %+v, want 1 refused and would_shed Major 3, unknown 1", rep)
	}
	if !strings.Contains(r.do("GET", "/v1/level", "").Body.String(), `"level":"Major"`) {
		t.Error("the document does not show the pin set last")
	}
}

func TestLongPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Deps{})
		done := make(chan *httptest.ResponseRecorder, 1)
		go func() { done <- r.do("GET", "/v1/level?wait=30s&after=0", "") }()
		synctest.Wait()
		select {
		case w := <-done:
			t.Fatalf("long-poll answered before any change: %d %s", w.Code, w.Body)
		default:
		}
		time.Sleep(10 * time.Second)
		if _, err := r.c.SetOverride(controller.OverrideRequest{Level: "Major", Mode: controller.ModePin, TTL: time.Minute, Reason: "INC-1"}); err != nil {
			t.Fatal(err)
		}
		w := <-done
		if st := decodeBody[controller.State](t, w); w.Code != 200 || st.Sequence != 1 || st.Level != "Major" {
			t.Fatalf("long-poll: %d %+v, want 200 with sequence 1 at Major", w.Code, st)
		}

		start := time.Now()
		w = r.do("GET", "/v1/level?wait=30s&after=1", "")
		if st := decodeBody[controller.State](t, w); w.Code != 200 || st.Sequence != 1 || time.Since(start) != 30*time.Second {
			t.Fatalf("long-poll without change: %d seq %d after %v, want 200 with the current state after 30s", w.Code, st.Sequence, time.Since(start))
		}
		start = time.Now()
		r.do("GET", "/v1/level?wait=10m&after=1", "")
		if waited := time.Since(start); waited != time.Minute {
			t.Errorf("wait=10m waited %v, want the 60s cap", waited)
		}
		if w := r.do("GET", "/v1/level?wait=30s&after=0", ""); w.Code != 200 {
			t.Errorf("already past after: %d, want an immediate 200", w.Code)
		}
		for _, q := range []string{"wait=soon&after=0", "wait=1s&after=-1", "wait=1s", "after=3"} {
			if w := r.do("GET", "/v1/level?"+q, ""); w.Code != 400 {
				t.Errorf("?%s: %d, want 400", q, w.Code)
			}
		}
	})
}

func TestAdmit(t *testing.T) {
	r := newRig(t, Deps{})
	if w := r.do("GET", "/v1/admit?priority=0", ""); w.Code != 204 || w.Header().Get("X-Degraded-Level") != "Normal" {
		t.Fatalf("at Normal: %d level %q, want 204 Normal", w.Code, w.Header().Get("X-Degraded-Level"))
	}
	r.fail(t, 85, 15) // Major: threshold 50
	tests := []struct {
		query string
		code  int
	}{
		{"priority=50", 204},
		{"priority=2147483647", 204},
		{"priority=49", 503},
		{"priority=49&deny_status=403", 403},
		{"priority=49&deny_status=429", 429},
		{"priority=49&deny_status=500", 400},
		{"priority=high", 400},
		{"priority=-1", 400},
		{"", 400},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			w := r.do("GET", "/v1/admit?"+tt.query, "")
			if w.Code != tt.code {
				t.Fatalf("%d %s, want %d", w.Code, w.Body, tt.code)
			}
			if tt.code == 503 || tt.code == 403 || tt.code == 429 {
				b := decodeBody[shedBody](t, w)
				if b.Error != "shed" || b.Level != "Major" || b.PriorityThreshold != 50 {
					t.Errorf("shed body %+v", b)
				}
				if ra := w.Header().Get("Retry-After"); ra != "60" {
					t.Errorf("Retry-After %q, want 60 (the minimum level duration)", ra)
				}
			}
		})
	}
}

func TestBadInputs(t *testing.T) {
	r := newRig(t, Deps{})
	big := `{"success":1,"failure":1,"x":"` + strings.Repeat("a", 70<<10) + `"}`
	tests := []struct {
		name, method, path, body, ctype string
		code                            int
		msg                             string
	}{
		{"unknown field", "POST", "/v1/outcomes", `{"success":1,"failures":2}`, "", 400, `unknown field "failures"`},
		{"negative", "POST", "/v1/outcomes", `{"success":-1}`, "", 400, "success must be an integer 0..1000000000 (was -1)"},
		{"too many", "POST", "/v1/outcomes", `{"failure":1000000001}`, "", 400, "failure must be an integer"},
		{"float", "POST", "/v1/outcomes", `{"success":1.5}`, "", 400, `field "success" must be an integer`},
		{"string count", "POST", "/v1/outcomes", `{"success":"1"}`, "", 400, `field "success" must be an integer`},
		{"string reason", "PUT", "/v1/override", `{"level":"Major","ttl":"1m","reason":7}`, "", 400, `field "reason" must be a string`},
		{"not json", "POST", "/v1/outcomes", `success=1`, "", 400, "not valid JSON"},
		{"truncated", "POST", "/v1/outcomes", `{"success":1`, "", 400, "not valid JSON"},
		{"empty object", "POST", "/v1/outcomes", `{}`, "", 400, `"success" and/or "failure"`},
		{"two values", "POST", "/v1/outcomes", `{"success":1}{"success":1}`, "", 400, "single JSON object"},
		{"field name case", "POST", "/v1/outcomes", `{"SUCCESS":1}`, "", 400, `unknown field "SUCCESS" (field names are case-sensitive: "success")`},
		{"duplicated key", "POST", "/v1/outcomes", `{"success":1,"success":2}`, "", 400, `duplicate field "success"`},
		{"duplicated key, first invalid", "POST", "/v1/outcomes", `{"success":-1,"success":2}`, "", 400, `duplicate field "success"`},
		{"override field name case", "PUT", "/v1/override", `{"Level":"Major","ttl":"1m","reason":"x"}`, "", 400, `unknown field "Level" (field names are case-sensitive: "level")`},
		{"override duplicated key", "PUT", "/v1/override", `{"level":"Minor","ttl":"1m","reason":"x","level":"Major"}`, "", 400, `duplicate field "level"`},
		{"truncated after a key", "POST", "/v1/outcomes", `{"success":`, "", 400, "not valid JSON"},
		{"whitespace only", "POST", "/v1/outcomes", "  \n", "", 400, "body is empty"},
		{"content type", "POST", "/v1/outcomes", `{"success":1}`, "text/plain", 415, "application/json"},
		{"too large", "POST", "/v1/outcomes", big, "", 413, "larger than 65536 bytes"},
		{"override unknown level", "PUT", "/v1/override", `{"level":"Panic","mode":"pin","ttl":"1m","reason":"x"}`, "", 400, `unknown level "Panic"`},
		{"override bad ttl", "PUT", "/v1/override", `{"level":"Major","mode":"pin","ttl":"forever","reason":"x"}`, "", 400, `ttl must be a duration`},
		{"override long ttl", "PUT", "/v1/override", `{"level":"Major","mode":"pin","ttl":"48h","reason":"x"}`, "", 400, "ttl must be between 1s and 24h0m0s"},
		{"override no reason", "PUT", "/v1/override", `{"level":"Major","mode":"pin","ttl":"1m"}`, "", 400, "reason must be 1 to 500"},
		{"override reason of spaces", "PUT", "/v1/override", `{"level":"Major","mode":"pin","ttl":"1m","reason":" \t "}`, "", 400, "reason must say why (was only spaces)"},
		{"override reason of two lines", "PUT", "/v1/override", `{"level":"Major","mode":"pin","ttl":"1m","reason":"INC-42\nresolved by alice"}`, "", 400, `reason must be one line of text (was "INC-42\nresolved by alice")`},
		{"override reason with a terminal escape", "PUT", "/v1/override", `{"level":"Major","mode":"pin","ttl":"1m","reason":"\u001b[2JINC-42"}`, "", 400, "reason must be one line of text"},
		{"override bad mode", "PUT", "/v1/override", `{"level":"Major","mode":"max","ttl":"1m","reason":"x"}`, "", 400, "mode must be pin or floor"},
		{"history limit", "GET", "/v1/history?limit=0", "", "", 400, "limit must be an integer 1..1000"},
		{"admit priority twice", "GET", "/v1/admit?priority=10&priority=2147483647", "", "", 400, "priority must be given once (was given 2 times)"},
		{"admit deny_status twice", "GET", "/v1/admit?priority=10&deny_status=429&deny_status=503", "", "", 400, "deny_status must be given once (was given 2 times)"},
		{"unknown path", "GET", "/v2/level", "", "", 404, "no such endpoint"},
		{"wrong method", "DELETE", "/v1/level", "", "", 405, "method not allowed"},
		{"wrong method on override", "POST", "/v1/override", "", "", 405, "method not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest(tt.method, tt.path, tt.body)
			ct := tt.ctype
			if ct == "" {
				ct = "application/json"
			}
			req.Header.Set("Content-Type", ct)
			w := httptest.NewRecorder()
			r.h.ServeHTTP(w, req)
			if w.Code != tt.code {
				t.Fatalf("%d %s, want %d", w.Code, w.Body, tt.code)
			}
			if tt.code == 405 {
				want := map[string]string{"/v1/level": "GET", "/v1/override": "GET, PUT, DELETE"}[tt.path]
				if got := w.Header().Get("Allow"); got != want {
					t.Errorf("Allow %q, want %q", got, want)
				}
			}
			if b := decodeBody[errorBody](t, w); !strings.Contains(b.Error, tt.msg) {
				t.Errorf("error %q, want it to contain %q", b.Error, tt.msg)
			}
		})
	}
	if a, f := r.win.Totals(time.Now()); a != 0 || f != 0 {
		t.Errorf("rejected reports reached the window: %d attempts %d failures", a, f)
	}
}

func TestOverrideAndAuth(t *testing.T) {
	r := newRig(t, Deps{Reload: func(string) error { return nil }})
	r.tokens.Store(&Tokens{Admin: "s3cret", Report: "rep"})
	body := `{"level":"Major","mode":"floor","ttl":"15m","reason":"INC-42"}`
	for _, tc := range []struct{ name, auth string }{{"none", ""}, {"wrong", "Bearer nope"}, {"report token", "Bearer rep"}, {"basic", "Basic s3cret"}} {
		w := r.do("PUT", "/v1/override", body, "Authorization", tc.auth)
		if w.Code != 401 || w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s: %d %q, want 401 with WWW-Authenticate", tc.name, w.Code, w.Header().Get("WWW-Authenticate"))
		}
		if strings.Contains(w.Body.String(), "s3cret") {
			t.Errorf("%s: the token leaked into the answer", tc.name)
		}
	}
	if w := r.do("POST", "/v1/outcomes", `{"success":1}`, "Authorization", "Bearer s3cret"); w.Code != 202 {
		t.Errorf("outcomes with the admin token: %d, want 202 (report routes take either token)", w.Code)
	}
	if w := r.do("POST", "/v1/outcomes", `{"success":1}`, "Authorization", "Bearer rep"); w.Code != 202 {
		t.Errorf("outcomes with the report token: %d, want 202", w.Code)
	}
	if w := r.do("POST", "/-/reload", "", "Authorization", "Bearer rep"); w.Code != 401 {
		t.Errorf("reload with the report token: %d, want 401", w.Code)
	}
	if r.c.State().Sequence != 0 {
		t.Fatal("an unauthenticated request changed the state")
	}

	w := r.do("PUT", "/v1/override", body, "Authorization", "bearer s3cret")
	st := decodeBody[controller.State](t, w)
	if w.Code != 200 || st.Level != "Major" || st.Source != "override" || st.Override == nil || st.Override.Mode != "floor" {
		t.Fatalf("PUT: %d %+v", w.Code, st)
	}
	if !st.Override.ExpiresAt.Equal(st.Override.SetAt.Add(15 * time.Minute)) {
		t.Errorf("override %+v, want expiry 15m after set", st.Override)
	}
	got := decodeBody[map[string]*controller.Override](t, r.do("GET", "/v1/override", ""))
	if o := got["override"]; o == nil || o.Reason != "INC-42" {
		t.Errorf("GET /v1/override = %v", got)
	}
	w = r.do("DELETE", "/v1/override", "", "Authorization", "Bearer s3cret")
	if st := decodeBody[controller.State](t, w); w.Code != 200 || st.Override != nil || st.Level != "Major" || st.Sequence != 2 {
		t.Fatalf("DELETE: %d %+v, want no override, still Major, sequence 2", w.Code, st)
	}
	w = r.do("DELETE", "/v1/override", "", "Authorization", "Bearer s3cret")
	if st := decodeBody[controller.State](t, w); w.Code != 200 || st.Sequence != 2 {
		t.Errorf("DELETE without an override: %d seq %d, want a 200 no-op", w.Code, st.Sequence)
	}
	h := decodeBody[map[string][]controller.Transition](t, r.do("GET", "/v1/history?limit=1", ""))
	if tr := h["transitions"]; len(tr) != 1 || tr[0].Reason != "override cleared: INC-42" || tr[0].Source != "override" {
		t.Errorf("history %+v, want the clear, newest first", tr)
	}
}

func TestLevelsAndProbes(t *testing.T) {
	r := newIdleRig(t, Deps{})
	type row struct {
		Name       string   `json:"name"`
		CPUPercent *float64 `json:"cpu_percent"`
		Disable    []string `json:"disable"`
	}
	ls := decodeBody[map[string][]row](t, r.do("GET", "/v1/levels", ""))["levels"]
	if len(ls) != 4 || ls[0].Name != "Normal" || ls[0].CPUPercent != nil || ls[3].Name != "Major" || *ls[3].CPUPercent != 80 || ls[1].Disable[0] != "recommendations" {
		t.Errorf("levels %+v", ls)
	}
	raw := r.do("GET", "/v1/levels", "").Body.String()
	if !strings.Contains(raw, `"memory_percent":null`) {
		t.Errorf("an unset threshold must be null: %s", raw)
	}
	if w := r.do("GET", "/healthz", ""); w.Code != 200 {
		t.Errorf("healthz %d", w.Code)
	}
	if w := r.do("GET", "/readyz", ""); w.Code != 503 {
		t.Errorf("readyz before the first check: %d, want 503", w.Code)
	}
	controllertest.Run(t, r.c) // the first check
	if w := r.do("GET", "/readyz", ""); w.Code != 200 {
		t.Errorf("readyz after the first check: %d, want 200", w.Code)
	}
}

func TestReload(t *testing.T) {
	var calls atomic.Int64
	r := newRig(t, Deps{Reload: func(string) error {
		if calls.Add(1) == 2 {
			return errBadConfig
		}
		return nil
	}})
	if w := r.do("POST", "/-/reload", ""); w.Code != 200 {
		t.Fatalf("reload: %d %s", w.Code, w.Body)
	}
	w := r.do("POST", "/-/reload", "")
	if b := decodeBody[errorBody](t, w); w.Code != 400 || !strings.Contains(b.Error, "health_check_interval: must be > 0 (was 0s)") {
		t.Fatalf("invalid reload: %d %q, want 400 naming the problem", w.Code, b.Error)
	}
}

type configError string

func (e configError) Error() string { return string(e) }

const errBadConfig = configError("health_check_interval: must be > 0 (was 0s)")
