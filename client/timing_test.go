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
// modest rate it times every request.
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
		second := func(requests int) (attempts, timed int64) {
			a0, _ := d.win.Totals(time.Now())
			l0 := sum(d.win.latencies())
			for range requests {
				h.ServeHTTP(w, r)
			}
			time.Sleep(time.Second) // the next report
			synctest.Wait()
			a1, _ := d.win.Totals(time.Now())
			return a1 - a0, sum(d.win.latencies()) - l0
		}
		if a, l := second(500); a != 500 || l != 500 {
			t.Errorf("500 requests in a second: %d outcomes and %d latencies reported, want 500 of each", a, l)
		}
		// The rate is learnt from a report: the first heavy second is
		// still timed in full.
		if a, l := second(50_000); a != 50_000 || l != 50_000 {
			t.Errorf("the first heavy second: %d outcomes and %d latencies, want 50000 of each", a, l)
		}
		// 50,000 a second is 48 per 1,024: 1 in 32 is timed, about 1,562.
		a, l := second(50_000)
		if a != 50_000 || l < 1200 || l > 2000 {
			t.Errorf("a heavy second once the rate is known: %d outcomes and %d latencies, want 50000 outcomes and about 1562 latencies", a, l)
		}
	})
}

func sum(l [numLatencyBuckets]int64) (n int64) {
	for _, v := range l {
		n += v
	}
	return n
}
