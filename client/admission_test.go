package client

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

// serveAt sends n requests of priority p through h.
func serveAt(h http.Handler, p, n int) {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Priority", strconv.Itoa(p))
	for range n {
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
}

// TestAdmissionReport: the middleware, Do and Admit count every decision
// by exact priority, and the next report carries them, judged against
// the state's sequence, over the interval's length, with the client's
// reporter id. Allow's own calls are not counted.
func TestAdmissionReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		d.override("Major") // threshold 50
		d.setPartial(&Partial{From: 30, Fraction: 0.5})
		d.start()
		c := d.newClient(WithReportInterval(time.Second))
		running(t, c)
		synctest.Wait()
		seq := d.sequence()
		if st := c.State(); st.Sequence != seq || st.Partial == nil {
			t.Fatalf("client state %+v, want sequence %d with partial", st, seq)
		}
		start := time.Now()

		h := Middleware(c, PriorityFromHeader("X-Priority", 50))(okHandler)
		serveAt(h, 80, 10)
		serveAt(h, 10, 10)
		serveAt(h, 40, 1000)
		for range 5 {
			c.Admit(90).Done(true)
		}
		_, _ = Do(context.Background(), c, Operation[int]{Priority: 60, Primary: func(context.Context) (int, error) { return 1, nil }})
		for range 7 {
			c.Allow(10) // not counted
		}
		time.Sleep(time.Second)
		synctest.Wait()

		got := d.received()
		if len(got) != 1 {
			t.Fatalf("daemon got %d admission objects, want 1: %+v", len(got), got)
		}
		a := got[0]
		if a.Sequence != seq {
			t.Errorf("sequence %d, want %d", a.Sequence, seq)
		}
		wantOffered := map[string]int64{"80": 10, "10": 10, "40": 1000, "90": 5, "60": 1}
		if !maps.Equal(a.Offered, wantOffered) {
			t.Errorf("offered %v, want %v (Allow's calls not counted)", a.Offered, wantOffered)
		}
		if a.ShedBelow != 10 || a.Admitted+a.ShedPartial != 1016 || !(a.ShedPartial > 350 && a.ShedPartial < 650) {
			t.Errorf("admitted %d, shed_partial %d, shed_below %d; want shed_below 10 and about half of the 1000 in the band shed", a.Admitted, a.ShedPartial, a.ShedBelow)
		}
		if want := time.Since(start).Seconds(); a.Seconds != want {
			t.Errorf("seconds %v, want %v: from the state's arrival to the report", a.Seconds, want)
		}
		if a.Reporter == "" || len(a.Reporter) > 16 {
			t.Errorf("reporter %q, want a random hex id", a.Reporter)
		}
		// Outcomes: the middleware's admitted requests and Admit's five
		// Done; Do records nothing.
		if n, _ := d.win.Totals(time.Now()); n != a.Admitted-1 {
			t.Errorf("daemon got %d outcomes, want %d", n, a.Admitted-1)
		}
	})
}

// TestNewSequenceReportsAtOnce: a state with a new sequence ends the
// interval judged against the old one, which is reported at once; the
// first report under the new state follows after min(interval, 250ms),
// then every interval.
func TestNewSequenceReportsAtOnce(t *testing.T) {
	for _, every := range []time.Duration{2 * time.Second, 100 * time.Millisecond} {
		t.Run(every.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := newDaemon(t)
				d.override("Major")
				d.start()
				c := d.newClient(WithReportInterval(every))
				running(t, c)
				synctest.Wait()
				old := d.sequence()
				time.Sleep(every / 4)
				c.Admit(60)
				c.Admit(20)
				changed := time.Now()
				d.setPartial(&Partial{From: 30, Fraction: 0.25})
				synctest.Wait()
				got := d.received()
				if len(got) != 1 || got[0].Sequence != old || !got[0].at.Equal(changed) {
					t.Fatalf("after the change: %+v, want the old sequence %d's interval reported at once", got, old)
				}
				if got[0].Seconds != (every/4).Seconds() || got[0].Offered["60"] != 1 || got[0].ShedBelow != 1 {
					t.Errorf("old interval %+v, want %v seconds, 60 admitted and 20 shed", got[0], (every / 4).Seconds())
				}

				c.Admit(40)
				first := min(every, firstReportAfter)
				time.Sleep(first)
				synctest.Wait()
				got = d.received()
				if len(got) != 2 || got[1].Sequence != old+1 || !got[1].at.Equal(changed.Add(first)) || got[1].Seconds != first.Seconds() {
					t.Fatalf("reports %+v, want the new sequence's first after %v", got, first)
				}
				c.Admit(40)
				time.Sleep(every)
				synctest.Wait()
				if got = d.received(); len(got) != 3 || !got[2].at.Equal(changed.Add(first+every)) {
					t.Fatalf("reports %+v, want the next one a report interval later", got)
				}
			})
		})
	}
}

