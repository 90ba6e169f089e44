package levels

import "math"

// NumLatencyBuckets is how many latency counts an outcome report carries:
// one per bound of [LatencyBounds].
const NumLatencyBuckets = 14

// latencyCeiling is what the +Inf bucket reads as, in ms.
const latencyCeiling = 10000

// LatencyBounds returns the upper bounds, in milliseconds, of the latency
// buckets of an outcome report's "latency_counts": 1, 2, 5, 10, 20, 50,
// 100, 200, 500, 1000, 2000, 5000, 10000 and +Inf. Count i holds the
// requests that took more than bound i-1 (0 for i == 0) and at most
// bound i. It is the one definition of the buckets in the daemon's
// module; the client module keeps its own copy, checked against this one
// by a test.
func LatencyBounds() [NumLatencyBuckets]float64 {
	return [NumLatencyBuckets]float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, math.Inf(1)}
}

// QuantileOf returns the q-quantile, in milliseconds, of latency counts
// (one per bound of LatencyBounds), and how many latencies they hold.
// Counts beyond NumLatencyBuckets are ignored; with no latency it returns
// 0, 0.
//
// The quantile is interpolated linearly inside the latency bucket that
// holds it, as Prometheus' histogram_quantile does: the first bucket
// starts at 0, and the +Inf bucket reads as 10000 ms. q is clamped to
// [0, 1] (NaN reads as 0); q == 0 is the lower bound of the first
// non-empty bucket.
func QuantileOf(counts []int64, q float64) (ms float64, observations int64) {
	var c [NumLatencyBuckets]int64
	copy(c[:], counts)
	for _, n := range c {
		observations += n
	}
	if observations == 0 {
		return 0, 0
	}
	return quantile(&c, observations, q), observations
}

// quantile interpolates the q-quantile of counts, whose sum n is > 0.
func quantile(counts *[NumLatencyBuckets]int64, n int64, q float64) float64 {
	if !(q > 0) {
		q = 0
	}
	rank := min(q, 1) * float64(n)
	last := NumLatencyBuckets - 1 // the last non-empty bucket holds rank n
	for counts[last] == 0 {
		last--
	}
	var below int64 // observations in the buckets before i
	i := 0
	for ; i < last; i++ {
		if c := counts[i]; c > 0 && float64(below+c) >= rank {
			break
		}
		below += counts[i]
	}
	bounds := LatencyBounds()
	lower := 0.0
	if i > 0 {
		lower = bounds[i-1]
	}
	upper := min(bounds[i], latencyCeiling)
	return lower + (upper-lower)*min(max(rank-float64(below), 0)/float64(counts[i]), 1)
}
