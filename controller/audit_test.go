package controller

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/degraded/degraded/levels"
	"github.com/google/go-cmp/cmp"
)

func TestAuditLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Options{Rules: levels.Rules{MinimumLevelDuration: time.Minute}})
		ctx := context.Background()
		r.cpu.set(85)
		r.c.Check(ctx) // seq 1: Normal -> Major
		if _, err := r.c.SetOverride(OverrideRequest{Level: "Major", Mode: ModePin, TTL: 30 * time.Second, Reason: "INC-7"}); err != nil {
			t.Fatal(err)
		} // seq 2: override set, level unchanged
		time.Sleep(31 * time.Second)
		r.c.Check(ctx) // seq 3: expired
		r.c.ClearOverride("alice")
		if _, err := r.c.SetOverride(OverrideRequest{Level: "Emergency", Mode: ModeFloor, TTL: time.Minute, Reason: "INC-8"}); err != nil {
			t.Fatal(err)
		} // seq 4: floor lifts to Emergency
		r.c.ClearOverride("alice") // seq 5: cleared, stays Emergency

		type entry struct {
			Seq                      uint64
			From, To, Source, Reason string
		}
		var got []entry
		for _, h := range r.c.History(100) {
			got = append(got, entry{h.Sequence, h.From, h.To, h.Source, h.Reason})
		}
		want := []entry{
			{5, "Emergency", "Emergency", "override", "override cleared: INC-8"},
			{4, "Major", "Emergency", "override", "override set: floor Emergency for 1m0s: INC-8"},
			{3, "Major", "Major", "override", "override expired: INC-7"},
			{2, "Major", "Major", "override", "override set: pin Major for 30s: INC-7"},
			{1, "Normal", "Major", "auto", "cpu 85.00% > 80% (Major)"},
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("history (-want +got):\n%s", d)
		}
		if st := r.c.State(); st.Sequence != 5 || st.Override != nil {
			t.Errorf("state: sequence %d override %v, want 5 and none", st.Sequence, st.Override)
		}
		if got := r.c.History(2); len(got) != 2 || got[0].Sequence != 5 {
			t.Errorf("History(2) = %+v, want the 2 newest", got)
		}
	})
}

func TestHistoryIsBounded(t *testing.T) {
	r := newRig(t, Options{})
	for i := range HistoryLimit + 50 {
		if _, err := r.c.SetOverride(OverrideRequest{Level: "Minor", Mode: ModePin, TTL: time.Hour, Reason: "r"}); err != nil {
			t.Fatalf("set %d: %v", i, err)
		}
	}
	h := r.c.History(5000)
	if len(h) != HistoryLimit {
		t.Fatalf("history holds %d entries, want %d", len(h), HistoryLimit)
	}
	if h[0].Sequence != HistoryLimit+50 || h[len(h)-1].Sequence != 51 {
		t.Errorf("history spans %d..%d, want %d..51", h[0].Sequence, h[len(h)-1].Sequence, HistoryLimit+50)
	}
}

func TestSetOverrideRejectsBadInput(t *testing.T) {
	r := newRig(t, Options{Rules: levels.Rules{MaxOverrideTTL: time.Hour}})
	tests := []struct {
		name string
		req  OverrideRequest
		want string
	}{
		{"unknown level", OverrideRequest{Level: "Panic", Mode: ModePin, TTL: time.Minute, Reason: "x"}, `unknown level "Panic"`},
		{"bad mode", OverrideRequest{Level: "Major", Mode: "sticky", TTL: time.Minute, Reason: "x"}, `mode must be pin or floor (was "sticky")`},
		{"ttl too short", OverrideRequest{Level: "Major", Mode: ModePin, TTL: time.Millisecond, Reason: "x"}, "ttl must be between 1s and 1h0m0s (was 1ms)"},
		{"ttl too long", OverrideRequest{Level: "Major", Mode: ModePin, TTL: 2 * time.Hour, Reason: "x"}, "ttl must be between 1s and 1h0m0s (was 2h0m0s)"},
		{"empty reason", OverrideRequest{Level: "Major", Mode: ModePin, TTL: time.Minute}, "reason must be 1 to 500 characters (was 0)"},
		{"long reason", OverrideRequest{Level: "Major", Mode: ModePin, TTL: time.Minute, Reason: strings.Repeat("é", 501)}, "(was 501)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.c.SetOverride(tt.req)
			if !errors.Is(err, ErrInvalidOverride) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrInvalidOverride containing %q", err, tt.want)
			}
			if st := r.c.State(); st.Override != nil || st.Sequence != 0 {
				t.Fatalf("a rejected override changed the state: %+v", st)
			}
		})
	}
}

