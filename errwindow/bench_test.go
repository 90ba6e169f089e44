package errwindow

import (
	"sync/atomic"
	"testing"
	"time"
)

var benchOpts = Options{Window: time.Minute, Buckets: 6}

func BenchmarkRecord(b *testing.B) {
	w := mustNew(b, benchOpts)
	b.ReportAllocs()
	for b.Loop() {
		w.Record(t0, 1, 0)
	}
}

func BenchmarkRecordParallel(b *testing.B) {
	w := mustNew(b, benchOpts)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w.Record(t0, 1, 0)
		}
	})
}

// benchLatency is a report of 100 requests spread over the latency buckets.
var benchLatency = lat(2, 10, 3, 40, 4, 30, 5, 15, 6, 4, 8, 1)

func BenchmarkRecordLatency(b *testing.B) {
	w := mustNew(b, benchOpts)
	b.ReportAllocs()
	for b.Loop() {
		w.RecordLatency(t0, 99, 1, benchLatency)
	}
}

func BenchmarkRecordLatencyParallel(b *testing.B) {
	w := mustNew(b, benchOpts)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w.RecordLatency(t0, 99, 1, benchLatency)
		}
	})
}

// BenchmarkRecordRolling moves the clock 1µs per record through 1ms
// buckets, so one record in a thousand rolls a bucket over.
func BenchmarkRecordRolling(b *testing.B) {
	w := mustNew(b, Options{Window: 60 * time.Millisecond, Buckets: 60})
	b.ReportAllocs()
	now := t0
	for b.Loop() {
		w.Record(now, 1, 0)
		now = now.Add(time.Microsecond)
	}
}

func BenchmarkTotals(b *testing.B) {
	w := mustNew(b, benchOpts)
	for i := range 6 {
		w.Record(t0.Add(time.Duration(i)*10*time.Second), 10, 1)
	}
	now := t0.Add(55 * time.Second)
	b.ReportAllocs()
	for b.Loop() {
		w.Totals(now)
	}
}

func BenchmarkQuantile(b *testing.B) {
	w := mustNew(b, benchOpts)
	for i := range 6 {
		w.RecordLatency(t0.Add(time.Duration(i)*10*time.Second), 99, 1, benchLatency)
	}
	now := t0.Add(55 * time.Second)
	b.ReportAllocs()
	for b.Loop() {
		w.Quantile(now, 0.99)
	}
}

func BenchmarkAtomicAdd(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		var n atomic.Int64
		b.ReportAllocs()
		for b.Loop() {
			n.Add(1)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		var n atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Add(1)
			}
		})
	})
}
