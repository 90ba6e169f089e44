package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// cpu is a sampler the test sets.
type cpu struct {
	mu sync.Mutex
	v  float64
}

func (c *cpu) set(v float64) { c.mu.Lock(); c.v = v; c.mu.Unlock() }
func (c *cpu) Sample(context.Context, time.Time) (float64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.v, nil
}

// recorded is the config the incident is recorded under: 1s ticks, a 5s
// dwell, the default table, no memory signal.
func recorded(t *testing.T) *config.Config {
	t.Helper()
	c := config.Default()
	c.HealthCheckInterval = time.Second
	c.MinimumLevelDuration = 5 * time.Second
	c.ErrorRateWindow = 10 * time.Second
	c.Signals.Memory.Source = "off"
	return c
}

// step holds cpu at a value for a number of seconds.
type step struct {
	cpu     float64
	seconds int
}

// incident is 10s quiet, 10s at 85% (Major), then 20s flipping between
// 50% and 85% every 2s, then 20s quiet.
func incident() []step {
	out := []step{{30, 10}, {85, 10}}
	for range 5 {
		out = append(out, step{50, 2}, step{85, 2})
	}
	return append(out, step{30, 20})
}

// during acts on the controller at second sec of the last step.
type during func(t *testing.T, ctrl *controller.Controller, sec int)

// pinHalfway pins Severe for 3s halfway through the incident's quiet end.
func pinHalfway(t *testing.T, ctrl *controller.Controller, sec int) {
	if sec == 10 {
		if _, err := ctrl.SetOverride(controller.OverrideRequest{Level: "Severe", Mode: controller.ModePin, TTL: 3 * time.Second, Reason: "INC-7"}); err != nil {
			t.Fatal(err)
		}
	}
}

// record runs the controller of cfg through steps with the real recorder
// and returns the timeline directory; act, if not nil, runs at each
// second of the last step.
func record(t *testing.T, cfg *config.Config, steps []step, act during) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "timeline")
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
		sampler := &cpu{}
		sampler.set(steps[0].cpu)
		ctrl, err := controller.New(controller.Options{Table: machine.Table, Rules: machine.Rules, HealthCheckInterval: cfg.HealthCheckInterval, CPU: sampler,
			Errors: win, ErrorWindow: cfg.ErrorRateWindow, Recorder: rec, Fleet: &controller.FleetInfo{Name: "shop", Instance: "a"}, Measured: cfg.Measured()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { _ = rec.Run(ctx) })
		ctrlCtx, stopCtrl := context.WithCancel(context.Background())
		wg.Go(func() { _ = ctrl.Run(ctrlCtx) })
		time.Sleep(time.Millisecond) // between ticks: each step covers whole ticks
		for i, s := range steps {
			sampler.set(s.cpu)
			for sec := range s.seconds {
				if act != nil && i == len(steps)-1 {
					act(t, ctrl, sec)
				}
				time.Sleep(time.Second)
			}
		}
		stopCtrl()
		synctest.Wait()
		stop()
		wg.Wait()
	})
	return dir
}

// key is what "reproduces" compares: the same (from, to, source) at the
// same line.
type key struct {
	At             time.Time
	From, To, Type string
}

func keys(ts []Transition) []key {
	var out []key
	for _, t := range ts {
		out = append(out, key{t.At, t.From, t.To, t.Source})
	}
	return out
}

