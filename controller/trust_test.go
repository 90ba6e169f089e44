package controller

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/degraded/degraded/levels"
)

// The rules of DESIGN.md "Unknown is not healthy", as step tables: a signal
// that cannot see (warming or failed) never reads as healthy.
func TestUnknownIsNotHealthy(t *testing.T) {
	const m = time.Minute
	tests := []struct {
		name  string
		opts  Options
		steps []step
	}{
		{
			name: "a warming cpu sampler holds Major; its first value decides",
			opts: Options{Rules: levels.Rules{MinimumLevelDuration: m, BlindHold: 5 * m}},
			steps: []step{
				{at: 0, cpu: 85, want: "Major"},
				{at: 2 * m, cpu: -1, want: "Major"}, // warming: no value, holds
				{at: 3 * m, cpu: 85, want: "Major"},
				{at: 4 * m, cpu: 5, want: "Moderate", reason: "recovered: all signals below Major"},
			},
		},
		{
			name: "a failed sampler holds recovery while nothing else can see",
			opts: Options{Rules: levels.Rules{MinimumLevelDuration: m, BlindHold: 5 * m}},
			steps: []step{
				{at: 0, cpu: 85, want: "Major"},
				{at: 2 * m, cpu: -2, want: "Major"},
				{at: 10 * m, cpu: -2, want: "Major"},
				{at: 60 * m, cpu: -2, want: "Major"}, // blind: never steps down by itself
			},
		},
		{
			name: "blind_hold 0: a blind signal never holds",
			opts: Options{Rules: levels.Rules{MinimumLevelDuration: m}},
			steps: []step{
				{at: 0, cpu: 85, want: "Major"},
				{at: 2 * m, cpu: -2, want: "Moderate", reason: "recovered: all available signals below Major thresholds less 10% hysteresis; cpu failed for 2m"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, tt.opts)
				r.steps(t, tt.steps)
			})
		})
	}
}

// TestBlindHoldEndsWhenAnotherSignalSees: a failed cpu holds recovery for
// blind_hold, then is ignored because memory (with thresholds at Major and
// above) is available, and the reason names it.
func TestBlindHoldEndsWhenAnotherSignalSees(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Options{Rules: levels.Rules{MinimumLevelDuration: time.Minute, BlindHold: 5 * time.Minute}})
		mem := &fakeSampler{v: 10}
		o := r.c.run.opts
		o.Memory = mem
		if err := r.c.Reconfigure(o, "alice"); err != nil {
			t.Fatal(err)
		}
		r.cpu.set(85)
		r.c.Check(context.Background())
		if got := r.c.State().Level; got != "Major" {
			t.Fatalf("level %s, want Major", got)
		}
		r.cpu.set(-2)
		for range 4 {
			time.Sleep(time.Minute)
			r.c.Check(context.Background())
			if st := r.c.State(); st.Level != "Major" || statusOf(st, "cpu") != "failed" || st.Blind {
				t.Fatalf("cpu failed < blind_hold: %s, status %v, blind %v; want Major held, cpu failed, not blind (memory sees)", st.Level, st.Signals.States, st.Blind)
			}
		}
		time.Sleep(63 * time.Second)
		r.c.Check(context.Background())
		st := r.c.State()
		want := "recovered: all available signals below Major thresholds less 10% hysteresis; cpu failed for 5m3s"
		if st.Level != "Moderate" || st.Reason != want {
			t.Fatalf("after blind_hold: %s %q, want Moderate %q", st.Level, st.Reason, want)
		}
	})
}

// TestNothingSeenIsBlind: with every signal failed the state says blind.
func TestNothingSeenIsBlind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Options{Rules: levels.Rules{BlindHold: time.Minute}})
		r.cpu.set(-2)
		r.c.Check(context.Background())
		st := r.c.State()
		if !st.Blind || statusOf(st, "cpu") != "failed" || statusOf(st, "memory") != "off" {
			t.Fatalf("blind %v status %v, want blind with cpu failed and memory off", st.Blind, st.Signals.States)
		}
	})
}

