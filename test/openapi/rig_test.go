package openapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/controller/controllertest"
	"github.com/degraded/degraded/internal/daemon/daemontest"
	"github.com/degraded/degraded/internal/timeline"
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

// recordedTimeline is the real recorder's reading side over a recorded
// incident of the last ten minutes (timeline.Recorder.WriteRange and
// WriteSeries), which can be turned off, or made to fail to read.
type recordedTimeline struct {
	off, fail atomic.Bool
	rec       *timeline.Recorder
}

func newRecordedTimeline(t *testing.T) *recordedTimeline {
	t.Helper()
	dir := t.TempDir()
	tab := testTable(t)
	cfg := levels.Config{Table: tab, Rules: levels.Rules{MinimumLevelDuration: time.Minute, EscalateAfter: 1}}
	lc := cfg.Line()
	start := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	var body []byte
	for sec := 0; sec < 600; sec++ {
		cpu := 40.0
		s := levels.Sample{Values: map[levels.Signal]float64{levels.CPU: cpu}, States: map[levels.Signal]levels.SignalState{levels.CPU: levels.Available, levels.ErrorRate: levels.Absent}}
		l := levels.NewLine(start.Add(time.Duration(sec)*time.Second), levels.TriggerTick, s)
		l.Published, l.Recommended, l.Source, l.ConfigDigest = "Normal", "Normal", "auto", cfg.Digest()
		switch {
		case sec == 0:
			l.Trigger, l.Config = levels.TriggerStart, &lc
		case sec == 200:
			l.Trigger, l.Actor, l.Request = levels.TriggerOverride, "alice", &levels.LineRequest{Action: "set", Level: "Major", Mode: "pin", TTL: "2m0s", Reason: "INC-42"}
		case sec == 300:
			l.Trigger, l.Actor, l.Config = levels.TriggerReload, "admin", &lc
		}
		if sec >= 200 && sec < 320 {
			l.Published, l.Source = "Major", "override"
			l.Override = &levels.LineOverride{Level: "Major", Mode: "pin", Reason: "INC-42", SetAt: start.Add(200 * time.Second), ExpiresAt: start.Add(320 * time.Second), Actor: "alice"}
		}
		if sec >= 320 && sec < 340 {
			l.Published, l.Partial = "Minor", &levels.Partial{From: 0, Fraction: 0.5}
		}
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		body = append(append(body, b...), '\n')
	}
	// The lines of the two UTC days the ten minutes may straddle.
	for _, day := range []time.Time{start, start.Add(10 * time.Minute)} {
		var part []byte
		for _, line := range bytes.SplitAfter(body, []byte("\n")) {
			var l struct{ At time.Time }
			if json.Unmarshal(line, &l) == nil && timeline.FileName(l.At) == timeline.FileName(day) {
				part = append(part, line...)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, timeline.FileName(day)), part, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return &recordedTimeline{rec: timeline.New(timeline.Options{Dir: dir, Settings: timeline.Settings{Enabled: true}})}
}

func (f *recordedTimeline) Enabled() bool { return !f.off.Load() }

func (f *recordedTimeline) WriteRange(ctx context.Context, w io.Writer, from, to time.Time) error {
	return f.rec.WriteRange(ctx, w, from, to)
}

func (f *recordedTimeline) WriteSeries(ctx context.Context, w io.Writer, from, to time.Time, points int) error {
	if f.fail.Load() {
		return errors.New("read timeline/2026-12-01.jsonl: input/output error")
	}
	return f.rec.WriteSeries(ctx, w, from, to, points)
}
