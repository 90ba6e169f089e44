// Package window is a prototype of the fix proposed for errwindow in
// docs/performance.md (finding F1): the same API and, for calls that do not
// race, the same results as errwindow.Window, with one atomic
// read-modify-write on the record path instead of three. It lives in
// bench/ only to be measured and tested beside the original; the daemon
// does not use it.
package window

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
)

const (
	MaxBuckets     = 10000
	MinBucketWidth = time.Millisecond
	tagReset       = ^uint64(0) // tag while a slot is being reset
	idxBits        = 14         // 1<<idxBits > MaxBuckets
)

// Window is errwindow.Window with monotonic counters: a slot's counters
// are never cleared; a slot records, when it starts a new bucket, the
// counter values at that moment (its base), and the bucket's counts are
// counter - base. So a writer of the slot's current bucket needs no writer
// count: it loads the slot's tag and adds, one locked instruction. The
// price: a record that races with its own slot being reset for a newer
// bucket (its writer stalled between reading the tag and adding for
// roughly a window) is counted in the newer bucket, or dropped, instead of
// always being dropped. Counts never go negative and failures never
// exceed attempts.
type Window struct {
	width int64
	slots []slot
	// hint caches the last bucket computed: tag<<idxBits | slot index, so
	// that most records need no division.
	hint atomic.Uint64
}

type slot struct {
	tag              atomic.Uint64 // bucket tag (epoch+1); 0: never used; tagReset
	success, failure atomic.Int64  // monotonic over the slot's life
	baseS, baseF     atomic.Int64  // counters when the current tag began
	_                [24]byte      // one slot per 64-byte cache line
}

type Options struct {
	Window  time.Duration
	Buckets int
}

func New(o Options) (*Window, error) {
	switch {
	case o.Window <= 0:
		return nil, fmt.Errorf("window: Window must be > 0 (was %v)", o.Window)
	case o.Buckets < 1 || o.Buckets > MaxBuckets:
		return nil, fmt.Errorf("window: Buckets must be in 1..%d (was %d)", MaxBuckets, o.Buckets)
	}
	width := o.Window / time.Duration(o.Buckets)
	if width < MinBucketWidth {
		return nil, fmt.Errorf("window: bucket width must be >= %v (was %v)", MinBucketWidth, width)
	}
	return &Window{width: int64(width), slots: make([]slot, o.Buckets)}, nil
}

// locate returns the tag of the bucket holding ns and its slot index.
func (w *Window) locate(ns int64) (tag uint64, idx int) {
	h := w.hint.Load()
	tag = h >> idxBits
	if start := int64(tag-1) * w.width; tag != 0 && ns >= start && ns-start < w.width {
		return tag, int(h & (1<<idxBits - 1))
	}
	tag = uint64(ns/w.width) + 1
	idx = int((tag - 1) % uint64(len(w.slots)))
	w.hint.Store(tag<<idxBits | uint64(idx))
	return tag, idx
}

// Record adds success successes and failure failures to the bucket
// holding now. Negative counts count as zero; times before 1970 are
// dropped, and so is a record whose slot already holds a newer bucket.
func (w *Window) Record(now time.Time, success, failure int64) {
	success = max(success, 0)
	failure = max(failure, 0)
	ns := now.UnixNano()
	if (success == 0 && failure == 0) || len(w.slots) == 0 || ns < 0 {
		return
	}
	tag, idx := w.locate(ns)
	s := &w.slots[idx]
	for {
		cur := s.tag.Load()
		switch {
		case cur == tag:
			if success != 0 {
				s.success.Add(success)
			}
			if failure != 0 {
				s.failure.Add(failure)
			}
			return
		case cur == tagReset:
			runtime.Gosched() // another writer is starting a bucket here
		case cur > tag:
			return // late: the slot holds a newer bucket
		case s.tag.CompareAndSwap(cur, tagReset):
			s.baseS.Store(s.success.Load())
			s.baseF.Store(s.failure.Load())
			s.tag.Store(tag)
		}
	}
}

// Totals returns the attempts and failures recorded in the bucket holding
// now and the Buckets-1 before it.
func (w *Window) Totals(now time.Time) (attempts, failures int64) {
	ns := now.UnixNano()
	if len(w.slots) == 0 || ns < 0 {
		return 0, 0
	}
	tag := uint64(ns/w.width) + 1
	n := uint64(len(w.slots))
	for i := range w.slots {
		s := &w.slots[i]
		for {
			cur := s.tag.Load()
			if cur == 0 || cur == tagReset || cur > tag || cur+n <= tag {
				break
			}
			bs, bf := s.baseS.Load(), s.baseF.Load()
			sc, fc := s.success.Load(), s.failure.Load()
			if s.tag.Load() == cur {
				attempts += sc - bs + fc - bf
				failures += fc - bf
				break
			}
		}
	}
	return attempts, failures
}
