package client

import (
	"math/bits"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// timedPerSecond is how many requests a second the middleware times at
// least, when it serves that many: enough for the latency quantile over
// any window the daemon keeps (at the default 60s window, over 60,000
// observations per client).
const timedPerSecond = 1024

// timing decides which requests Middleware times. A request costs two
// monotonic clock reads to time, about as much as the rest of the
// middleware together; under heavy traffic a uniform random sample of the
// requests, never fewer than timedPerSecond a second, describes the
// latency as well as all of them. At lower rates every request is timed.
// Every request's outcome is counted either way.
type timing struct {
	// mask is 2^k - 1: a request is timed when a random number's low k
	// bits are zero. 0 times every request.
	mask atomic.Uint64
	last time.Time // the previous adapt; owned by the flusher
}

// timed reports whether to time this request, drawing from rng.
func (t *timing) timed(rng *xorshift) bool {
	m := t.mask.Load()
	return m == 0 || rng.next()&m == 0
}

// xorshift is Marsaglia's xorshift64 generator: a few nanoseconds cheaper
// per request than math/rand/v2, which matters at this scale. Each pooled
// statusWriter owns one, so no two goroutines draw from it at once.
type xorshift uint64

func newXorshift() xorshift { return xorshift(rand.Uint64() | 1) } // never 0, its fixed point

func (x *xorshift) next() uint64 {
	v := uint64(*x)
	v ^= v << 13
	v ^= v >> 7
	v ^= v << 17
	*x = xorshift(v)
	return v
}

// adapt sets the sampling from the n outcomes counted since the previous
// call: the largest power-of-two stride that still times timedPerSecond a
// second at that rate.
func (t *timing) adapt(n int64, now time.Time) {
	last := t.last
	t.last = now
	elapsed := now.Sub(last).Seconds()
	if last.IsZero() || elapsed <= 0 {
		return
	}
	stride := uint64(float64(n) / elapsed / timedPerSecond)
	if stride < 2 {
		t.mask.Store(0)
		return
	}
	t.mask.Store(1<<(bits.Len64(stride)-1) - 1) // the power of two at or below stride
}
