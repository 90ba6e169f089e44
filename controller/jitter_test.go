package controller

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/degraded/degraded/levels"
)

// TestRecoveryJitter: each recovery step waits the dwell x (1 + r), the
// state publishes that moment, and the first step after an override ends
// also waits dwell x r from its end.
func TestRecoveryJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Options{Rand: func() float64 { return 0.5 }, Rules: levels.Rules{MinimumLevelDuration: time.Minute, RecoveryJitter: 0.2}}) // r = 0.1
		ctx := context.Background()
		r.cpu.set(85)
		r.c.Check(ctx)
		st := r.c.State()
		if want := st.Since.Add(66 * time.Second); st.Level != "Major" || st.EarliestRecoveryAt == nil || !st.EarliestRecoveryAt.Equal(want) {
			t.Fatalf("at Major: %s earliest_recovery_at %v, want since + 1m x 1.1 = %v", st.Level, st.EarliestRecoveryAt, want)
		}
		r.cpu.set(5)
		time.Sleep(61 * time.Second)
		r.c.Check(ctx)
		if got := r.c.State().Level; got != "Major" {
			t.Fatalf("61s into a 66s jittered dwell: %s, want Major", got)
		}
		time.Sleep(5 * time.Second)
		r.c.Check(ctx)
		if got := r.c.State().Level; got != "Moderate" {
			t.Fatalf("at 66s: %s, want Moderate", got)
		}

		// An override ends: its level's dwell is long done, but the first
		// step waits dwell x r = 6s from the end.
		if _, err := r.c.SetOverride(OverrideRequest{Level: "Severe", Mode: ModePin, TTL: time.Hour, Reason: "x"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Minute)
		if _, err := r.c.ClearOverride("alice"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		r.c.Check(ctx)
		if got := r.c.State().Level; got != "Severe" {
			t.Fatalf("5s after the override ended: %s, want Severe held (6s)", got)
		}
		time.Sleep(2 * time.Second)
		r.c.Check(ctx)
		if got := r.c.State().Level; got != "Major" {
			t.Fatalf("7s after the override ended: %s, want a step down to Major", got)
		}
	})
}
