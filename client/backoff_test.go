package client

import (
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"
)

func TestBackoffIsFullJitterUnderACap(t *testing.T) {
	top := func(n int64) int64 { return n - 1 } // the largest draw
	tests := []struct {
		attempt int
		base    time.Duration
		want    time.Duration // exclusive upper bound
	}{
		{0, backoffBase, 100 * time.Millisecond},
		{1, backoffBase, 200 * time.Millisecond},
		{5, backoffBase, 3200 * time.Millisecond},
		{9, backoffBase, backoffCap},
		{60, backoffBase, backoffCap},
		{0, 2 * time.Second, 2 * time.Second}, // retry: 2000 honoured as the base
	}
	for _, tt := range tests {
		if got := backoff(tt.attempt, tt.base, backoffCap, top); got != tt.want-1 {
			t.Errorf("backoff(%d, %v) upper end %v, want just under %v", tt.attempt, tt.base, got, tt.want)
		}
		if got := backoff(tt.attempt, tt.base, backoffCap, func(int64) int64 { return 0 }); got != 0 {
			t.Errorf("backoff(%d, %v) lower end %v, want 0 (full jitter)", tt.attempt, tt.base, got)
		}
	}
	for range 1000 {
		if d := backoff(3, backoffBase, backoffCap, rand.Int64N); d < 0 || d >= 800*time.Millisecond {
			t.Fatalf("backoff(3) = %v, want [0, 800ms)", d)
		}
	}
}

// After an outage, 1,000 clients must not come back in one wave: each
// waits a uniform draw under the stream's "retry: 2000", so no 100ms slot
// gets more than 10% of them.
func TestReconnectsAfterAnOutageAreSpread(t *testing.T) {
	const clients = 1000
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		d.start()
		for range clients {
			running(t, d.newClient())
		}
		synctest.Wait()
		if n := len(d.streamTimes()); n != clients {
			t.Fatalf("%d streams before the outage, want %d", n, clients)
		}

		d.stop()
		outage := time.Now()
		d.start()
		time.Sleep(5 * time.Second)
		synctest.Wait()

		times := d.streamTimes()[clients:]
		if len(times) != clients {
			t.Fatalf("%d clients reconnected, want all %d", len(times), clients)
		}
		slots := map[int]int{}
		for _, at := range times {
			slots[int(at.Sub(outage)/(100*time.Millisecond))]++
		}
		busiest := 0
		for _, n := range slots {
			busiest = max(busiest, n)
		}
		t.Logf("%d clients over %d slots of 100ms; busiest slot %d", clients, len(slots), busiest)
		if busiest > clients/10 {
			t.Errorf("busiest 100ms slot got %d reconnects, want at most %d", busiest, clients/10)
		}
		if len(slots) < 15 {
			t.Errorf("reconnects fell in %d slots of 100ms, want them spread over the 2s retry window", len(slots))
		}
	})
}
