package errwindow

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// mutexWindow is the obvious mutex-guarded equivalent of Window, kept as a
// benchmark baseline.
type mutexWindow struct {
	mu       sync.Mutex
	width    int64
	buckets  []int64
	success  []int64
	failures []int64
}

func newMutexWindow(o Options) *mutexWindow {
	return &mutexWindow{
		width:    int64(o.Window) / int64(o.Buckets),
		buckets:  make([]int64, o.Buckets),
		success:  make([]int64, o.Buckets),
		failures: make([]int64, o.Buckets),
	}
}

func (m *mutexWindow) Record(now time.Time, success, failure int64) {
	b := now.UnixNano() / m.width
	i := b % int64(len(m.buckets))
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.buckets[i] > b:
		return
	case m.buckets[i] < b:
		m.buckets[i], m.success[i], m.failures[i] = b, 0, 0
	}
	m.success[i] += max(success, 0)
	m.failures[i] += max(failure, 0)
}

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

func BenchmarkMutexWindow(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		m := newMutexWindow(benchOpts)
		b.ReportAllocs()
		for b.Loop() {
			m.Record(t0, 1, 0)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		m := newMutexWindow(benchOpts)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.Record(t0, 1, 0)
			}
		})
	})
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
