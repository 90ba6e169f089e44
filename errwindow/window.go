package errwindow

import (
	"fmt"
	"sync"
	"time"

	"github.com/degraded/degraded/levels"
)

// MaxBuckets is the largest accepted [Options.Buckets] (levels.MaxWindowBuckets)
// (config error_rate_window_buckets).
const MaxBuckets = levels.MaxWindowBuckets

// MinBucketWidth is the narrowest accepted bucket, Window/Buckets.
const MinBucketWidth = levels.MinWindowBucket

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

// Window is a rolling count of successes, failures and latencies: a fixed ring of
// buckets, each Options.Window/Options.Buckets wide. Bucket k holds the
// records whose time t satisfies k == t.UnixNano() / width, so bucket edges
// are fixed in time (aligned to the Unix epoch), not to when the Window was
// made. [Window.Totals] sums the bucket holding now and the Buckets-1 before
// it; anything older is gone for good.
//
// Every method may be called from any number of goroutines at once.
// One mutex guards the ring; Record and RecordLatency hold it for a few
// instructions and do not allocate.
//
// Times before 1970 are ignored: Record drops them and Totals reports zero
// for them. Counts are int64 and are not checked for overflow.
//
// The zero value has no buckets: it records nothing and always reports zero.
// Use [New]. A Window must not be copied after first use.
type Window struct {
	width int64 // bucket width in nanoseconds

	mu   sync.Mutex
	ring []bucket // bucket k lives in ring[k % len(ring)]
}

// bucket is one slot of the ring: the counts of the bucket numbered
// tag-1 (tag 0: the slot was never used).
type bucket struct {
	tag              int64
	success, failure int64
	latency          [NumLatencyBuckets]int64
}

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
	return &Window{width: int64(width), ring: make([]bucket, o.Buckets)}, nil
}

// tag returns the tag of the bucket holding t (its number plus one), or 0
// for a time before 1970 or a zero Window.
func (w *Window) tag(t time.Time) int64 {
	ns := t.UnixNano()
	if ns < 0 || w.width == 0 {
		return 0
	}
	return ns/w.width + 1
}

// Record adds success successes and failure failures to the bucket holding
// now. A negative count is ignored (treated as zero). A record is dropped if
// its bucket is so old that its slot already holds a newer bucket; a record
// that is older than the window but whose slot has not been reused is kept
// in that slot and is invisible to Totals for any later time.
//
// Record is safe for concurrent use and does not allocate.
func (w *Window) Record(now time.Time, success, failure int64) {
	w.add(now, max(success, 0), max(failure, 0), nil)
}

// RecordLatency is Record plus the report's latency counts: latency[i] is
// how many of the requests took at most levels.LatencyBounds()[i] ms (and more
// than the bound before it). The outcomes and the latencies land in the
// same bucket under one lock, so a late record is dropped or kept whole,
// exactly as Record's. A negative count is ignored (treated as zero). The
// Window does not check that the latency counts sum to at most
// success+failure; POST /v1/outcomes refuses reports that do not.
//
// RecordLatency is safe for concurrent use and does not allocate.
func (w *Window) RecordLatency(now time.Time, success, failure int64, latency [NumLatencyBuckets]int64) {
	for i, n := range latency {
		latency[i] = max(n, 0)
	}
	w.add(now, max(success, 0), max(failure, 0), &latency)
}

// add records non-negative counts into the bucket holding now; latency
// may be nil.
func (w *Window) add(now time.Time, success, failure int64, latency *[NumLatencyBuckets]int64) {
	tag := w.tag(now)
	if tag == 0 || success == 0 && failure == 0 && (latency == nil || *latency == [NumLatencyBuckets]int64{}) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	b := &w.ring[(tag-1)%int64(len(w.ring))]
	switch {
	case b.tag > tag:
		return // late: the slot holds a newer bucket
	case b.tag < tag:
		*b = bucket{tag: tag}
	}
	b.success += success
	b.failure += failure
	if latency != nil {
		for i, n := range latency {
			b.latency[i] += n
		}
	}
}

// Totals returns the number of attempts (successes plus failures) and
// failures recorded in the bucket holding now and the Buckets-1 buckets
// before it. Buckets older than that are never counted, however long the
// window has been idle, and neither are buckets later than now.
//
// Totals is safe for concurrent use with Record and other Totals calls. It
// takes time proportional to Buckets, holding the lock, and does not
// allocate.
func (w *Window) Totals(now time.Time) (attempts, failures int64) {
	tag := w.tag(now)
	if tag == 0 {
		return 0, 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	oldest := max(tag-int64(len(w.ring)), 0) // tags <= oldest are outside the window
	for i := range w.ring {
		if b := &w.ring[i]; b.tag > oldest && b.tag <= tag {
			attempts += b.success + b.failure
			failures += b.failure
		}
	}
	return attempts, failures
}

// latencies returns the latency counts of the buckets Totals(now) sums.
func (w *Window) latencies(now time.Time) (counts [NumLatencyBuckets]int64) {
	tag := w.tag(now)
	if tag == 0 {
		return counts
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	oldest := max(tag-int64(len(w.ring)), 0)
	for i := range w.ring {
		if b := &w.ring[i]; b.tag > oldest && b.tag <= tag {
			for j, n := range b.latency {
				counts[j] += n
			}
		}
	}
	return counts
}
