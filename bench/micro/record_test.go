package micro

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/degraded/degraded/bench/proto/window"
	"github.com/degraded/degraded/errwindow"
	"github.com/prometheus/client_golang/prometheus"
)

// Recording one outcome: the daemon's lock-free errwindow.Window against
// the obvious mutex-guarded ring of the same shape, a Prometheus counter
// and the floor, a bare atomic add. client.Record (what a service calls
// per request; the daemon's window is fed by its batched reports) is
// shown too.

// mutexWindow is the straightforward mutex-guarded bucketed window with
// the same epoch-aligned buckets as errwindow.Window.
type mutexWindow struct {
	mu                sync.Mutex
	width             int64
	tags              []int64
	success, failures []int64
}

func newMutexWindow(window time.Duration, buckets int) *mutexWindow {
	return &mutexWindow{
		width:    int64(window) / int64(buckets),
		tags:     make([]int64, buckets),
		success:  make([]int64, buckets),
		failures: make([]int64, buckets),
	}
}

func (m *mutexWindow) Record(now time.Time, success, failure int64) {
	b := now.UnixNano() / m.width
	i := b % int64(len(m.tags))
	m.mu.Lock()
	switch {
	case m.tags[i] > b:
		m.mu.Unlock()
		return
	case m.tags[i] < b:
		m.tags[i], m.success[i], m.failures[i] = b, 0, 0
	}
	m.success[i] += max(success, 0)
	m.failures[i] += max(failure, 0)
	m.mu.Unlock()
}

type recorder struct {
	name  string
	setup func(b *testing.B) func()
}

// now is fixed: Record takes the time as an argument (the caller reads
// the clock once per request, or per batch).
var now = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func recorders() []recorder {
	return []recorder{
		{"errwindow.Record", func(b *testing.B) func() {
			w, err := errwindow.New(errwindow.Options{Window: time.Minute, Buckets: 6})
			if err != nil {
				b.Fatal(err)
			}
			return func() { w.Record(now, 1, 0) }
		}},
		{"proto.Window.Record", func(b *testing.B) func() {
			// The fix proposed in finding F1 (bench/proto/window).
			w, err := window.New(window.Options{Window: time.Minute, Buckets: 6})
			if err != nil {
				b.Fatal(err)
			}
			return func() { w.Record(now, 1, 0) }
		}},
		{"mutex.window", func(b *testing.B) func() {
			w := newMutexWindow(time.Minute, 6)
			return func() { w.Record(now, 1, 0) }
		}},
		{"prometheus.Counter.Add", func(b *testing.B) func() {
			c := prometheus.NewCounter(prometheus.CounterOpts{Name: "bench_outcomes_total", Help: "bench"})
			return func() { c.Add(1) }
		}},
		{"atomic.Int64.Add", func(b *testing.B) func() {
			var n atomic.Int64
			return func() { n.Add(1) }
		}},
		{"degraded.client.Record", func(b *testing.B) func() {
			c := followingClient(b, "Normal")
			return func() { c.Record(true) }
		}},
	}
}

func BenchmarkRecord(b *testing.B) {
	for _, r := range recorders() {
		b.Run("serial/"+r.name, func(b *testing.B) {
			f := r.setup(b)
			b.ReportAllocs()
			for b.Loop() {
				f()
			}
		})
	}
	for _, r := range recorders() {
		b.Run("parallel/"+r.name, func(b *testing.B) {
			f := r.setup(b)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					f()
				}
			})
		})
	}
}