// followingMajor is a fake daemon pinned at Major and a running client of
// it, reporting every second, that has its state. Call it in a synctest
// bubble.
func followingMajor(t *testing.T) (*daemon, *Client) {
	t.Helper()
	d := newDaemon(t)
	d.override("Major")
	d.start()
	c := d.newClient(WithReportInterval(time.Second))
	running(t, c)
	synctest.Wait()
	return d, c
}

// TestNewSequenceSoonAfterAFlush: a new sequence 50ms after another's
// flush sends its ended interval minFlushGap after that flush, and the
// first report under the new state still follows firstReportAfter after
// it arrived, not after the deferred flush. A new sequence right after the
// interval's own flush is reported at once.
func TestNewSequenceSoonAfterAFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, c := followingMajor(t)
		old := d.sequence()
		c.Admit(60)
		time.Sleep(time.Second) // the interval's flush
		synctest.Wait()
		time.Sleep(50 * time.Millisecond)
		c.Admit(60)
		first := time.Now()
		d.setPartial(&Partial{From: 30, Fraction: 0.25})
		synctest.Wait()
		if got := d.received(); len(got) != 2 || got[1].Sequence != old || !got[1].at.Equal(first) {
			t.Fatalf("reports %+v, want the old sequence's interval reported at once, 50ms after the interval's flush", got)
		}
		time.Sleep(50 * time.Millisecond)
		c.Admit(60)
		changed := time.Now()
		d.setPartial(&Partial{From: 30, Fraction: 0.5})
		synctest.Wait()
		c.Admit(40)
		time.Sleep(firstReportAfter)
		synctest.Wait()
		got := d.received()
		if len(got) != 4 || got[2].Sequence != old+1 || !got[2].at.Equal(first.Add(minFlushGap)) {
			t.Fatalf("reports %+v, want the second sequence's interval %v after the first's flush", got, minFlushGap)
		}
		if got[3].Sequence != old+2 || !got[3].at.Equal(changed.Add(firstReportAfter)) || got[3].Seconds != firstReportAfter.Seconds() || got[3].Offered["40"] != 1 {
			t.Errorf("the new sequence's first report: %+v at %v after the change; want %v of it, the 40 admitted after it", got[3], got[3].at.Sub(changed), firstReportAfter)
		}
	})
}

// TestSurgeEndsTheIntervalEarly: an interval offered 1.5 times the rate
// of the last one, and at least 20 requests, is reported once it is
// 500 ms old, not when the report interval ends; the next report follows
// a whole interval later. A steady load keeps the cadence.
func TestSurgeEndsTheIntervalEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, c := followingMajor(t)
		start := time.Now()
		steady := func(n int) { // 20 a second, off the reporter's ticks
			for range n {
				c.Admit(60).Done(true)
				time.Sleep(50 * time.Millisecond)
			}
		}
		time.Sleep(25 * time.Millisecond)
		steady(40)
		synctest.Wait()
		got := d.received()
		if len(got) != 2 || got[0].Seconds != 1 || got[1].Seconds != 1 || got[1].Offered["60"] != 20 {
			t.Fatalf("steady load: reports %+v, want two of 1 s, 20 requests each", got)
		}
		steady(6)
		for range 100 {
			c.Admit(60).Done(true)
		}
		time.Sleep(275 * time.Millisecond)
		synctest.Wait()
		got = d.received()
		if len(got) != 3 || !got[2].at.Equal(start.Add(2500*time.Millisecond)) || got[2].Seconds != 0.5 || got[2].Offered["60"] != 106 {
			t.Fatalf("after a surge: reports %+v, want a third at 2.5 s covering 0.5 s and 106 requests", got)
		}
		steady(20)
		synctest.Wait()
		if got = d.received(); len(got) != 4 || !got[3].at.Equal(start.Add(3500*time.Millisecond)) {
			t.Fatalf("reports %+v, want the next a report interval after the surge's", got)
		}
	})
}

