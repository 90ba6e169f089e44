package errwindow

import (
	"time"

	"github.com/degraded/degraded/levels"
)

// NumLatencyBuckets is how many latency counts an outcome report carries:
// one per bound of levels.LatencyBounds, which defines the buckets.
const NumLatencyBuckets = levels.NumLatencyBuckets

// Quantile returns the q-quantile, in milliseconds, of the latencies in
// the buckets Totals(now) sums, and how many latencies there are
// (observations, the sum of their counts). With no latency in the window
// it returns 0, 0.
//
// The quantile is interpolated linearly inside the latency bucket that
// holds it, as Prometheus' histogram_quantile does: the first bucket
// starts at 0, and the +Inf bucket reads as 10000 ms. q is clamped to
// [0, 1] (NaN reads as 0); q == 0 is the lower bound of the first
// non-empty bucket.
//
// Quantile is safe for concurrent use with every other method. It takes
// time proportional to Buckets, holding the lock, and does not allocate.
// It implements the controller's LatencyWindow.
func (w *Window) Quantile(now time.Time, q float64) (ms float64, observations int64) {
	counts := w.latencies(now)
	return levels.QuantileOf(counts[:], q)
}

// LatencyCounts returns the latency counts of the buckets Totals(now)
// sums, one per bound of [levels.LatencyBounds]: what the timeline records so
// that a replay can compute any quantile with [levels.QuantileOf]. It is safe for
// concurrent use and implements the controller's LatencyCounter.
func (w *Window) LatencyCounts(now time.Time) [NumLatencyBuckets]int64 { return w.latencies(now) }
