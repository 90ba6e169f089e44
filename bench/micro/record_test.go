package micro

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/degraded/degraded/errwindow"
	"github.com/prometheus/client_golang/prometheus"
)

// Recording one outcome: the daemon's errwindow.Window (a mutex-guarded
// ring; RecordLatency adds a report's 14 latency counts) against a
// Prometheus counter and the floor, a bare atomic add.
// client.Record (what a service calls per request; the daemon's window is
// fed by its batched reports) is shown too.

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
		{"errwindow.RecordLatency", func(b *testing.B) func() {
			w, err := errwindow.New(errwindow.Options{Window: time.Minute, Buckets: 6})
			if err != nil {
				b.Fatal(err)
			}
			var latency [errwindow.NumLatencyBuckets]int64
			latency[6] = 1
			return func() { w.RecordLatency(now, 1, 0, latency) }
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
