package controller

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/degraded/degraded/levels"
)

// TestReportEscalatesAtOnce: an outcome report that pushes the error rate
// over a more severe level's threshold escalates without waiting for the
// next tick; it never recovers, and it respects escalate_after.
func TestReportEscalatesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Options{HealthCheckInterval: 30 * time.Second, MinimumLevelDuration: time.Minute})
		r.cpu.set(5)
		r.c.Check(context.Background())
		sampled := r.c.Sampled()
		r.errs.set(100, 15)
		r.c.Reported(levels.Report{})
		st := r.c.State()
		if st.Level != "Major" || st.Reason != "error_rate 15.00% > 10% (Major)" {
			t.Fatalf("after a report of 15%% errors: %s %q, want Major at once", st.Level, st.Reason)
		}
		if v, _ := st.Signals.Value(levels.ErrorRate); v != 15 || st.Signals.WindowFailures != 15 {
			t.Errorf("signals not refreshed by the event: %+v", st.Signals)
		}
		select {
		case <-sampled:
		default:
			t.Error("an event must wake sample followers")
		}
		r.errs.set(1000, 0)
		time.Sleep(time.Hour)
		r.c.Reported(levels.Report{})
		if got := r.c.State().Level; got != "Major" {
			t.Fatalf("a healthy report: %s, want Major (events never recover)", got)
		}
	})
}

func TestReportRespectsEscalateAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Options{EscalateAfter: 2})
		r.c.Check(context.Background())
		r.errs.set(100, 15)
		r.c.Reported(levels.Report{})
		if got := r.c.State().Level; got != "Normal" {
			t.Fatalf("escalate_after 2: %s after a report, want Normal (the ticks decide)", got)
		}
	})
}

// TestReportStormIsDebounced: reports within a millisecond of an
// evaluation are folded into one evaluation a millisecond later.
func TestReportStormIsDebounced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Options{})
		r.c.Check(context.Background())
		r.c.Reported(levels.Report{}) // evaluates now: nothing to do
		r.errs.set(100, 30)
		for range 100 {
			r.c.Reported(levels.Report{}) // within the millisecond: folded
		}
		if got := r.c.State().Level; got != "Normal" {
			t.Fatalf("within the millisecond: %s, want Normal until the folded evaluation", got)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got := r.c.State().Level; got != "Severe" {
			t.Fatalf("a millisecond later: %s, want Severe", got)
		}
	})
}
