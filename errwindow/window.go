package errwindow

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
)

// MaxBuckets is the largest accepted [Options.Buckets]
// (config error_rate_window_buckets).
const MaxBuckets = 10000

// MinBucketWidth is the narrowest accepted bucket, Window/Buckets.
const MinBucketWidth = time.Millisecond

// Options configures a [Window]. There are no defaults: both fields must be
// set, and [New] rejects values the config validation would reject.
type Options struct {
	// Window is the total span the window covers (config error_rate_window,
	// e.g. 1m). It must be > 0.
	Window time.Duration
	// Buckets is how many buckets the span is cut into (config
	// error_rate_window_buckets), 1..MaxBuckets. Each bucket is
	// Window/Buckets wide, at least MinBucketWidth; when Window is not a
	// multiple of Buckets the width is rounded down to the nanosecond.
	Buckets int
}

// Window is a rolling count of successes and failures: a fixed ring of
// buckets, each Options.Window/Options.Buckets wide. Bucket k holds the
// records whose time t satisfies k == t.UnixNano() / width, so bucket edges
// are fixed in time (aligned to the Unix epoch), not to when the Window was
// made. [Window.Totals] sums the bucket holding now and the Buckets-1 before
// it; anything older is gone for good.
//
// Record and Totals may be called from any number of goroutines at once.
// Record takes no lock and does not allocate; when a bucket rolls over, a
// writer may briefly yield while another writer finishes clearing the slot or
// while writers of the slot's previous bucket finish their two additions.
//
// Times before 1970 are ignored: Record drops them and Totals reports zero
// for them. Counts are int64 and are not checked for overflow.
//
// The zero value has no buckets: it records nothing and always reports zero.
// Use [New]. A Window must not be copied after first use.
type Window struct {
	width int64 // bucket width in nanoseconds
	slots []slot
}

// Each slot's state word packs a bucket tag (epoch+1, or 0 for a slot never
// used, or tagReset while the slot is being cleared) in the high tagBits
// and the number of writers currently adding to the slot's counters in the
// low countBits.
//
// Why no count is lost or leaks (all sync/atomic operations are sequentially
// consistent):
//
//   - A writer adds to success and failure only between incrementing the
//     writer count with the state's tag equal to its own bucket's tag, and
//     decrementing it again.
//   - A slot is cleared only by the writer that swaps the state from
//     (old tag, 0 writers) to (tagReset, 0) in one CAS. The CAS succeeds only
//     when no writer is inside the add section, and while the tag is
//     tagReset nobody can enter it (the increment returns tagReset and the
//     writer backs out). So no add of the old bucket can land after the
//     clear, and no add of the new bucket can land before it.
//   - The resetter then adds (new tag - tagReset) to the tag field, which
//     preserves any transient writer counts, and writers of the new bucket
//     enter. Tags in a slot only grow, so a writer whose bucket is older than
//     the slot's drops its record (a late writer) instead of touching it.
//   - Totals reads a slot's tag, its counters, then the tag again; because
//     tags only grow, an unchanged tag means the counters read belong to that
//     bucket (possibly missing adds still in flight, which are concurrent
//     with the call anyway).
//
// The writer count limits a slot to 1<<countBits-1 (about four million)
// goroutines inside Record at the same instant, and the tag to dates before
// roughly 2109 at the narrowest bucket width; later times are dropped.
type slot struct {
	state   atomic.Uint64
	success atomic.Int64
	failure atomic.Int64
}

const (
	countBits = 22
	tagBits   = 64 - countBits
	oneWriter = 1
	minusOne  = ^uint64(0)     // adding it decrements
	tagReset  = 1<<tagBits - 1 // tag field while a slot is being cleared
	maxTag    = tagReset - 1   // largest tag a bucket can have
)