// TestWarmingErrorWindow: after a start, the error window is warming for
// one window; with min_throughput observations it already escalates, and
// it holds recovery until it has covered a whole window.
func TestWarmingErrorWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Options{ErrorWindow: time.Minute, Rules: levels.Rules{MinThroughput: 10, BlindHold: 5 * time.Minute}})
		o := r.c.run.opts // the error rate alone
		o.CPU = nil
		if err := r.c.Reconfigure(o, "alice"); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		r.errs.set(5, 5)
		r.c.Check(ctx)
		if st := r.c.State(); st.Level != "Normal" || statusOf(st, "error_rate") != "warming" || hasValue(st, levels.ErrorRate) {
			t.Fatalf("5 attempts while warming: %s %v, want Normal, warming without a value", st.Level, st.Signals.States)
		}
		r.errs.set(100, 15)
		r.c.Check(ctx)
		if st := r.c.State(); st.Level != "Major" {
			t.Fatalf("15%% over 100 attempts while warming: %s, want Major", st.Level)
		}
		r.errs.set(100, 0)
		time.Sleep(30 * time.Second)
		r.c.Check(ctx)
		if st := r.c.State(); st.Level != "Major" || statusOf(st, "error_rate") != "warming" {
			t.Fatalf("0%% while still warming: %s %v, want Major held", st.Level, st.Signals.States)
		}
		time.Sleep(31 * time.Second)
		r.c.Check(ctx)
		if st := r.c.State(); st.Level != "Moderate" || statusOf(st, "error_rate") != "available" {
			t.Fatalf("after a whole window at 0%%: %s %v, want Moderate, available", st.Level, st.Signals.States)
		}
		r.errs.set(3, 0)
		r.c.Check(ctx)
		if st := r.c.State(); st.Level != "Minor" || statusOf(st, "error_rate") != "absent" {
			t.Fatalf("low traffic: %s %v, want absent, not holding: Minor", st.Level, st.Signals.States)
		}
	})
}

// TestRestartMidIncident: a daemon restarted at Major keeps Major while its
// CPU sampler warms up, and its empty error window does not read as healthy.
func TestRestartMidIncident(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &FileStore{Dir: t.TempDir()}
		r := newRig(t, Options{Store: store, ErrorWindow: time.Minute, Rules: levels.Rules{MinimumLevelDuration: time.Second, BlindHold: 5 * time.Minute}})
		r.cpu.set(85)
		r.c.Check(context.Background())
		time.Sleep(time.Minute)

		cpu, errs := &fakeSampler{v: -1}, &fakeErrors{}
		stopFirst(t, r) // one daemon at a time holds a data_dir
		again := startNew(t, Options{Table: defaultTable(t), Store: store, CPU: cpu, Errors: errs, ErrorWindow: time.Minute, Rules: levels.Rules{MinimumLevelDuration: time.Second, Hysteresis: 0.1, BlindHold: 5 * time.Minute}})
		if st := again.State(); st.Level != "Major" {
			t.Fatalf("first check after restart (cpu warming): %s, want Major", st.Level)
		}
		cpu.set(85)
		time.Sleep(time.Second)
		again.Check(context.Background())
		if st := again.State(); st.Level != "Major" {
			t.Fatalf("cpu 85%% after restart: %s, want Major", st.Level)
		}
		cpu.set(5)
		time.Sleep(time.Second)
		again.Check(context.Background())
		if st := again.State(); st.Level != "Major" || statusOf(st, "error_rate") != "warming" {
			t.Fatalf("cpu fine but the error window warming: %s %v, want Major held", st.Level, st.Signals.States)
		}
	})
}

// TestReloadKeepsSamplers: a reload with the same samplers is not a
// restart: nothing warms up again, and a reload is not a tick.
func TestReloadIsNotATick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Options{Rules: levels.Rules{EscalateAfter: 5, MinimumLevelDuration: time.Minute}})
		r.cpu.set(85)
		r.c.Check(context.Background()) // streak 1
		for range 5 {
			if err := r.c.Reconfigure(r.c.run.opts, "alice"); err != nil {
				t.Fatal(err)
			}
		}
		if st := r.c.State(); st.Level != "Normal" || st.Sequence != 0 {
			t.Fatalf("after 5 reloads: %s seq %d, want Normal seq 0 (a reload is not a tick)", st.Level, st.Sequence)
		}
		for range 4 {
			r.c.Check(context.Background())
		}
		if st := r.c.State(); st.Level != "Major" {
			t.Fatalf("after 5 ticks: %s, want Major", st.Level)
		}
	})
}

