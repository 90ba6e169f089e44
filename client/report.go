package client

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"
)

// maxRetained bounds the counts kept across failed flushes: the daemon
// accepts at most this many of each per report. Beyond it the oldest
// counts are scaled down, keeping the failure ratio and the latency
// distribution.
const maxRetained = 1_000_000_000

// numLatencyBuckets is how many latency counts a report carries.
const numLatencyBuckets = 14

// latencyUpper are the finite upper bounds of LatencyBounds; a latency
// above the last one falls in the +Inf bucket.
var latencyUpper = [numLatencyBuckets - 1]time.Duration{
	1 * time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	1 * time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second,
}

// LatencyBounds returns the upper bounds, in milliseconds, of the latency
// buckets Observe counts into and the daemon keeps: 1, 2, 5, 10, 20, 50,
// 100, 200, 500, 1000, 2000, 5000, 10000 and +Inf. A latency falls in the
// first bucket whose bound it does not exceed. They are fixed by the
// daemon's protocol ("latency_counts" of POST /v1/outcomes).
func LatencyBounds() [numLatencyBuckets]float64 {
	var b [numLatencyBuckets]float64
	for i, d := range latencyUpper {
		b[i] = float64(d) / float64(time.Millisecond)
	}
	b[numLatencyBuckets-1] = math.Inf(1)
	return b
}

// latencyBucket returns the index of the bucket holding d.
func latencyBucket(d time.Duration) int {
	for i, b := range latencyUpper {
		if d <= b {
			return i
		}
	}
	return numLatencyBuckets - 1
}

// counts are outcomes taken from the counters but not yet accepted.
type counts struct {
	success, failure int64
	latency          [numLatencyBuckets]int64
}

// Record counts the outcome of one unit of work towards the daemon's error
// rate. It is two atomic adds at most: it never blocks, allocates or does
// I/O, whether or not the daemon is up. Run flushes the counts every
// report interval. Do not record requests that were shed. Prefer Observe
// when the duration is known.
func (c *Client) Record(success bool) {
	if success {
		c.success.Add(1)
	} else {
		c.failure.Add(1)
	}
}

// Observe is Record plus the latency histogram: it counts the outcome and
// d, how long the unit of work took, in the bucket of LatencyBounds that
// holds it (a negative d counts as 0). It is one atomic add on a fixed
// counter: it never blocks, allocates or does I/O. Middleware calls it
// for the requests it times: all of them up to about 2,048 a second, a
// random sample of at least 1,024 a second above that (Record counts the
// others).
//
// Run sends the latency counts only to a daemon whose state shows
// signals.status.latency, that is one that keeps them; to an older daemon
// (or before the first state arrives) it sends the outcomes alone and
// drops the latencies at each flush, so upgrading the client before the
// daemon loses no report and keeps no growing backlog. Do not observe
// requests that were shed.
func (c *Client) Observe(success bool, d time.Duration) {
	ok := 0
	if success {
		ok = 1
	}
	c.observed[ok][latencyBucket(d)].Add(1)
}

// refreshSignals reads the daemon's state again while the one the client
// holds predates the daemon's first health check (signals.sampled_at
// null, and so no status): the stream sends the next state only when the
// sequence moves, which may be hours away, and until the state shows
// status.latency the reports carry no latency_counts. (A client that
// connected in the daemon's first moments, as a sidecar's service may,
// sent none until the level first changed; the admission law, reading
// reports without latency, took a dependency's 30% failures for an
// overload and measured a "capacity" from them, and the level stopped at
// Moderate, two short of the table's Severe, for as long as they lasted:
// examples/shop's walkthrough, one run in ten under load.) Only the
// signals are taken, and only from a document of the same sequence: a
// newer one comes through the stream or the poll, in order. A failed read
// is left to the report that follows, which fails the same way and is
// logged.
func (c *Client) refreshSignals(ctx context.Context) {
	if st := c.view.Load().state; st == nil || st.Signals.SampledAt != nil {
		return
	}
	var st State
	if c.call(ctx, http.MethodGet, "/v1/level", nil, &stateDocument{State: &st}) != nil || st.Signals.SampledAt == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.view.Load()
	if v.state == nil || v.state.Sequence != st.Sequence {
		return
	}
	held := v.state.clone()
	held.Signals = st.Signals
	nv := *v
	nv.state = &held
	c.view.Store(&nv)
}

