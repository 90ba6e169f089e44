package openapi_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/controller/controllertest"
	"github.com/degraded/degraded/internal/daemon/daemontest"
	"github.com/degraded/degraded/levels"
	"github.com/prometheus/client_golang/prometheus"
)

// specPath is the document under test, in the daemon's module.
const specPath = "../../api/openapi.yaml"

// The helpers below are copied from api/api_test.go (package api), which
// this module cannot import: the table, the fake window and the rig that
// serves the real controller through api.NewServer, run until the test ends.

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

// rig is the real controller served by the real API.
type rig struct {
	c      *controller.Controller
	win    *window
	tokens *atomic.Pointer[api.Tokens]
	h      http.Handler
}

// newRig is an API over a running controller that health-checks only
// when the test asks (its first check ran at the start).
func newRig(t testing.TB, d api.Deps) *rig {
	t.Helper()
	r := newIdleRig(t, d)
	controllertest.Run(t, r.c)
	return r
}

// newIdleRig is newRig before the controller runs: no health check yet
// (controllertest.Run makes the first).
func newIdleRig(t testing.TB, d api.Deps) *rig {
	t.Helper()
	win, reg, tokens := &window{}, prometheus.NewRegistry(), new(atomic.Pointer[api.Tokens])
	tab := testTable(t)
	var names []string
	for _, l := range tab.Levels() {
		names = append(names, l.Name)
	}
	m := api.NewMetrics(reg, names)
	c, err := controller.New(controller.Options{Table: tab, Errors: win, Observer: m, HealthCheckInterval: 1000 * time.Hour,
		Rules: levels.Rules{MinimumLevelDuration: time.Minute, Hysteresis: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	tokens.Store(&api.Tokens{})
	d.Controller, d.Outcomes, d.Gatherer, d.Metrics = c, win, reg, m
	d.Tokens = func() api.Tokens { return *tokens.Load() }
	srv := api.NewServer(d)
	daemontest.RunAPI(t, srv) // serves the event streams until the test ends
	return &rig{c: c, win: win, tokens: tokens, h: srv.Handler()}
}

// setShadow reloads the controller in shadow mode or back to enforce.
func (r *rig) setShadow(t testing.TB, shadow bool) {
	t.Helper()
	if err := r.c.Reconfigure(controller.Options{Table: testTable(t), Errors: r.win, Rules: levels.Rules{MinimumLevelDuration: time.Minute, Hysteresis: 0.1, Shadow: shadow}}, "alice"); err != nil {
		t.Fatal(err)
	}
}

type configError string

func (e configError) Error() string { return string(e) }

const errBadConfig = configError("health_check_interval: must be > 0 (was 0s)")

// fakeTimeline serves one recorded line, or is off.
type fakeTimeline struct{ off atomic.Bool }

func (f *fakeTimeline) Enabled() bool { return !f.off.Load() }

func (f *fakeTimeline) WriteRange(_ context.Context, w io.Writer, _, _ time.Time) error {
	_, err := io.WriteString(w, `{"v":1,"at":"2026-12-01T10:00:00Z","trigger":"tick","signals":{},"window":{"attempts":0,"failures":0,"latency_counts":null},"published":"Normal","recommended":"Normal","source":"auto","override":null,"fleet_override":null,"jitter_r":0}`+"\n")
	return err
}