// TestReloadChangingThresholdIsASequence: clients act on the priority
// threshold, so a reload that changes it is a new sequence and a config
// entry, without a level change.
func TestReloadChangingThresholdIsASequence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Options{})
		r.cpu.set(85)
		r.c.Check(context.Background())
		ls := defaultTable(t).Levels()[1:]
		ls[2].PriorityThreshold = 55
		tab, err := levels.NewTable(ls)
		if err != nil {
			t.Fatal(err)
		}
		o := r.c.run.opts
		o.Table = tab
		if err := r.c.Reconfigure(o, "alice"); err != nil {
			t.Fatal(err)
		}
		st := r.c.State()
		h := r.c.History(1)[0]
		if st.Sequence != 2 || st.PriorityThreshold != 55 || h.Source != SourceConfig || h.From != "Major" || h.To != "Major" {
			t.Fatalf("seq %d threshold %d history %+v, want seq 2, threshold 55, a config entry", st.Sequence, st.PriorityThreshold, h)
		}
	})
}

// TestRemovedLevelMapsByPriority: a reload dropping the current level maps
// it to the least severe level admitting no more than it did, and a table
// without the level an override names is refused.
func TestRemovedLevelMapsByPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Options{})
		r.cpu.set(85)
		r.c.Check(context.Background())
		all := defaultTable(t).Levels()[1:] // Minor 10, Moderate 30, Major 50, Severe 70, Emergency 100
		without := func(name string) Options {
			var ls []levels.Level
			for _, l := range all {
				if l.Name != name {
					ls = append(ls, l)
				}
			}
			tab, err := levels.NewTable(ls)
			if err != nil {
				t.Fatal(err)
			}
			o := r.c.run.opts
			o.Table = tab
			return o
		}
		if _, err := r.c.SetOverride(OverrideRequest{Level: "major", Mode: ModePin, TTL: time.Hour, Reason: "INC-3"}); err != nil {
			t.Fatal(err)
		}
		if got := r.c.State().Override.Level; got != "Major" {
			t.Fatalf("override level %q, want the table's spelling Major", got)
		}
		err := r.c.Reconfigure(without("Major"), "alice")
		if err == nil || !strings.Contains(err.Error(), "Major") || !strings.Contains(err.Error(), "INC-3") {
			t.Fatalf("reload dropping the pinned level: %v, want an error naming Major and the override", err)
		}
		if st := r.c.State(); st.Level != "Major" || r.c.Table().Len() != 6 {
			t.Fatalf("after the refused reload: %s with %d levels, want nothing changed", st.Level, r.c.Table().Len())
		}
		if _, err := r.c.ClearOverride("alice"); err != nil {
			t.Fatal(err)
		}
		if err := r.c.Reconfigure(without("Major"), "alice"); err != nil {
			t.Fatal(err)
		}
		st := r.c.State()
		h := r.c.History(1)[0]
		if st.Level != "Severe" || h.Source != SourceConfig || h.Reason != "config reload: level Major no longer configured" {
			t.Fatalf("after dropping Major: %s, history %+v; want Severe (the least severe with threshold >= 50), source config", st.Level, h)
		}
	})
}

// TestDwellPromiseKept: no automatic step down comes before the
// earliest_recovery_at a state published, across overrides.
func TestDwellPromiseKept(t *testing.T) {
	const m = time.Minute
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Options{Rules: levels.Rules{MinimumLevelDuration: m}})
		r.steps(t, []step{
			{at: 0, cpu: 5, act: pin("Major", time.Hour), want: "Major"},
			{at: 2 * m, cpu: 5, act: clear, want: "Major"},
			{at: 2*m + time.Second, cpu: 5, act: pin("Severe", time.Hour), want: "Severe"},
			{at: 2*m + 2*time.Second, cpu: 5, act: floor("Minor", time.Hour), want: "Major"},
		})
		st := r.c.State()
		promised := *st.EarliestRecoveryAt
		time.Sleep(time.Until(promised) - time.Second)
		r.c.Check(context.Background())
		if got := r.c.State().Level; got != "Major" {
			t.Fatalf("a second before the published earliest_recovery_at %v: %s, want Major", promised, got)
		}
		time.Sleep(2 * time.Second)
		r.c.Check(context.Background())
		if got := r.c.State().Level; got != "Moderate" {
			t.Fatalf("after earliest_recovery_at: %s, want Moderate", got)
		}
	})
}