func replay(t *testing.T, cfg *config.Config, dir string) *Result {
	t.Helper()
	files, err := Files([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(Options{Config: cfg, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestReplayReproducesTheRecording: the recorded config replayed over its
// own timeline makes the same transitions at the same lines, the
// override's included.
func TestReplayReproducesTheRecording(t *testing.T) {
	cfg := recorded(t)
	dir := record(t, cfg, incident(), pinHalfway)
	res := replay(t, cfg, dir)
	if len(res.Recorded) < 3 {
		t.Fatalf("the incident recorded only %v", res.Recorded)
	}
	if d := cmp.Diff(keys(res.Recorded), keys(res.Transitions)); d != "" {
		t.Errorf("replay of the recorded config (-recorded +replayed):\n%s", d)
	}
	var pinned bool
	for _, tr := range res.Transitions {
		pinned = pinned || (tr.To == "Severe" && tr.Source == "override")
	}
	if !pinned {
		t.Errorf("the override's pin is not replayed: %v", res.Transitions)
	}
	if res.Flaps != res.RecordedFlaps || res.TimeAtLevel["Major"] != res.RecordedTimeAtLevel["Major"] {
		t.Errorf("flaps %d vs %d recorded, Major %v vs %v recorded", res.Flaps, res.RecordedFlaps, res.TimeAtLevel["Major"], res.RecordedTimeAtLevel["Major"])
	}
}

// TestReplayLayersTheFleetOverride: a fleet pin, a local floor above it
// and their ends replay as the controller published them, auto -> fleet
// -> local, with the fleet's source.
func TestReplayLayersTheFleetOverride(t *testing.T) {
	cfg := recorded(t)
	dir := record(t, cfg, incident(), func(t *testing.T, ctrl *controller.Controller, sec int) {
		now := time.Now()
		switch sec {
		case 2:
			o := &controller.Override{Level: "Major", Mode: controller.ModePin, Reason: "INC-8", SetAt: now, ExpiresAt: now.Add(10 * time.Second)}
			if _, err := ctrl.ApplyFleet(controller.FleetUpdate{Override: o, TTL: 10 * time.Second, Revision: 1}); err != nil {
				t.Fatal(err)
			}
		case 5:
			if _, err := ctrl.SetOverride(controller.OverrideRequest{Level: "Severe", Mode: controller.ModeFloor, TTL: 3 * time.Second, Reason: "INC-8 local"}); err != nil {
				t.Fatal(err)
			}
		}
	})
	res := replay(t, cfg, dir)
	if d := cmp.Diff(keys(res.Recorded), keys(res.Transitions)); d != "" {
		t.Errorf("replay of the recorded config (-recorded +replayed):\n%s", d)
	}
	var sources []string
	for _, tr := range res.Transitions {
		sources = append(sources, tr.To+" by "+tr.Source)
	}
	for _, want := range []string{"Major by fleet", "Severe by override"} {
		if !slices.Contains(sources, want) {
			t.Errorf("replayed %v, want %q among them", sources, want)
		}
	}
}

// TestLowerThresholdMoreTimeAtLevel: a candidate whose Major threshold is
// below the lulls' 50% spends more time at Major.
func TestLowerThresholdMoreTimeAtLevel(t *testing.T) {
	cfg := recorded(t)
	dir := record(t, cfg, incident(), nil)
	low := recorded(t)
	low.Levels = append([]config.Level(nil), low.Levels...)
	for i, th := range []float64{20, 35, 45} { // Minor, Moderate, Major cpu
		v := th
		low.Levels[i].CPUPercent = &v
	}
	base, cand := replay(t, cfg, dir), replay(t, low, dir)
	if cand.TimeAtLevel["Major"] <= base.TimeAtLevel["Major"] {
		t.Errorf("Major at 45%%: %v at Major, want more than the recorded config's %v", time.Duration(cand.TimeAtLevel["Major"]), time.Duration(base.TimeAtLevel["Major"]))
	}
}

// TestNoDwellCountsFlaps: minimum_level_duration 0 steps down in the lulls
// and climbs back: each return to Major within 2 x health_check_interval
// is a flap, more than under the recorded 5s dwell.
func TestNoDwellCountsFlaps(t *testing.T) {
	cfg := recorded(t)
	dir := record(t, cfg, incident(), nil)
	nodwell := recorded(t)
	nodwell.MinimumLevelDuration = 0
	res := replay(t, nodwell, dir)
	if res.Flaps < 4 || res.Flaps <= res.RecordedFlaps {
		t.Errorf("flaps: %d replayed, %d recorded; want at least 4 replayed (one per lull) and more than recorded\n%v", res.Flaps, res.RecordedFlaps, res.Transitions)
	}
	if time.Duration(res.FlapWindow) != 2*time.Second {
		t.Errorf("flap window %v, want 2 x health_check_interval = 2s", time.Duration(res.FlapWindow))
	}
}

// writeLines writes lines (JSON or raw strings) to a file.
func writeLines(t *testing.T, path string, lines ...any) {
	t.Helper()
	var b strings.Builder
	for _, l := range lines {
		if s, ok := l.(string); ok {
			b.WriteString(s + "\n")
			continue
		}
		j, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(j, '\n'))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// tick is a line at t0+sec with the error window's counts.
func tick(sec int, attempts, failures int64, published string) levels.Line {
	l := levels.NewLine(t0.Add(time.Duration(sec)*time.Second), levels.TriggerTick, levels.Sample{States: map[levels.Signal]levels.SignalState{levels.ErrorRate: levels.Absent}})
	l.Window = levels.LineWindow{Attempts: attempts, Failures: failures}
	l.Published, l.Recommended, l.Source = published, published, "auto"
	return l
}

// TestCorruptAndDuplicateLines: corrupt lines are skipped and counted, a
// file given twice counts once, lines merge by time across files.
func TestCorruptAndDuplicateLines(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	writeLines(t, a, tick(0, 0, 0, "Normal"), `{"v":1,"at":"2026-12-01T10:00:01Z","trig`, tick(2, 0, 0, "Normal"), `not json`, `{"v":2,"at":"2026-12-01T10:00:03Z","trigger":"tick"}`)
	writeLines(t, b, tick(1, 0, 0, "Normal"), tick(3, 0, 0, "Normal"))
	res, err := Run(Options{Config: recorded(t), Files: []string{a, b, a}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Lines != 4 || res.Corrupt != 6 { // three corrupt lines, file a read twice
		t.Errorf("lines %d, corrupt %d; want 4 lines (duplicates dropped) and 6 corrupt", res.Lines, res.Corrupt)
	}
	if got := time.Duration(res.TimeAtLevel["Normal"]); got != 3*time.Second {
		t.Errorf("Normal for %v, want 3s: the merged lines span t0..t0+3s", got)
	}

	bad := filepath.Join(dir, "bad.jsonl")
	writeLines(t, bad, "garbage", `{"v":1}`)
	if _, err := Run(Options{Config: recorded(t), Files: []string{bad}}); !errors.Is(err, ErrNoLines) {
		t.Errorf("a file without a valid line: %v, want ErrNoLines", err)
	}
}

// TestMinThroughputRecomputed: the error rate is judged from the window's
// counts with the candidate's min_throughput.
func TestMinThroughputRecomputed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	writeLines(t, path, tick(0, 0, 0, "Normal"), tick(1, 5, 3, "Normal"), tick(2, 5, 3, "Normal"))
	strict, lax := recorded(t), recorded(t)
	lax.MinThroughput = 1
	for _, tt := range []struct {
		cfg  *config.Config
		want int
	}{{strict, 0}, {lax, 1}} {
		res, err := Run(Options{Config: tt.cfg, Files: []string{path}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Transitions) != tt.want {
			t.Errorf("min_throughput %d: %v, want %d transitions (5 attempts, 60%% failures)", tt.cfg.MinThroughput, res.Transitions, tt.want)
		}
	}
	res, _ := Run(Options{Config: lax, Files: []string{path}})
	if tr := res.Transitions; len(tr) == 1 && tr[0].Reason != "error_rate 60.00% > 50% (Emergency)" {
		t.Errorf("reason %q, want the error rate recomputed from the counts", tr[0].Reason)
	}
}

// TestLatencyQuantileRecomputed: the latency is the candidate's quantile
// of the recorded counts.
func TestLatencyQuantileRecomputed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	l := tick(0, 100, 0, "Normal")
	l.Window.LatencyCounts = []int64{0, 0, 0, 0, 0, 0, 95, 0, 5, 0, 0, 0, 0, 0} // 95 at <=100ms, 5 in (200, 500]
	writeLines(t, path, l)
	for _, tt := range []struct {
		q    float64
		want int
	}{{0.5, 0}, {0.99, 1}} {
		cfg := recorded(t)
		cfg.Signals.Latency.Quantile = tt.q
		ms := 300.0
		cfg.Levels[0].LatencyMS = &ms
		res, err := Run(Options{Config: cfg, Files: []string{path}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Transitions) != tt.want {
			t.Errorf("quantile %g: %v, want %d transitions over a 300ms threshold", tt.q, res.Transitions, tt.want)
		}
	}
}

// TestRange: lines before --from still run the rules, but only the range
// is reported.
func TestRange(t *testing.T) {
	cfg := recorded(t)
	dir := record(t, cfg, incident(), nil)
	full := replay(t, cfg, dir)
	if len(full.Transitions) < 2 {
		t.Fatalf("transitions %v", full.Transitions)
	}
	from := full.Transitions[1].At
	files, _ := Files([]string{dir})
	res, err := Run(Options{Config: cfg, Files: files, From: from})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(keys(full.Transitions[1:]), keys(res.Transitions)); d != "" {
		t.Errorf("from the second transition (-want +got):\n%s", d)
	}
	if !res.First.Equal(from) {
		t.Errorf("first line %v, want %v", res.First, from)
	}
}

// TestUnappliedKeysWarned: the keys that decide what is measured are
// named where the candidate differs from what the recording measured with
// (its start line says), and a candidate that measures alike gets no
// warning, whatever its rules.
func TestUnappliedKeysWarned(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	start := tick(0, 0, 0, "Normal")
	start.Trigger = levels.TriggerStart
	start.Config = &levels.LineConfig{Measured: recorded(t).Measured()}
	writeLines(t, path, start, tick(1, 0, 0, "Normal"))
	tuned := recorded(t)
	tuned.Hysteresis, tuned.MinimumLevelDuration = 0.2, time.Minute
	if res, err := Run(Options{Config: tuned, Files: []string{path}}); err != nil || len(res.Warnings) != 0 {
		t.Errorf("a candidate that only tunes the rules: warnings %q (%v), want none", res.Warnings, err)
	}
	res, err := Run(Options{Config: config.Default(), Files: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"health_check_interval (1s, the candidate has 30s)", "error_rate_window (10s, the candidate has 1m0s)",
		"signals.memory (off, the candidate has host)"} {
		want := "not replayed, the recording measured with its own " + key
		if !slices.Contains(res.Warnings, want) {
			t.Errorf("warnings %q, want %q", res.Warnings, want)
		}
	}
	if len(res.Warnings) != 3 {
		t.Errorf("warnings %q, want the three keys that differ", res.Warnings)
	}
}

// TestTextReport: the text report shows both sides.
func TestTextReport(t *testing.T) {
	cfg := recorded(t)
	res := replay(t, cfg, record(t, cfg, incident(), nil))
	var b strings.Builder
	if err := res.WriteText(&b, []string{"Normal", "Minor", "Moderate", "Major", "Severe", "Emergency"}); err != nil {
		t.Fatal(err)
	}
	// Times are RFC 3339 in UTC, written with Z.
	head := fmt.Sprintf("replayed %d lines from %s to %s", res.Lines, res.First.UTC().Format("2006-01-02T15:04:05Z"), res.Last.UTC().Format("2006-01-02T15:04:05Z"))
	for _, want := range []string{head, "candidate transitions: ", "Normal -> Major", "cpu 85.00% > 80% (Major)", "recorded transitions: ",
		"time at level", "Severe", "flaps (re-entered within 10s)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

// TestOverrideOfAMissingLevelWarns: an override naming a level the
// candidate lacks is not replayed, and the warning says so.
func TestOverrideOfAMissingLevelWarns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	pinned := tick(1, 0, 0, "Panic")
	pinned.Source = "override"
	pinned.Override = &levels.LineOverride{Level: "Panic", Mode: "pin", Reason: "INC-9", SetAt: t0, ExpiresAt: t0.Add(time.Hour)}
	writeLines(t, path, tick(0, 0, 0, "Normal"), pinned)
	res, err := Run(Options{Config: config.Default(), Files: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Transitions) != 0 || len(res.Recorded) != 1 {
		t.Errorf("replayed %v, recorded %v; want nothing replayed and the recorded pin", res.Transitions, res.Recorded)
	}
	want := `the recording's override pin Panic is not replayed: invalid override: level: unknown level "Panic"`
	if !slices.Contains(res.Warnings, want) {
		t.Errorf("warnings %q, want %q", res.Warnings, want)
	}
}

// TestRecordedJitterReplayed: the draw recorded where a level was entered
// stretches its dwell in the replay as it did in the daemon; a candidate
// without jitter steps down at the plain dwell.
func TestRecordedJitterReplayed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	lines := []any{tick(0, 0, 0, "Normal")}
	entered := tick(1, 100, 60, "Emergency") // 60% errors: Emergency
	entered.JitterR = 0.5
	lines = append(lines, entered)
	for sec := 2; sec <= 20; sec++ {
		l := tick(sec, 100, 0, "Emergency")
		l.JitterR = 0.5
		lines = append(lines, l)
	}
	writeLines(t, path, lines...)
	stepDown := func(jitter float64) time.Time {
		c := recorded(t)
		c.MinThroughput, c.MinimumLevelDuration, c.RecoveryJitter = 1, 10*time.Second, jitter
		res, err := Run(Options{Config: c, Files: []string{path}})
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range res.Transitions {
			if tr.From == "Emergency" {
				return tr.At
			}
		}
		t.Fatalf("jitter %v: no step down from Emergency in %v", jitter, res.Transitions)
		return time.Time{}
	}
	if got, want := stepDown(0), t0.Add(11*time.Second); !got.Equal(want) {
		t.Errorf("without jitter: step down at %v, want %v (1s + 10s)", got, want)
	}
	if got, want := stepDown(0.6), t0.Add(16*time.Second); !got.Equal(want) {
		t.Errorf("with the recorded r 0.5: step down at %v, want %v (1s + 15s)", got, want)
	}
}
