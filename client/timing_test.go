package client

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"
)

func TestTimingAdaptsToTheRate(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var tm timing
	tm.adapt(1_000_000, t0) // the first call only starts the clock
	if tm.mask.Load() != 0 {
		t.Fatalf("mask %d before any rate is known, want 0 (time everything)", tm.mask.Load())
	}
	for _, tc := range []struct {
		n        int64
		elapsed  time.Duration
		wantMask uint64
	}{
		{0, time.Second, 0},
		{2047, time.Second, 0},          // under 2 strides: every request
		{2048, time.Second, 1},          // 1 in 2
		{100_000, time.Second, 63},      // 97 per timed one: 1 in 64, still >= 1024 a second
		{100_000, 10 * time.Second, 7},  // the same count over longer is a lower rate
		{10_000_000, time.Second, 8191}, // 1 in 8192: 1220 a second
		{5000, 0, 8191},                 // no time passed: keep the last choice
	} {
		now := tm.last.Add(tc.elapsed)
		tm.adapt(tc.n, now)
		if got := tm.mask.Load(); got != tc.wantMask {
			t.Errorf("%d outcomes in %v: mask %d, want %d", tc.n, tc.elapsed, got, tc.wantMask)
		}
	}
}

// Under heavy traffic the middleware times a sample of the requests, at
// least timedPerSecond a second, and still counts every outcome; at a
// modest rate it times every request. The rate is learnt from a report:
// a surge of load is reported half a second in, so from then on.
func TestMiddlewareSamplesLatencyOnlyUnderHeavyTraffic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		d.keepsLatency = true
		d.start()
		c := d.newClient(WithReportInterval(time.Second))
		stop := running(t, c)
		defer stop()
		synctest.Wait()
		h := Middleware(c, PriorityFromHeader("X-Priority", 80))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		w, r := httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil)
		// load serves per(ms) requests at each millisecond ms until
		// until, half a millisecond off the reporter's clock.
		ms := 0
		load := func(until time.Duration, per func(ms int) int) {
			for ; time.Duration(ms)*time.Millisecond < until; ms++ {
				for range per(ms) {
					h.ServeHTTP(w, r)
				}
				time.Sleep(time.Millisecond)
			}
		}
		heavy := func(int) int { return 50 }
		totals := func() (attempts, timed int64) {
			synctest.Wait()
			a, _ := d.win.Totals(time.Now())
			return a, sum(d.win.latencies())
		}
		// 500 a second for 3 s: every request timed.
		time.Sleep(time.Millisecond / 2)
		load(3*time.Second, func(ms int) int { return 1 - ms%2 })
		if a, l := totals(); a != 1500 || l != 1500 {
			t.Errorf("500 requests a second for 3 s: %d outcomes and %d latencies reported, want 1500 of each", a, l)
		}
		// 50,000 a second from 3 s: the surge is reported at 3.5 s, the
		// next reports every second after it. 50,000 a second is 48 per
		// 1,024: 1 in 32 is timed, about 1,562 a second.
		load(4600*time.Millisecond, heavy)
		a0, l0 := totals()
		load(7600*time.Millisecond, heavy)
		a1, l1 := totals()
		if a, l := a1-a0, l1-l0; a != 150_000 || l < 3*1200 || l > 3*2000 {
			t.Errorf("three heavy seconds once the rate is known: %d outcomes and %d latencies, want 150000 outcomes and about 4,687 latencies", a, l)
		}
	})
}

func sum(l [numLatencyBuckets]int64) (n int64) {
	for _, v := range l {
		n += v
	}
	return n
}