// keepsLatency reports whether the last state came from a daemon that
// publishes the latency signal, and so accepts "latency_counts".
func (c *Client) keepsLatency() bool {
	st := c.view.Load().state
	if st == nil {
		return false
	}
	_, ok := st.Signals.Status["latency"]
	return ok
}

// flush sends what was recorded since the last accepted flush. On a
// failure the counts are kept, bounded, for the next flush; an answer the
// daemon will never accept (4xx other than 408 and 429) drops them and is
// logged, rate-limited. current says whether the admission interval under
// way ends too (takeAdmission). Only one flush runs at a time: the
// reporter loop, then Run's final flush.
func (c *Client) flush(ctx context.Context, current bool) error {
	p := &c.pending
	var latency [numLatencyBuckets]int64
	for i := range latency {
		f, s := c.observed[0][i].Swap(0), c.observed[1][i].Swap(0)
		p.failure += f
		p.success += s
		latency[i] = f + s
	}
	recS, recF := c.success.Swap(0), c.failure.Swap(0)
	p.success += recS
	p.failure += recF
	var observed int64
	for _, n := range latency {
		observed += n
	}
	c.timing.adapt(observed+recS+recF, time.Now())
	c.refreshSignals(ctx)
	withLatency := c.keepsLatency()
	if withLatency {
		for i, n := range latency {
			p.latency[i] += n
		}
	} else {
		p.latency = [numLatencyBuckets]int64{}
	}
	// would_shed only to a daemon whose state says shadow (Rolling
	// upgrades): an older one refuses the field. Counts taken while the
	// mode switched back to enforce are dropped.
	c.pendingShed = c.shadow.take(c.pendingShed)
	if !c.inShadow() {
		c.pendingShed = nil
	}
	c.takeAdmission(time.Now(), current)
	if p.success == 0 && p.failure == 0 && c.pendingShed == nil && len(c.pendingAdm) == 0 {
		return nil
	}
	if total := p.success + p.failure; total > maxRetained {
		scale := float64(maxRetained) / float64(total)
		p.success = int64(float64(p.success) * scale)
		p.failure = int64(float64(p.failure) * scale)
		for i, n := range p.latency {
			p.latency[i] = int64(float64(n) * scale)
		}
		p.latency = fitLatency(p.latency, p.success+p.failure)
	}
	var send *[numLatencyBuckets]int64
	if withLatency && p.latency != ([numLatencyBuckets]int64{}) {
		send = &p.latency
	}
	body := outcomeReport{Success: p.success, Failure: p.failure, LatencyCounts: send, WouldShed: c.pendingShed}
	// One admission object per report: the outcomes go with the oldest
	// interval, each later interval in a report of its own.
	for {
		if len(c.pendingAdm) > 0 {
			body.Admission = c.pendingAdm[0]
		}
		err := c.call(ctx, http.MethodPost, "/v1/outcomes", body, nil)
		var ae *APIError
		if errors.As(err, &ae) && ae.StatusCode == http.StatusBadRequest && !c.arrivalRefused &&
			strings.Contains(ae.Message, "arrival_seconds") {
			c.refuseArrival(ae)
			continue // the same report, without the field
		}
		if err != nil && !(errors.As(err, &ae) && ae.StatusCode >= 400 && ae.StatusCode < 500 &&
			ae.StatusCode != http.StatusRequestTimeout && ae.StatusCode != http.StatusTooManyRequests) {
			c.sent(err, time.Now())
			return err // kept for the next flush
		}
		c.sent(nil, time.Now())
		if ae != nil {
			c.refused(ae, p.success, p.failure, time.Now())
			*p, c.pendingShed, c.pendingAdm = counts{}, nil, nil
			return err
		}
		*p, c.pendingShed = counts{}, nil
		if len(c.pendingAdm) > 0 {
			c.pendingAdm = c.pendingAdm[1:]
		}
		if len(c.pendingAdm) == 0 {
			return nil
		}
		body = outcomeReport{}
	}
}

