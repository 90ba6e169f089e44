package replay

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
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

// TestReplayReproducesTheAdmission records the controller in graduated
// mode through an overload (a service of 800/s offered 2,400/s, its
// client reporting the offered load by priority every 500ms), then
// replays the recording with its config: replay publishes the same
// partial admission as the recording at every line, the levels included.
// The second recording restarts the daemon in the overload (a new
// controller on the same state file, with a new error window): replay
// restarts its machine as the daemon did at the start line, so the
// admission after the restart is reproduced too.
func TestReplayReproducesTheAdmission(t *testing.T) {
	cfg := config.Default()
	cfg.HealthCheckInterval = time.Second
	cfg.MinimumLevelDuration = 10 * time.Second
	cfg.ErrorRateWindow = 10 * time.Second
	cfg.Signals.CPU.Source, cfg.Signals.Memory.Source = "off", "off"
	for i, ms := range []float64{100, 200, 300, 400, 450} {
		cfg.Levels[i].CPUPercent, cfg.Levels[i].MemoryPercent = nil, nil
		cfg.Levels[i].LatencyMS = ptr(ms)
	}
	for _, tt := range []struct {
		name      string
		restartAt int // the report before which the daemon restarts; -1: never
	}{{"one daemon", -1}, {"restarted in the overload", 60}} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "timeline")
			files := recordOverload(t, cfg, dir, filepath.Join(t.TempDir(), "data"), tt.restartAt)
			var recorded, replayed []string
			starts := 0
			res, err := Run(Options{Config: cfg, Files: files, Observe: func(l levels.Line, p levels.Published, c levels.Config) {
				if l.Trigger == levels.TriggerStart {
					starts++
				}
				recorded = append(recorded, fmt.Sprintf("%s %s %s", l.At.Format("15:04:05.000"), l.Published, partialString(l.Partial)))
				replayed = append(replayed, fmt.Sprintf("%s %s %s", l.At.Format("15:04:05.000"), c.Table.Level(p.Index).Name, partialString(p.Partial)))
			}})
			if err != nil {
				t.Fatal(err)
			}
			if !res.RecordedConfig {
				t.Fatal("replay did not recognise the recorded config")
			}
			want := 1 // the daemon's start, and its restart when there is one
			if tt.restartAt >= 0 {
				want = 2
			}
			if starts != want {
				t.Fatalf("the recording holds %d start lines, want %d", starts, want)
			}
			distinct, atMajor := map[string]bool{}, 0
			for _, r := range recorded {
				if a := r[13:]; !distinct[a] {
					distinct[a] = true
					if strings.HasPrefix(a, "Major {") {
						atMajor++
					}
				}
			}
			if atMajor < 3 {
				t.Errorf("the recording holds %v: want the overload at Major (3x fits it) with several partial admissions", distinct)
			}
			if d := cmp.Diff(recorded, replayed); d != "" {
				t.Errorf("the replayed admission against the recorded one (-recorded +replayed):\n%s", d)
			}
		})
	}
}

// recordOverload records 60 s of the fluid service (10 s at 0.5x, 40 s
// at 3x, 10 s at 0.5x) into the timeline in dir, the controller keeping its
// state in data; before report restartAt (>= 0) the controller is stopped
// and a new one started on the same state file, as a restarted daemon.
// It returns the timeline's files.
func recordOverload(t *testing.T, cfg *config.Config, dir, data string, restartAt int) []string {
	t.Helper()
	var partials int
	synctest.Test(t, func(t *testing.T) {
		machine, err := cfg.Machine()
		if err != nil {
			t.Fatal(err)
		}
		rec := timeline.New(timeline.Options{Dir: dir, Settings: timeline.Settings{Enabled: true}})
		var wg sync.WaitGroup
		recCtx, stopRec := context.WithCancel(context.Background())
		wg.Go(func() { _ = rec.Run(recCtx) })
		start := func() (*controller.Controller, *errwindow.Window, context.CancelFunc) {
			win, err := errwindow.New(errwindow.Options{Window: cfg.ErrorRateWindow, Buckets: cfg.ErrorRateWindowBuckets})
			if err != nil {
				t.Fatal(err)
			}
			ctrl, err := controller.New(controller.Options{Table: machine.Table, Rules: machine.Rules, HealthCheckInterval: cfg.HealthCheckInterval,
				Errors: win, ErrorWindow: cfg.ErrorRateWindow, Recorder: rec, Measured: cfg.Measured(), Store: &controller.FileStore{Dir: data}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan struct{})
			wg.Go(func() { defer close(done); _ = ctrl.Run(ctx) })
			return ctrl, win, func() { stop(); <-done }
		}
		ctrl, win, stop := start()
		svc := &fluidService{capacity: 800}
		for i := range 120 {
			if i == restartAt {
				stop()
				ctrl, win, stop = start()
				synctest.Wait()
			}
			time.Sleep(500 * time.Millisecond)
			x := 0.5
			if i >= 20 && i < 100 {
				x = 3
			}
			rep := svc.interval(ctrl.State(), x, 0.5, time.Now())
			win.RecordLatency(rep.At, rep.Success, rep.Failure, [levels.NumLatencyBuckets]int64(rep.Latency))
			ctrl.Reported(rep)
			synctest.Wait()
			if ctrl.State().Partial != nil {
				partials++
			}
		}
		stop()
		synctest.Wait()
		stopRec()
		wg.Wait()
	})
	if partials < 20 {
		t.Fatalf("the overload published a partial admission after only %d of 120 reports", partials)
	}
	files, err := Files([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// partialString writes a partial admission for a diff.
func partialString(p *levels.Partial) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprintf("{from %d, %.3f}", p.From, p.Fraction)
}

// fluidService is a service of fixed capacity seen by its client: each
// interval it is offered the benchmark's mix at x times its capacity,
// admits what the published state admits, completes up to its capacity
// (and a backlog it keeps, failing what waits more than 400ms), and
// reports as the Go client does.
type fluidService struct {
	capacity float64
	backlog  float64 // requests waiting
}

func (s *fluidService) interval(st *controller.State, x, secs float64, now time.Time) levels.Report {
	mix := map[int]float64{100: 0.05, 60: 0.15, 40: 0.30, 10: 0.50}
	offered := map[int]int64{}
	var admitted float64
	for p, share := range mix {
		n := x * s.capacity * share * secs
		offered[p] = int64(n)
		switch {
		case p >= st.PriorityThreshold:
			admitted += n
		case st.Partial != nil && p >= st.Partial.From:
			admitted += n * st.Partial.Fraction
		}
	}
	work := s.backlog + admitted
	done := math.Min(work, s.capacity*secs)
	s.backlog = work - done
	failed := math.Max(0, s.backlog-0.4*s.capacity) // beyond 400ms of queue
	s.backlog -= failed
	wait := s.backlog / s.capacity * 1000 // ms
	var lat [levels.NumLatencyBuckets]int64
	bucket := 4 // 10-20ms: no queue
	switch {
	case wait > 200:
		bucket = 8
	case wait > 50:
		bucket = 6
	case wait > 10:
		bucket = 5
	}
	lat[bucket] = int64(done + failed)
	return levels.Report{At: now, Success: int64(done), Failure: int64(failed), Latency: lat[:],
		Admission: &levels.Admission{Sequence: st.Sequence, Admitted: int64(admitted), Seconds: secs, Reporter: "a1", Offered: offered}}
}
