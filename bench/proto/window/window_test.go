package window

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/degraded/degraded/errwindow"
)

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// TestSameAsErrwindow drives the prototype and the daemon's errwindow with
// the same random sequence of calls: without races they must agree.
func TestSameAsErrwindow(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 1))
		buckets := 1 + r.IntN(12)
		width := time.Duration(1+r.IntN(50)) * time.Millisecond
		o := Options{Window: width * time.Duration(buckets), Buckets: buckets}
		p, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		e, err := errwindow.New(errwindow.Options{Window: o.Window, Buckets: o.Buckets})
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		for i := range 2000 {
			// Mostly forward, sometimes back (late records), sometimes far.
			switch r.IntN(10) {
			case 0:
				now = now.Add(-time.Duration(r.Int64N(int64(o.Window) * 2)))
			case 1:
				now = now.Add(time.Duration(r.Int64N(int64(o.Window) * 3)))
			default:
				now = now.Add(time.Duration(r.Int64N(int64(width))))
			}
			if r.IntN(3) == 0 {
				a1, f1 := p.Totals(now)
				a2, f2 := e.Totals(now)
				if a1 != a2 || f1 != f2 {
					t.Fatalf("seed %d step %d: Totals = %d/%d, errwindow %d/%d", seed, i, a1, f1, a2, f2)
				}
				continue
			}
			s, f := r.Int64N(5)-1, r.Int64N(3)-1
			p.Record(now, s, f)
			e.Record(now, s, f)
		}
	}
}

// TestConcurrentConservation: concurrent writers within one window lose
// nothing; with rollovers, failures never exceed attempts.
func TestConcurrentConservation(t *testing.T) {
	w, _ := New(Options{Window: time.Hour, Buckets: 6})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10000 {
				w.Record(t0, 1, 1)
			}
		})
	}
	wg.Wait()
	if a, f := w.Totals(t0); a != 160000 || f != 80000 {
		t.Fatalf("Totals = %d/%d, want 160000/80000", a, f)
	}

	w, _ = New(Options{Window: 10 * time.Millisecond, Buckets: 10})
	var stop atomic.Bool
	var readers sync.WaitGroup
	readers.Go(func() {
		for !stop.Load() {
			if a, f := w.Totals(time.Now()); f > a || a < 0 || f < 0 {
				t.Errorf("Totals = %d/%d", a, f)
				return
			}
		}
	})
	for range 4 {
		wg.Go(func() {
			for i := range 200000 {
				w.Record(time.Now(), int64(i&1), 1)
			}
		})
	}
	wg.Wait()
	stop.Store(true)
	readers.Wait()
}
