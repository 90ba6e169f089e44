package replay

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/errwindow"
	"github.com/degraded/degraded/internal/timeline"
	"github.com/degraded/degraded/levels"
	"github.com/google/go-cmp/cmp"
)

// flaky is a cpu sampler that fails while told to: a blind signal.
type flaky struct {
	mu     sync.Mutex
	v      float64
	failed bool
}

func (f *flaky) set(v float64, failed bool) { f.mu.Lock(); f.v, f.failed = v, failed; f.mu.Unlock() }
func (f *flaky) Sample(context.Context, time.Time) (float64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed {
		return 0, errors.New("read /sys/fs/cgroup/cpu.stat: too many open files")
	}
	return f.v, nil
}

// TestControllerAndReplayAgree drives the controller through a recording
// that exercises every input of the level machine (events from outcome
// reports, a local override by a named operator, a fleet override, a
// reload that changes the table, a blind cpu sampler, and recovery with
// jitter), then replays the recording with the config it was made with:
// replay runs the same machine over the same inputs, so it makes exactly
// the level changes the controller's history holds, at the same times and
// from the same layers.
func TestControllerAndReplayAgree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "timeline")
	cfg := recorded(t)
	cfg.RecoveryJitter, cfg.BlindHold = 0.3, 10*time.Second
	reloaded := *cfg
	reloaded.Hysteresis = 0.3
	reloaded.Levels = append([]config.Level(nil), cfg.Levels...)
	reloaded.Levels[1].CPUPercent = ptr(65) // Moderate from cpu 65
	var history []controller.Transition
	synctest.Test(t, func(t *testing.T) {
		machine, err := cfg.Machine()
		if err != nil {
			t.Fatal(err)
		}
		win, err := errwindow.New(errwindow.Options{Window: cfg.ErrorRateWindow, Buckets: cfg.ErrorRateWindowBuckets})
		if err != nil {
			t.Fatal(err)
		}
		rec := timeline.New(timeline.Options{Dir: dir, Settings: timeline.Settings{Enabled: true}})
		cpu := &flaky{v: 30}
		draws := rand.New(rand.NewPCG(7, 7))
		opts := controller.Options{Table: machine.Table, Rules: machine.Rules, HealthCheckInterval: cfg.HealthCheckInterval, CPU: cpu,
			Errors: win, ErrorWindow: cfg.ErrorRateWindow, Recorder: rec, Rand: draws.Float64, Measured: cfg.Measured()}
		ctrl, err := controller.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var wg sync.WaitGroup
		recCtx, stopRec := context.WithCancel(context.Background())
		wg.Go(func() { _ = rec.Run(recCtx) })
		ctx, stop := context.WithCancel(context.Background())
		wg.Go(func() { _ = ctrl.Run(ctx) })
		time.Sleep(500 * time.Millisecond) // between ticks

		at := func(sec int, f func()) {
			time.Sleep(time.Until(start.Add(time.Duration(sec) * time.Second)))
			f()
			synctest.Wait()
		}
		report := func(success, failure int64) {
			now := time.Now()
			win.Record(now, success, failure)
			ctrl.Reported(levels.Report{At: now, Success: success, Failure: failure})
		}
		at(3, func() { report(70, 30) })                 // 30% errors: an event, Severe at once
		at(6, func() { cpu.set(0, true) })               // cpu goes blind
		at(9, func() { report(1000, 0) })                // the errors age out over the 10s window
		at(12, func() { must(t, pin(ctrl, "Major")) })   // alice pins Major
		at(15, func() { must(t, clearBy(ctrl, "bob")) }) // bob clears it
		at(18, func() {
			now := time.Now()
			o := &controller.Override{Level: "Severe", Mode: controller.ModeFloor, Reason: "INC-9 fleet", SetAt: now, ExpiresAt: now.Add(time.Minute), Actor: "carol"}
			_, err := ctrl.ApplyFleet(controller.FleetUpdate{Override: o, TTL: time.Minute, Revision: 3})
			must(t, err)
		})
		at(21, func() {
			m2, err := reloaded.Machine()
			must(t, err)
			o := opts
			o.Table, o.Rules, o.Measured = m2.Table, m2.Rules, reloaded.Measured()
			must(t, ctrl.Reconfigure(o, "dave"))
		})
		at(24, func() { cpu.set(20, false) }) // cpu sees again
		at(30, func() {
			_, err := ctrl.ApplyFleet(controller.FleetUpdate{Revision: 4})
			must(t, err)
		})
		at(34, func() { cpu.set(70, false) }) // Moderate by the reloaded table
		at(40, func() { cpu.set(10, false) })
		at(90, func() {})
		history = ctrl.History(controller.HistoryLimit)
		stop()
		synctest.Wait()
		stopRec()
		wg.Wait()
	})

	res := replay(t, cfg, dir)
	if !res.RecordedConfig {
		t.Fatal("replay did not recognise the recorded config")
	}
	// The history names the cause of each change; replay the layer that
	// published the level after it (a recovery under a floor at its level
	// is published by the floor), as the recording does.
	var want, got []key
	for i := len(history) - 1; i >= 0; i-- {
		if h := history[i]; h.From != h.To {
			want = append(want, key{h.At, h.From, h.To, h.Source})
		}
	}
	for _, tr := range res.Transitions {
		got = append(got, key{tr.At, tr.From, tr.To, ""})
	}
	if len(want) < 6 {
		t.Fatalf("the recording made only %d level changes: %+v", len(want), history)
	}
	sources := map[string]bool{}
	for _, k := range want {
		sources[k.Type] = true
	}
	for _, s := range []string{controller.SourceAuto, controller.SourceOverride, controller.SourceFleet} {
		if !sources[s] {
			t.Errorf("the recording has no level change from %s: %+v", s, want)
		}
	}
	var wantMoves []key
	for _, k := range want {
		wantMoves = append(wantMoves, key{k.At, k.From, k.To, ""})
	}
	if d := cmp.Diff(wantMoves, got); d != "" {
		t.Errorf("replay against the controller's history (-controller +replay):\n%s", d)
	}
	if d := cmp.Diff(keys(res.Recorded), keys(res.Transitions)); d != "" {
		t.Errorf("replay against the recording (-recorded +replayed):\n%s", d)
	}
}

func pin(c *controller.Controller, level string) error {
	_, err := c.SetOverride(controller.OverrideRequest{Level: level, Mode: controller.ModePin, TTL: time.Minute, Reason: "INC-9", Actor: "alice"})
	return err
}

func clearBy(c *controller.Controller, actor string) error {
	_, err := c.ClearOverride(actor)
	return err
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ptr(v float64) *float64 { return &v }