// TestNoAdmissionToAnOlderDaemon: a daemon whose state lacks the key
// "partial" predates the admission report and refuses the field; the
// client never sends it, its outcomes are accepted, and a new sequence
// does not change the report cadence.
func TestNoAdmissionToAnOlderDaemon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		d := newDaemon(t)
		d.noPartial = true
		d.override("Major")
		d.start()
		c := d.newClient(WithReportInterval(time.Second), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		running(t, c)
		synctest.Wait()
		h := Middleware(c, PriorityFromHeader("X-Priority", 50))(okHandler)
		serveAt(h, 80, 3)
		serveAt(h, 10, 3)
		d.override("Severe")
		synctest.Wait()
		if a, _ := d.win.Totals(time.Now()); a != 0 {
			t.Errorf("a new sequence flushed %d outcomes at once, want the usual cadence", a)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if a, _ := d.win.Totals(time.Now()); a != 3 || len(d.received()) != 0 || logs.Len() != 0 {
			t.Errorf("daemon got %d outcomes and %d admission objects, logs %q; want 3, none, no refusal", a, len(d.received()), logs.String())
		}
	})
}

// TestAdmissionInShadowMode: in shadow mode everything is served, and the
// report counts what enforcement would have decided, as would_shed does.
func TestAdmissionInShadowMode(t *testing.T) {
	st := partialState()
	st.Shadow = true
	c := at(t, st)
	c.partialKnown.Store(true)
	for _, p := range []int{80, 10, 10} {
		if !c.Admit(p).Admitted() {
			t.Fatalf("Admit(%d) not admitted in shadow mode", p)
		}
	}
	c.takeAdmission(time.Now().Add(time.Second), true)
	if len(c.pendingAdm) != 1 {
		t.Fatalf("pending %+v, want one interval", c.pendingAdm)
	}
	a := c.pendingAdm[0]
	if a.Admitted != 1 || a.ShedBelow != 2 || c.shadow.take(nil)["Major"] != 2 {
		t.Errorf("admission %+v, want 1 admitted and 2 shed below (the would-sheds)", a)
	}
}

// TestTallyBeyond64Priorities: the 65th distinct priority of an interval
// counts under the nearest higher one counted; one above all of them
// takes over the highest, whose counts it inherits. No count is lost and
// none is counted under a lower priority than its own.
func TestTallyBeyond64Priorities(t *testing.T) {
	tl := newTally(&State{Sequence: 3}, time.Now())
	for i := range 64 {
		tl.count(10*i+10, admitted) // 10, 20, ... 640
	}
	tl.count(15, shedBelow)              // -> 20
	tl.count(5, shedPartial)             // -> 10
	tl.count(1000, admitted)             // takes 640's slot
	tl.count(640, admitted)              // 640 is gone: -> 1000
	tl.count(PriorityCritical, admitted) // above 1000: takes it over
	r := tl.report(time.Now().Add(time.Second), "ab")
	if len(r.Offered) != 64 {
		t.Fatalf("%d priorities reported, want 64: %v", len(r.Offered), r.Offered)
	}
	want := map[string]int64{"10": 2, "20": 2, "630": 1, strconv.Itoa(PriorityCritical): 4}
	for k, n := range want {
		if r.Offered[k] != n {
			t.Errorf("offered[%s] = %d, want %d (all: %v)", k, r.Offered[k], n, r.Offered)
		}
	}
	if _, ok := r.Offered["640"]; ok {
		t.Errorf("640 still reported: %v", r.Offered)
	}
	if r.Admitted != 67 || r.ShedBelow != 1 || r.ShedPartial != 1 || r.Sequence != 3 {
		t.Errorf("totals %+v, want 67 admitted, 1 and 1 shed, sequence 3", r)
	}
}
