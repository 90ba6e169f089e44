package controller

import (
	"context"
	"runtime"
	"sync/atomic"
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
		r := newRig(t, Options{Rules: levels.Rules{MinimumLevelDuration: time.Minute}})
		r.cpu.set(5)
		r.c.Check(context.Background())
		sampled := r.c.Sampled()
		r.errs.set(100, 15)
		r.c.Reported(levels.Report{})
		synctest.Wait()
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
		synctest.Wait()
		if got := r.c.State().Level; got != "Major" {
			t.Fatalf("a healthy report: %s, want Major (events never recover)", got)
		}
	})
}

func TestReportRespectsEscalateAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Options{Rules: levels.Rules{EscalateAfter: 2}})
		r.c.Check(context.Background())
		r.errs.set(100, 15)
		r.c.Reported(levels.Report{})
		synctest.Wait()
		if got := r.c.State().Level; got != "Normal" {
			t.Fatalf("escalate_after 2: %s after a report, want Normal (the ticks decide)", got)
		}
	})
}

// TestReportStormIsCoalesced: the reports of a flood are evaluated at
// most four times a second, in one evaluation each 250ms (one timeline
// line each), except one that escalates, which is evaluated at once.
func TestReportStormIsCoalesced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &lines{}
		r := newRig(t, Options{Recorder: rec})
		r.errs.set(1000, 5) // 0.5%: below every threshold
		r.c.Reported(levels.Report{Success: 1})
		synctest.Wait() // evaluated at once: the first in 250ms
		for range 100 {
			r.c.Reported(levels.Report{Success: 1})
		}
		synctest.Wait()
		if n := rec.count(levels.TriggerEvent); n != 1 {
			t.Fatalf("within 250ms of an evaluation: %d event lines, want 1 (the rest wait)", n)
		}
		time.Sleep(250 * time.Millisecond)
		synctest.Wait()
		events := rec.events()
		if len(events) != 2 || len(events[1].Reports) != 1 || events[1].Reports[0].Success != 100 {
			t.Fatalf("250ms later: %d event lines, the last with reports %+v; want 2, the 100 reports merged into one", len(events), events[len(events)-1].Reports)
		}
		r.errs.set(100, 30) // 30%: Severe
		r.c.Reported(levels.Report{Failure: 1})
		synctest.Wait()
		if got := r.c.State().Level; got != "Severe" {
			t.Fatalf("an escalating report within 250ms of an evaluation: %s, want Severe at once", got)
		}
	})
}

// wakeStore is a store that tells, at each save, whether the goroutine
// woken by the change being saved had already run.
type wakeStore struct {
	fakeStore
	woke  atomic.Bool
	saved chan wakeSave
}

// wakeSave is one save: its sequence, and whether the woken goroutine ran
// before it.
type wakeSave struct {
	seq  uint64
	woke bool
}

func (w *wakeStore) Save(p *Persisted) error {
	w.saved <- wakeSave{p.Sequence, w.woke.Load()}
	return w.fakeStore.Save(p)
}

// TestSubscribersRunBeforeTheSave: a change the controller publishes
// reaches the goroutines waiting for it (the SSE streams' writer) before
// the controller saves it. On one P, the woken writer would otherwise wait
// behind the save, and a real save's fsync takes milliseconds (bench
// finding F5). The runtime may, once in 61 schedules, run the yielding
// goroutine first, so 3 of the 5 escalations must show it.
func TestSubscribersRunBeforeTheSave(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	store := &wakeStore{saved: make(chan wakeSave, 64)}
	r := newRig(t, Options{Store: store})
	r.c.Check(context.Background())
	after := 0
	for i, failures := range []int64{2, 6, 12, 30, 60} {
		want := []string{"Minor", "Moderate", "Major", "Severe", "Emergency"}[i]
		store.woke.Store(false)
		changed := r.c.LevelChanged()
		done := make(chan struct{})
		go func() {
			<-changed
			store.woke.Store(true)
			close(done)
		}()
		r.errs.set(100, failures)
		r.c.Reported(levels.Report{})
		<-done
		st := r.c.State()
		if st.Level != want {
			t.Fatalf("%d%% errors: %s, want %s", failures, st.Level, want)
		}
		for s := range store.saved {
			if s.seq >= st.Sequence {
				if s.woke {
					after++
				}
				break
			}
		}
	}
	if after < 3 {
		t.Errorf("%d of 5 escalations were saved after the goroutine waiting for them ran, want at least 3", after)
	}
}
