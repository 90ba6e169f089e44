package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

// at returns a client that believes the daemon published st.
func at(t testing.TB, st State, opts ...Option) *Client {
	t.Helper()
	c, err := New("http://127.0.0.1:1", opts...)
	if err != nil {
		t.Fatal(err)
	}
	c.accept(&st, time.Now())
	return c
}

func majorState(recovery time.Time) State {
	return State{Level: "Major", Index: 3, PriorityThreshold: 50, DisabledFeatures: []string{"recommendations", "search"}, EarliestRecoveryAt: &recovery, Sequence: 4}
}

func TestPriorityFromHeader(t *testing.T) {
	prio := PriorityFromHeader("X-Priority", 50)
	for _, tc := range []struct {
		header string
		want   int
	}{{"", 50}, {"10", 10}, {"0", 0}, {"7", 7}, {"100", 100}, {"999", 999}, {"0080", 80}, {"-5", 0}, {"+5", 5},
		{"high", 50}, {"1.5", 50}, {"1a", 50}, {"99999999999", PriorityCritical}} {
		r := httptest.NewRequest("GET", "/", nil)
		if tc.header != "" {
			r.Header.Set("X-Priority", tc.header)
		}
		if got := prio(r); got != tc.want {
			t.Errorf("X-Priority %q: %d, want %d", tc.header, got, tc.want)
		}
	}
}

// The short-number path must read every short header as strconv does.
func TestSmallPriorityAgreesWithAtoi(t *testing.T) {
	var cases []string
	for i := range 1000 {
		cases = append(cases, strconv.Itoa(i), fmt.Sprintf("%03d", i), fmt.Sprintf("%02d", i%100))
	}
	cases = append(cases, "", "-", "+", "-1", "+1", " 1", "1 ", "1e2", "0x1", "a", "٣")
	for _, s := range cases {
		got, ok := smallPriority(s)
		want, err := strconv.Atoi(s)
		if ok && (err != nil || got != want) {
			t.Errorf("smallPriority(%q) = %d, but strconv.Atoi says %d, %v", s, got, want, err)
		}
		if !ok && err == nil && len(s) <= 3 && s[0] != '-' && s[0] != '+' {
			t.Errorf("smallPriority(%q) left a plain short number to strconv", s)
		}
	}
}

// The middleware runs in a synctest bubble, whose clock moves only when
// every goroutine waits: a handler that returns at once takes no time, so
// the latency buckets are exact and a slow CI machine cannot move them.
func TestMiddleware(t *testing.T) {
	synctest.Test(t, testMiddleware)
}

func testMiddleware(t *testing.T) {
	now := time.Now()
	c := at(t, majorState(now.Add(42500*time.Millisecond)))
	h := Middleware(c, PriorityFromHeader("X-Priority", 50))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/boom":
			w.WriteHeader(http.StatusBadGateway)
		case "/teapot":
			w.WriteHeader(http.StatusTeapot)
		case "/panic":
			panic("handler bug")
		default:
			w.Write([]byte("ok"))
		}
	}))
	serve := func(path, prio string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		if prio != "" {
			r.Header.Set("X-Priority", prio)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}

	w := serve("/", "10")
	if w.Code != 503 || w.Header().Get("X-Degraded-Level") != "Major" {
		t.Fatalf("priority 10 at Major: %d level %q, want 503 Major", w.Code, w.Header().Get("X-Degraded-Level"))
	}
	if ra := w.Header().Get("Retry-After"); ra != "43" && ra != "42" {
		t.Errorf("Retry-After %q, want the 43s until earliest_recovery_at", ra)
	}
	if s, f, _ := counted(c); s != 0 || f != 0 {
		t.Fatalf("a shed request was recorded: %d successes %d failures", s, f)
	}

	for _, tc := range []struct {
		path, prio string
		code       int
	}{{"/", "", 200}, {"/", "50", 200}, {"/teapot", "99", 418}, {"/boom", "", 502}, {"/", "2147483647", 200}} {
		if w := serve(tc.path, tc.prio); w.Code != tc.code {
			t.Errorf("%s priority %q: %d, want %d", tc.path, tc.prio, w.Code, tc.code)
		}
	}
	func() {
		defer func() {
			if r := recover(); r != "handler bug" {
				t.Errorf("recovered %v, want the handler's panic to go on", r)
			}
		}()
		serve("/panic", "")
	}()
	if s, f, l := counted(c); s != 4 || f != 2 || l[0] != 6 {
		t.Errorf("recorded %d successes %d failures, latencies %v; want 4 (200, 200, 418, 200) and 2 (502, panic), all 6 in the <= 1ms bucket", s, f, l)
	}
}

// counted sums what c counted and no flush took yet: the outcomes of
// Record and Observe, and Observe's latencies by bucket.
func counted(c *Client) (success, failure int64, latency [numLatencyBuckets]int64) {
	success, failure = c.success.Load(), c.failure.Load()
	for i := range latency {
		f, s := c.observed[0][i].Load(), c.observed[1][i].Load()
		failure += f
		success += s
		latency[i] = f + s
	}
	return success, failure, latency
}