func TestStateDocument(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Options{Rules: levels.Rules{MinimumLevelDuration: time.Minute, MinThroughput: 10}})
		ctx := context.Background()
		r.c.Check(ctx)
		if st := r.c.State(); st.EarliestRecoveryAt != nil || st.Level != "Normal" || len(st.DisabledFeatures) != 0 {
			t.Fatalf("at Normal: %+v, want no earliest_recovery_at and nothing disabled", st)
		}
		r.errs.set(9, 9) // below min_throughput: unavailable
		r.c.Check(ctx)
		if st := r.c.State(); hasValue(st, levels.ErrorRate) || st.Signals.WindowAttempts != 9 || st.Level != "Normal" {
			t.Fatalf("below min_throughput: %+v, want the rate unavailable and Normal", st.Signals)
		}
		r.errs.set(1000, 61)
		r.c.Check(ctx)
		st := r.c.State()
		if st.Level != "Moderate" || st.Reason != "error_rate 6.10% > 5% (Moderate)" || st.PriorityThreshold != 30 {
			t.Fatalf("got %s %q threshold %d, want Moderate with the error_rate reason and threshold 30", st.Level, st.Reason, st.PriorityThreshold)
		}
		if d := cmp.Diff([]string{"recommendations"}, st.DisabledFeatures); d != "" {
			t.Errorf("disabled features (-want +got):\n%s", d)
		}
		if want := st.Since.Add(time.Minute); st.EarliestRecoveryAt == nil || !st.EarliestRecoveryAt.Equal(want) {
			t.Errorf("earliest_recovery_at = %v, want since+1m = %v", st.EarliestRecoveryAt, want)
		}
		st2, _ := r.c.SetOverride(OverrideRequest{Level: "Severe", Mode: ModePin, TTL: 5 * time.Minute, Reason: "INC-1"})
		if !st2.EarliestRecoveryAt.Equal(st2.Override.ExpiresAt) || st2.Source != "override" {
			t.Errorf("under a pin: earliest_recovery_at %v source %s, want the override's expiry and override", st2.EarliestRecoveryAt, st2.Source)
		}
		if d := cmp.Diff([]string{"recommendations", "search"}, st2.DisabledFeatures); d != "" {
			t.Errorf("disabled features at Severe (-want +got):\n%s", d)
		}
	})
}

func TestRunTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newStopped(t, Options{HealthCheckInterval: 10 * time.Second})
		r.cpu.set(85)
		changed := r.c.LevelChanged()
		r.run(t)
		if !r.c.Ready() || r.c.State().Level != "Major" {
			t.Fatalf("after start: ready %v level %s, want the first check to have run at once", r.c.Ready(), r.c.State().Level)
		}
		select {
		case <-changed:
		default:
			t.Fatal("subscribers were not notified of the change")
		}
		r.cpu.set(92)
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if got := r.c.State().Level; got != "Major" {
			t.Fatalf("before the next tick: %s, want Major", got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := r.c.State().Level; got != "Severe" {
			t.Fatalf("at the next tick: %s, want Severe", got)
		}
		if err := r.stop(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run returned %v, want context.Canceled", err)
		}
	})
}

func TestStateSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		store := &FileStore{Dir: filepath.Join(dir, "data")}
		r := newRig(t, Options{Store: store, Rules: levels.Rules{MinimumLevelDuration: time.Minute}})
		r.cpu.set(85)
		r.c.Check(context.Background())
		if _, err := r.c.SetOverride(OverrideRequest{Level: "Severe", Mode: ModeFloor, TTL: time.Hour, Reason: "INC-9"}); err != nil {
			t.Fatal(err)
		}
		before := r.c.State()
		r.stop() // a clean shutdown: no restart entry

		time.Sleep(time.Second)
		r2 := &fakeSampler{v: 1}
		again, err := New(Options{Table: defaultTable(t), Store: store, CPU: r2, HealthCheckInterval: never, Rules: levels.Rules{MinimumLevelDuration: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		after := again.State()
		if after.Level != "Severe" || after.Sequence != before.Sequence || !after.Since.Equal(before.Since) {
			t.Errorf("after restart: %s seq %d since %v, want %s seq %d since %v", after.Level, after.Sequence, after.Since, before.Level, before.Sequence, before.Since)
		}
		if d := cmp.Diff(before.Override, after.Override); d != "" {
			t.Errorf("override after restart (-want +got):\n%s", d)
		}
		if h := again.History(10); len(h) != 2 || h[0].Reason != "override set: floor Severe for 1h0m0s: INC-9" {
			t.Errorf("history after restart: %+v", h)
		}
		// The restored floor still holds after the auto level recovers.
		runController(t, again)
		time.Sleep(10 * time.Minute)
		again.Check(context.Background())
		if got := again.State().Level; got != "Severe" {
			t.Errorf("restored floor: %s, want Severe", got)
		}
	})
}

func TestReloadShrinkingTable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Options{})
		r.cpu.set(99)
		r.c.Check(context.Background())
		if got := r.c.State().Level; got != "Emergency" {
			t.Fatalf("level %s, want Emergency", got)
		}
		small := defaultTable(t).Levels()[1:4] // Minor, Moderate, Major
		tab, err := levels.NewTable(small)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.c.Reconfigure(Options{Table: tab, CPU: r.cpu, Errors: r.errs}, "alice"); err != nil {
			t.Fatal(err)
		}
		st := r.c.State()
		if st.Level != "Major" || st.Sequence != 2 || !strings.Contains(st.Reason, "level Emergency no longer configured") {
			t.Fatalf("after shrinking: %s seq %d reason %q, want Major seq 2 naming Emergency", st.Level, st.Sequence, st.Reason)
		}
		r.c.Check(context.Background())
		if got := r.c.State().Level; got != "Major" {
			t.Fatalf("after a tick: %s, want Major (the most severe left)", got)
		}
	})
}

func TestSamplesRingCoversTenMinutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Options{HealthCheckInterval: 30 * time.Second}) // its first check reads cpu 0
		for i := range 25 {
			r.cpu.set(float64(i))
			time.Sleep(30 * time.Second) // the next tick reads it
			synctest.Wait()
		}
		s := r.c.Samples()
		if len(s) != 20 {
			t.Fatalf("kept %d samples, want 20 (10 minutes at 30s)", len(s))
		}
		if s[0].Values[levels.CPU] != 5 || s[19].Values[levels.CPU] != 24 {
			t.Errorf("samples span cpu %v..%v, want the newest 5..24", s[0].Values[levels.CPU], s[19].Values[levels.CPU])
		}
	})
}