// takeAdmission ends the current interval at now (unless current is
// false: a flush of the intervals a new sequence ended) and moves the
// reports of every ended interval to pendingAdm, for a daemon whose last
// state had the key "partial" (one that takes "admission"); for any other
// the counts are dropped, so that an older daemon never refuses a report
// for them and nothing grows. Owned by the flusher.
func (c *Client) takeAdmission(now time.Time, current bool) {
	c.mu.Lock()
	ended := c.ended
	c.ended = nil
	if current {
		v := c.view.Load()
		ended = append(ended, v.tally)
		nv := *v
		nv.tally = newTally(v.state, now)
		c.view.Store(&nv)
		v.tally.end = now
	}
	c.mu.Unlock()
	if !c.partialKnown.Load() {
		c.pendingAdm = nil
		return
	}
	for _, t := range ended {
		if r := t.report(t.end, c.reporter); r != nil {
			if c.arrivalRefused {
				r.Arrival = 0
			}
			if len(c.pendingAdm) == maxEnded {
				c.pendingAdm = c.pendingAdm[1:] // the daemon is unreachable: keep the latest evidence
			}
			c.pendingAdm = append(c.pendingAdm, r)
			c.noteRate(r)
		}
	}
}

// refuseArrival leaves "admission.arrival_seconds" out of every report
// from now on, the pending ones too: the daemon refused it, as one older
// than the field does (a rolling upgrade that reached the clients first).
// Logged once; the law then reads the offered load over the interval, as
// before the field.
func (c *Client) refuseArrival(ae *APIError) {
	c.arrivalRefused = true
	for _, r := range c.pendingAdm {
		r.Arrival = 0
	}
	c.log.Info("degraded does not take admission.arrival_seconds (an older daemon?); the reports leave it out",
		slog.String("daemon", c.base.String()), slog.String("answer", ae.Message))
}

// noteRate keeps the offered load of an interval long enough to be read
// as a rate, over the span its requests arrived over, for surged. Owned by
// the flusher.
func (c *Client) noteRate(r *admissionReport) {
	if r.Seconds < surgeAfter.Seconds() {
		return
	}
	var n int64
	for _, v := range r.Offered {
		n += v
	}
	span := r.Seconds
	if r.Arrival > 0 {
		span = r.Arrival
	}
	c.lastRate = float64(n) / span
}

// fitLatency lowers the latency counts, the fastest buckets first, until
// they sum to at most total: the daemon refuses more latencies than
// outcomes, and scaling the two down rounds each on its own.
func fitLatency(latency [numLatencyBuckets]int64, total int64) [numLatencyBuckets]int64 {
	var sum int64
	for _, n := range latency {
		sum += n
	}
	over := max(sum-total, 0)
	for i, n := range latency {
		cut := min(n, over)
		latency[i] -= cut
		over -= cut
	}
	return latency
}

// outcomeReport is the body of POST /v1/outcomes, for flush and Report:
// the latency counts and the would-shed counts only when there are some.
type outcomeReport struct {
	Success       int64                     `json:"success"`
	Failure       int64                     `json:"failure"`
	LatencyCounts *[numLatencyBuckets]int64 `json:"latency_counts,omitempty"`
	WouldShed     map[string]int64          `json:"would_shed,omitempty"`
	Admission     *admissionReport          `json:"admission,omitempty"`
}

// maxEnded bounds the admission intervals kept unsent: ended by new
// sequences faster than the reporter takes them, or taken while the
// daemon is unreachable. Beyond it the oldest are dropped.
const maxEnded = 8