// TestUncleanRestartNeverReusesASequence: readers may have seen sequences
// up to the reserved ceiling, so an unclean restart republishes above it,
// and a clean one resumes where it stopped.
func TestUncleanRestartNeverReusesASequence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		store := &FileStore{Dir: dir}
		r := newRig(t, Options{Store: store})
		r.cpu.set(85)
		r.c.Check(context.Background()) // seq 1, saved with ceiling 1001

		open := func() *Controller {
			c, err := New(Options{Table: defaultTable(t), Store: store, CPU: &fakeSampler{v: 85}})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		c := open() // no clean shutdown: "SIGKILL"
		st := c.State()
		h := c.History(1)[0]
		if st.Sequence != 1002 || h.Source != SourceRestart || h.Reason != "restored after unclean shutdown; changes after sequence 1 may be lost" {
			t.Fatalf("after an unclean stop: seq %d, history %+v; want 1002 and a restart entry", st.Sequence, h)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		if got := open().State().Sequence; got != 1002 {
			t.Fatalf("after a clean stop: seq %d, want 1002 again", got)
		}
	})
}

// TestStateFileFromTheFuture: times after now are clamped, so escalation
// works at once, and a restored override never outlives max_override_ttl.
func TestStateFileFromTheFuture(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		future := time.Now().Add(1000 * time.Hour)
		p := Persisted{Version: persistedVersion, Level: "Minor", Index: 1, Since: future, Auto: "Minor", AutoIndex: 1, AutoSince: future,
			Sequence: 5, CleanShutdown: true,
			Override: &Override{Level: "Minor", Mode: ModeFloor, Reason: "old", SetAt: future, ExpiresAt: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}}
		b, _ := json.Marshal(p)
		if err := os.WriteFile(filepath.Join(dir, "state.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		cpu := &fakeSampler{v: 99}
		c, err := New(Options{Table: defaultTable(t), Store: &FileStore{Dir: dir}, CPU: cpu, Rules: levels.Rules{EscalationDelay: time.Second, MaxOverrideTTL: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		st := c.State()
		if want := time.Now().Add(time.Hour); !st.Override.ExpiresAt.Equal(want) || st.Since.After(time.Now()) {
			t.Fatalf("override expires %v since %v, want clamped to %v and now", st.Override.ExpiresAt, st.Since, want)
		}
		time.Sleep(time.Second)
		runController(t, c) // its first health check
		if got := c.State().Level; got != "Emergency" {
			t.Fatalf("cpu 99%% a second after a start from a future since: %s, want Emergency", got)
		}
	})
}

// TestHugeSequenceIsCorrupt: a sequence past 2^53-1 (or a wrapped one)
// cannot be trusted: the file is refused, naming it.
func TestHugeSequenceIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	b := `{"version":1,"level":"Normal","sequence":18446744073709551615}`
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(b), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(Options{Table: defaultTable(t), Store: &FileStore{Dir: dir}})
	if !errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), "state.json") {
		t.Fatalf("err = %v, want ErrCorruptState naming state.json", err)
	}
}

// TestOneEvaluationAtATime: health checks, reloads and overrides racing
// never move since backwards, and the observer ends on the latest state.
func TestOneEvaluationAtATime(t *testing.T) {
	obs := &recorder{}
	r := newRig(t, Options{Observer: obs})
	o := r.c.run.opts
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			switch i % 3 {
			case 0:
				r.cpu.set(float64(i % 100))
				r.c.Check(context.Background())
			case 1:
				_ = r.c.Reconfigure(o, "alice")
			default:
				r.c.SetOverride(OverrideRequest{Level: "Minor", Mode: ModeFloor, TTL: time.Hour, Reason: "x"})
			}
		})
	}
	wg.Wait()
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.last.Sequence != r.c.State().Sequence {
		t.Fatalf("observer saw sequence %d last, the controller published %d", obs.last.Sequence, r.c.State().Sequence)
	}
	h := r.c.History(1000)
	for i := 1; i < len(h); i++ {
		if h[i].At.After(h[i-1].At) || h[i].Sequence >= h[i-1].Sequence {
			t.Fatalf("history out of order at %d: %+v after %+v", i, h[i], h[i-1])
		}
	}
}