func TestMiddlewareRetryAfterIsAtLeastOne(t *testing.T) {
	st := majorState(time.Now().Add(-time.Minute)) // recovery overdue
	c := at(t, st)
	w := httptest.NewRecorder()
	Middleware(c, PriorityFromHeader("X-Priority", 0))(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != 503 || w.Header().Get("Retry-After") != "1" {
		t.Errorf("%d Retry-After %q, want 503 with 1", w.Code, w.Header().Get("Retry-After"))
	}
}

// Shed requests must never reach the daemon's failure count, end to end.
func TestShedRequestsNeverReachTheErrorWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		d.override("Major")
		d.start()
		c := d.newClient()
		stop := running(t, c)
		synctest.Wait()
		h := Middleware(c, PriorityFromHeader("X-Priority", 10))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		shed := 0
		for i := range 100 {
			r := httptest.NewRequest("GET", "/", nil)
			if i%4 == 0 {
				r.Header.Set("X-Priority", "80")
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code == 503 {
				shed++
			}
		}
		stop()
		if a, f := d.win.Totals(time.Now()); shed != 75 || a != 25 || f != 0 {
			t.Errorf("shed %d, daemon saw %d attempts %d failures; want 75 shed and only the 25 served, as successes", shed, a, f)
		}
	})
}

func TestDo(t *testing.T) {
	full := func(context.Context) (string, error) { return "full", nil }
	cached := func(context.Context) (string, error) { return "cached", nil }
	static := func(context.Context) (string, error) { return "static", nil }
	names := []string{"Normal", "Minor", "Moderate", "Major", "Severe"}
	type fb = map[string]func(context.Context) (string, error)
	tests := []struct {
		name      string
		level     string
		index     int
		threshold int
		priority  int
		fallbacks fb
		want      string
		err       error
	}{
		{"normal runs primary", "Normal", 0, 0, 0, nil, "full", nil},
		{"admitted runs primary", "Major", 3, 50, 60, fb{"Major": cached}, "full", nil},
		{"current level's fallback", "Major", 3, 50, 20, fb{"Moderate": static, "Major": cached}, "cached", nil},
		{"fallback at its own level", "Moderate", 2, 30, 20, fb{"Moderate": cached}, "cached", nil},
		{"a fallback serves the levels above it", "Major", 3, 50, 20, fb{"Moderate": cached}, "cached", nil},
		{"up to the most severe level", "Severe", 4, 70, 20, fb{"Moderate": cached}, "cached", nil},
		{"the nearest less severe one wins", "Severe", 4, 70, 20, fb{"Minor": static, "Major": cached}, "cached", nil},
		{"a more severe level's own takes over", "Severe", 4, 70, 20, fb{"Moderate": cached, "Severe": static}, "static", nil},
		{"more severe fallbacks do not apply below", "Moderate", 2, 30, 20, fb{"Major": cached, "Severe": static}, "", ErrShed},
		{"a Normal fallback serves every level", "Minor", 1, 10, 5, fb{"Normal": cached}, "cached", nil},
		{"no fallbacks", "Major", 3, 50, 20, nil, "", ErrShed},
		{"an unknown level name in the map", "Major", 3, 50, 20, fb{"Panic": cached}, "", ErrShed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := at(t, State{Level: tt.level, Index: tt.index, PriorityThreshold: tt.threshold})
			c.names.Store(&names)
			got, err := Do(t.Context(), c, Operation[string]{Priority: tt.priority, Primary: full, Fallbacks: tt.fallbacks})
			if got != tt.want || !errors.Is(err, tt.err) {
				t.Errorf("Do = %q, %v; want %q, %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8470", "ftp://host", "http://"} {
		if _, err := New(u); err == nil {
			t.Errorf("New(%q) succeeded, want an error", u)
		}
	}
	if _, err := New("http://x", WithFailMode(FailMode(9))); err == nil {
		t.Error("New with an unknown fail mode succeeded")
	}
	c, err := New("http://127.0.0.1:8470/")
	if err != nil || c.Addr() != "http://127.0.0.1:8470" {
		t.Errorf("New: %v addr %q", err, c.Addr())
	}
	if !c.Stale() || !c.Allow(0) || !c.Feature("x") || c.State().Level != "" {
		t.Error("a new client must be stale, fail open and have the zero State")
	}
}

func TestStateIsACopy(t *testing.T) {
	major := majorState(time.Now())
	major.Signals.Status = map[string]string{"cpu": "available"}
	major.Fleet = &FleetState{Name: "web", Connected: true, Override: &FleetOverride{Override: Override{Level: "Major"}, ModRevision: 7}}
	c := at(t, major)
	st := c.State()
	st.DisabledFeatures[0] = "changed"
	*st.EarliestRecoveryAt = time.Time{}
	st.Signals.Status["cpu"] = "failed"
	st.Fleet.Connected = false
	st.Fleet.Override.Level = "Severe"
	if c.Feature("recommendations") || c.State().EarliestRecoveryAt.IsZero() || c.State().Signals.Status["cpu"] != "available" {
		t.Error("changing a returned State changed the client's")
	}
	if f := c.State().Fleet; !f.Connected || f.Override.Level != "Major" {
		t.Errorf("changing a returned State's fleet object changed the client's: %+v", f)
	}
}