// New returns an empty Window for o. It returns an error naming the option
// and its value if Window <= 0, Buckets is outside 1..MaxBuckets, or a
// bucket would be narrower than MinBucketWidth.
func New(o Options) (*Window, error) {
	switch {
	case o.Window <= 0:
		return nil, fmt.Errorf("errwindow: Window (error_rate_window) must be > 0 (was %v)", o.Window)
	case o.Buckets < 1 || o.Buckets > MaxBuckets:
		return nil, fmt.Errorf("errwindow: Buckets (error_rate_window_buckets) must be in 1..%d (was %d)", MaxBuckets, o.Buckets)
	}
	width := o.Window / time.Duration(o.Buckets)
	if width < MinBucketWidth {
		return nil, fmt.Errorf("errwindow: bucket width Window/Buckets must be >= %v (was %v = %v/%d)", MinBucketWidth, width, o.Window, o.Buckets)
	}
	return &Window{width: int64(width), slots: make([]slot, o.Buckets)}, nil
}

// tag returns the bucket tag for t, or 0 if t cannot be represented.
func (w *Window) tag(t time.Time) uint64 {
	ns := t.UnixNano()
	if ns < 0 {
		return 0
	}
	tag := uint64(ns/w.width) + 1
	if tag > maxTag {
		return 0
	}
	return tag
}

// Record adds success successes and failure failures to the bucket holding
// now. A negative count is ignored (treated as zero). A record is dropped if
// its bucket is so old that its slot already holds a newer bucket; a record
// that is older than the window but whose slot has not been reused is kept
// in that slot and is invisible to Totals for any later time.
//
// Record is safe for concurrent use, uses only atomics and does not
// allocate.
func (w *Window) Record(now time.Time, success, failure int64) {
	success = max(success, 0)
	failure = max(failure, 0)
	if (success == 0 && failure == 0) || len(w.slots) == 0 {
		return
	}
	tag := w.tag(now)
	if tag == 0 {
		return
	}
	s := &w.slots[(tag-1)%uint64(len(w.slots))]
	for {
		st := s.state.Load()
		cur := st >> countBits
		switch {
		case cur == tag:
			if s.state.Add(oneWriter)>>countBits == tag {
				if success != 0 {
					s.success.Add(success)
				}
				if failure != 0 {
					s.failure.Add(failure)
				}
				s.state.Add(minusOne)
				return
			}
			// Cleared for a newer bucket between Load and Add.
			s.state.Add(minusOne)
		case cur == tagReset:
			// Another writer is clearing the slot: wait below.
		case cur > tag:
			return // late writer: the slot holds a newer bucket
		case st&(1<<countBits-1) == 0 && s.state.CompareAndSwap(st, tagReset<<countBits):
			s.success.Store(0)
			s.failure.Store(0)
			s.state.Add((tag - tagReset) << countBits) // wraps: tag field tagReset -> tag
			continue
		}
		// A clear is in progress, or writers of the old bucket are still
		// adding; both take a few instructions unless descheduled.
		runtime.Gosched()
	}
}

// Totals returns the number of attempts (successes plus failures) and
// failures recorded in the bucket holding now and the Buckets-1 buckets
// before it. Buckets older than that are never counted, however long the
// window has been idle, and neither are buckets later than now.
//
// Totals is safe for concurrent use with Record and other Totals calls. It
// takes time proportional to Buckets and does not allocate. Under
// concurrent Records the two numbers are a near-instant view, and failures
// never exceed attempts.
func (w *Window) Totals(now time.Time) (attempts, failures int64) {
	if len(w.slots) == 0 {
		return 0, 0
	}
	tag := w.tag(now)
	if tag == 0 {
		return 0, 0
	}
	n := uint64(len(w.slots))
	for i := range w.slots {
		s := &w.slots[i]
		for {
			cur := s.state.Load() >> countBits
			if cur == 0 || cur == tagReset || cur > tag || cur+n <= tag {
				break
			}
			sc, fc := s.success.Load(), s.failure.Load()
			if s.state.Load()>>countBits == cur {
				attempts += sc + fc
				failures += fc
				break
			}
			// The slot rolled over while we read it; look again.
		}
	}
	return attempts, failures
}
