package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/degraded/degraded/client"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/controller/controllertest"
	"github.com/degraded/degraded/errwindow"
	"github.com/degraded/degraded/levels"
)

var _ controller.LatencyWindow = (*errwindow.Window)(nil)

// The client module cannot import errwindow, so it keeps its own copy of
// the latency buckets; a drift would put every latency in the wrong bucket.
func TestClientLatencyBoundsMatchTheDaemon(t *testing.T) {
	if c, d := client.LatencyBounds(), levels.LatencyBounds(); c != d {
		t.Errorf("client.LatencyBounds() = %v, levels.LatencyBounds() = %v; they must be equal", c, d)
	}
}

// latencyRig is a server over a real errwindow.Window and a controller
// whose Major level has a latency threshold of 500ms.
func latencyRig(t *testing.T) (*rig, *errwindow.Window) {
	t.Helper()
	tab, err := levels.NewTable([]levels.Level{
		{Name: "Minor", PriorityThreshold: 10, Thresholds: levels.Thresholds{levels.ErrorRate: 50}},
		{Name: "Major", PriorityThreshold: 50, Thresholds: levels.Thresholds{levels.Latency: 500}},
	})
	if err != nil {
		t.Fatal(err)
	}
	win, err := errwindow.New(errwindow.Options{Window: time.Minute, Buckets: 6})
	if err != nil {
		t.Fatal(err)
	}
	c, err := controller.New(controller.Options{Table: tab, Errors: win, Rules: levels.Rules{MinimumLevelDuration: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, c)
	r := &rig{c: c}
	r.h = NewServer(Deps{Controller: c, Outcomes: win}).Handler() // no stream: Run is not needed
	return r, win
}

// counts renders 14 latency counts with counts[i] = n for each pair i, n.
func counts(pairs ...int) string {
	c := make([]string, errwindow.NumLatencyBuckets)
	for i := range c {
		c[i] = "0"
	}
	for k := 0; k+1 < len(pairs); k += 2 {
		c[pairs[k]] = fmt.Sprint(pairs[k+1])
	}
	return "[" + strings.Join(c, ",") + "]"
}

func TestOutcomesLatencyCountsReachTheLatencySignal(t *testing.T) {
	r, win := latencyRig(t)
	// 90 requests at (50, 100]ms and 10 at (500, 1000]ms: p99 is 950ms, 9/10
	// into the slow bucket.
	w := r.do("POST", "/v1/outcomes", `{"success":95,"failure":5,"latency_counts":`+counts(6, 90, 9, 10)+`}`)
	if w.Code != http.StatusAccepted || !strings.Contains(w.Body.String(), `"accepted":100`) {
		t.Fatalf("outcomes with latency_counts: %d %s, want 202 accepted 100", w.Code, w.Body)
	}
	if ms, n := win.Quantile(time.Now(), 0.99); n != 100 || ms < 949 || ms > 951 {
		t.Fatalf("window p99 %v ms over %d, want 950 ms over 100", ms, n)
	}
	r.c.Check(context.Background())
	st := decodeBody[client.State](t, r.do("GET", "/v1/level", ""))
	if st.Level != "Major" || st.Reason != "latency p99 950ms > 500ms (Major)" {
		t.Errorf("after a slow report: level %q reason %q, want Major for latency p99 950ms > 500ms", st.Level, st.Reason)
	}
	if s := st.Signals; s.LatencyMS == nil || *s.LatencyMS < 949 || *s.LatencyMS > 951 || s.LatencyObservations != 100 || s.Status["latency"] != "available" {
		t.Errorf("signals: latency_ms %v observations %d status %q, want 950, 100, available", s.LatencyMS, s.LatencyObservations, s.Status["latency"])
	}
}

func TestOutcomesWithoutLatencyCountsAddNoObservations(t *testing.T) {
	r, win := latencyRig(t)
	for _, body := range []string{`{"success":10}`, `{"success":10,"latency_counts":null}`} {
		if w := r.do("POST", "/v1/outcomes", body); w.Code != http.StatusAccepted {
			t.Fatalf("%s: %d %s", body, w.Code, w.Body)
		}
	}
	if a, _ := win.Totals(time.Now()); a != 20 {
		t.Errorf("window attempts %d, want 20", a)
	}
	if _, n := win.Quantile(time.Now(), 0.99); n != 0 {
		t.Errorf("latency observations %d, want 0 from reports without latency_counts", n)
	}
}

func TestOutcomesLatencyCountsBadInput(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"too few", `{"success":100,"latency_counts":[1,2,3]}`, "latency_counts must have 14 counts (was 3)"},
		{"empty", `{"success":100,"latency_counts":[]}`, "latency_counts must have 14 counts (was 0)"},
		{"too many", `{"success":100,"latency_counts":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}`, "latency_counts must have 14 counts (was 15)"},
		{"negative", `{"success":100,"latency_counts":` + counts(2, -1) + `}`, "latency_counts[2] must be an integer 0..1000000000 (was -1)"},
		{"over 1e9", `{"success":100,"latency_counts":` + counts(13, 1000000001) + `}`, "latency_counts[13] must be an integer 0..1000000000 (was 1000000001)"},
		{"sum over the outcomes", `{"success":90,"failure":10,"latency_counts":` + counts(0, 100, 5, 20) + `}`, "latency_counts sum 120 exceeds success+failure 100"},
		{"float", `{"success":100,"latency_counts":[1.5,0,0,0,0,0,0,0,0,0,0,0,0,0]}`, `field "latency_counts" must be`},
		{"not an array", `{"success":100,"latency_counts":5}`, `field "latency_counts" must be`},
		{"duplicated", `{"success":100,"latency_counts":` + counts() + `,"latency_counts":` + counts() + `}`, `duplicate field "latency_counts"`},
		{"name case", `{"success":100,"Latency_Counts":` + counts() + `}`, `unknown field "Latency_Counts" (field names are case-sensitive: "latency_counts")`},
		{"latency without outcomes", `{"latency_counts":` + counts(0, 1) + `}`, `body must have "success" and/or "failure"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { refusesOutcomes(t, tt.body, tt.want) })
	}
}

// refusesOutcomes posts body to POST /v1/outcomes of a new latencyRig and
// checks that it is refused with a 400 naming want, and that nothing of
// it reached the window.
func refusesOutcomes(t *testing.T, body, want string) {
	t.Helper()
	r, win := latencyRig(t)
	w := r.do("POST", "/v1/outcomes", body)
	if got := decodeBody[errorBody](t, w).Error; w.Code != http.StatusBadRequest || !strings.Contains(got, want) {
		t.Errorf("%s: %d %q, want 400 naming %q", body, w.Code, got, want)
	}
	if a, _ := win.Totals(time.Now()); a != 0 {
		t.Errorf("a refused report reached the window: %d attempts", a)
	}
}

// A report of slow requests may escalate at once, like one of failures;
// a report of successes without latencies waits for the next tick.
func TestOutcomesWithLatencyCountsAreEvaluatedAtOnce(t *testing.T) {
	win, err := errwindow.New(errwindow.Options{Window: time.Minute, Buckets: 6})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, Deps{})
	reports := 0
	h := NewServer(Deps{Controller: r.c, Outcomes: win, Reported: func(levels.Report) { reports++ }}).Handler()
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"success":10}`, 0},
		{`{"success":10,"latency_counts":` + counts(9, 10) + `}`, 1},
		{`{"success":10,"failure":1}`, 2},
	} {
		req := newRequest("POST", "/v1/outcomes", tc.body)
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusAccepted || reports != tc.want {
			t.Errorf("%s: %d, %d evaluations so far; want 202 and %d", tc.body, w.Code, reports, tc.want)
		}
	}
}
