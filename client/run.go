package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Reconnection and fallback timing.
const (
	backoffBase = 100 * time.Millisecond
	backoffCap  = 30 * time.Second
	// firstEventTimeout: a stream that delivers no event this long after
	// its headers is being buffered (a proxy), so long-polling takes over.
	firstEventTimeout = 10 * time.Second
	// streamRetryAfter: how long to long-poll before trying the stream again.
	streamRetryAfter = 5 * time.Minute
	// maxPollWait is the longest long-poll wait asked for.
	maxPollWait = 30 * time.Second
	// finalFlushTimeout bounds the flush Run makes as it returns.
	finalFlushTimeout = 2 * time.Second
)

// errNotStream means the daemon or a proxy cannot hold an event stream.
var errNotStream = errors.New("event stream unavailable")

// Run follows the daemon's level until ctx ends: it subscribes to
// /v1/level/stream, falls back to long-polling /v1/level when the stream
// cannot be held (a buffering proxy, the subscriber limit), reconnects with
// full-jitter exponential backoff (base 100ms, or the stream's "retry:"
// when larger; cap 30s), marks the state stale after StaleAfter without
// contact, and flushes the counts of Record and Observe (and shadow mode's
// would-shed counts) every report interval. Lost contact, its return and
// refused reports are logged (WithLogger). It returns ctx.Err() only after
// its goroutines have ended and a last flush (at most 2s) has been tried,
// and (without WithHTTPClient) its transport's idle connections closed.
// Run at most one Run per Client at a time.
func (c *Client) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("client: Run is already running")
	}
	defer c.running.Store(false)
	inner, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { c.reportLoop(inner) })
	wg.Go(func() { c.staleLoop(inner) })
	c.follow(inner)
	cancel()
	wg.Wait()
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), finalFlushTimeout)
	_ = c.flush(fctx, true) // the daemon is gone or the counts are kept: nothing more to do
	fcancel()
	if c.ownHTTP {
		c.http.CloseIdleConnections() // no goroutine of the client outlives Run
	}
	return ctx.Err()
}

// firstReportAfter bounds the wait for the first report under a new
// state: the daemon gets evidence after each change quickly.
const firstReportAfter = 250 * time.Millisecond

// A surge of offered load ends the report interval early: once an
// interval is surgeAfter old (the daemon reads an interval that long as
// the rate), and at least surgeMin requests were offered in it at
// surgeFactor times the rate of the last such interval, the client
// reports at once rather than waiting out its interval. A step of the load
// then reaches the daemon's law within about surgeAfter, not up to a whole
// interval later while the service's queue grows (measured in the law's
// simulation: the square wave's second 1.6x half 87.7% to 90.9% of the
// capacity). surgeEvery is how often the reporter looks.
const (
	surgeAfter  = 500 * time.Millisecond
	surgeFactor = 1.5
	surgeMin    = 20
	surgeEvery  = 100 * time.Millisecond
)

// surged says the current interval's offered load is a surge (above).
// With WithRequestStart the load is read over the span its requests
// arrived over (tally.arrival): on a saturated core a surge reaches the
// middleware no faster than the core lets it through, and only the
// growing wait before the middleware shows it. (Counted as it reached the
// middleware, cpu3x's step to 3x in degbench overload was not a surge.)
// Owned by the flusher.
func (c *Client) surged(now time.Time) bool {
	t := c.view.Load().tally
	el := now.Sub(t.start)
	if el < surgeAfter || c.lastRate <= 0 {
		return false
	}
	n := t.decisions()
	span := el.Seconds()
	if a := t.arrivalSoFar(span); a > 0 {
		span = heldArrival(a, span)
	}
	return n >= surgeMin && float64(n)/span >= surgeFactor*c.lastRate
}

// reportLoop flushes every report interval, and early on a surge of
// offered load. When a state with a new sequence arrives at a daemon that
// takes the admission report, it flushes at once (the interval judged
// against the old sequence has ended) and the next time after min(report
// interval, 250ms).
func (c *Client) reportLoop(ctx context.Context) {
	t := time.NewTimer(c.reportEvery)
	defer t.Stop()
	var watch <-chan time.Time
	if c.reportEvery > surgeAfter+surgeEvery {
		w := time.NewTicker(surgeEvery)
		defer w.Stop()
		watch = w.C
	}
	// seqFlushed is when a new sequence's flush last ran, and deferred
	// when a new sequence arrived whose flush waits for minFlushGap after
	// it (zero when none does); the first report under the new state
	// still follows firstReportAfter after it arrived.
	var seqFlushed, deferred time.Time
	for {
		next := c.reportEvery
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !deferred.IsZero() {
				// The intervals the new sequence ended; the one under way
				// began when it arrived and ends at its first report.
				_ = c.flush(ctx, false)
				seqFlushed = time.Now()
				t.Reset(max(min(c.reportEvery, firstReportAfter)-time.Since(deferred), minFlushGap))
				deferred = time.Time{}
				continue
			}
		case now := <-watch:
			if !c.partialKnown.Load() || !c.surged(now) {
				continue
			}
		case <-c.newSequence:
			if !c.partialKnown.Load() {
				continue // a daemon without the admission report: keep the cadence
			}
			if gap := time.Since(seqFlushed); gap < minFlushGap {
				t.Reset(minFlushGap - gap)
				deferred = time.Now()
				continue
			}
			next = min(c.reportEvery, firstReportAfter)
			seqFlushed = time.Now()
		}
		_ = c.flush(ctx, true) // a failed flush keeps its counts for the next one
		t.Reset(next)
	}
}

// minFlushGap is the least time between two flushes new sequences start:
// a daemon publishes at most four changes of its admission a second, and
// one that published a new sequence every millisecond drew 2,861 reports
// in 3 s from one client. A flush of the report interval or a surge does
// not delay a new sequence's (measured as it did: the square wave's first
// rise lost about a point in the overload benchmark).
const minFlushGap = 100 * time.Millisecond

// staleLoop marks the state stale once StaleAfter passes without contact.
func (c *Client) staleLoop(ctx context.Context) {
	t := time.NewTimer(c.staleAfter)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		last := c.lastContact.Load()
		idle := time.Since(time.Unix(0, last))
		if last == 0 || idle >= c.staleAfter {
			if c.setStale(true) {
				c.log.Warn("no contact with degraded: the state is stale and the fail mode decides",
					slog.String("daemon", c.base.String()), slog.Duration("stale_after", c.staleAfter),
					slog.String("fail_mode", c.mode.String()))
			}
			t.Reset(c.staleAfter)
		} else {
			t.Reset(c.staleAfter - idle)
		}
	}
}

// follow keeps a subscription until ctx ends: stream sessions, long-poll
// sessions when the stream cannot be held, backoff between failures.
func (c *Client) follow(ctx context.Context) {
	base := backoffBase
	attempt := 0
	var pollUntil time.Time
	for ctx.Err() == nil {
		var progressed bool
		var err error
		began := time.Now()
		if time.Now().Before(pollUntil) {
			progressed, err = c.poll(ctx, pollUntil)
		} else {
			var retry time.Duration
			progressed, retry, err = c.stream(ctx)
			if retry > 0 {
				base = min(max(retry, backoffBase), backoffCap)
			}
			if errors.Is(err, errNotStream) {
				c.log.Info("degraded's event stream is unavailable; long-polling instead",
					slog.String("daemon", c.base.String()), slog.String("error", err.Error()),
					slog.Duration("stream_retry_in", streamRetryAfter))
				pollUntil = time.Now().Add(streamRetryAfter)
				attempt = 0
				continue
			}
		}
		if ctx.Err() != nil {
			return
		}
		c.down(time.Now(), err)
		if progressed && time.Since(began) >= stableSession {
			attempt = 0
		}
		if err == nil && !progressed {
			continue // a poll session ended on schedule: try the stream again
		}
		d := backoff(attempt, base, backoffCap, rand.Int64N)
		attempt++
		sleep(ctx, d)
	}
}

// stableSession is how long a session that delivered a state must have
// lasted for the backoff to start again from its base: a stream that
// delivers one event and drops, again and again, backs off to the cap
// (reset after every event, one client reconnected 20 times a second).
const stableSession = 10 * time.Second

// backoff is "full jitter": a uniform draw from [0, min(ceiling,
// base*2^attempt)). rnd(n) must return a value in [0, n).
func backoff(attempt int, base, ceiling time.Duration, rnd func(int64) int64) time.Duration {
	d := ceiling
	if attempt < 32 {
		if b := base << attempt; b > 0 && b < ceiling {
			d = b
		}
	}
	if d <= 0 {
		return 0
	}
	return time.Duration(rnd(int64(d)))
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// stream holds one SSE connection until it fails. progressed reports
// whether any event arrived; retry is the stream's "retry:" value, if any.
func (c *Client) stream(ctx context.Context) (progressed bool, retry time.Duration, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var timedOut atomic.Bool
	idle := time.AfterFunc(min(firstEventTimeout, c.staleAfter), func() {
		timedOut.Store(true)
		cancel()
	})
	defer idle.Stop()

	req, err := c.newRequest(ctx, http.MethodGet, "/v1/level/stream", nil)
	if err != nil {
		return false, 0, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		return false, 0, c.unreachable(err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotAcceptable, http.StatusServiceUnavailable:
		return false, 0, fmt.Errorf("%w: %s", errNotStream, resp.Status)
	default:
		return false, 0, &APIError{StatusCode: resp.StatusCode, Message: resp.Status}
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return false, 0, fmt.Errorf("%w: content type %q", errNotStream, mt)
	}

	r := newSSEReader(resp.Body)
	r.onLine = func() {
		if progressed {
			c.contact(time.Now())
			idle.Reset(c.staleAfter)
		}
	}
	for {
		ev, err := r.Next()
		if err != nil {
			switch {
			case timedOut.Load() && !progressed:
				return false, r.retry, fmt.Errorf("%w: no event within %s", errNotStream, min(firstEventTimeout, c.staleAfter))
			case timedOut.Load():
				// The stream stalled: that is lost contact, not the
				// caller's cancel.
				return true, r.retry, fmt.Errorf("the event stream was silent for %s", c.staleAfter)
			}
			return progressed, r.retry, err
		}
		if ev.Type != "level" {
			continue
		}
		var st State
		doc := stateDocument{State: &st}
		if err := json.Unmarshal([]byte(ev.Data), &doc); err != nil {
			return progressed, r.retry, fmt.Errorf("bad level event %s: %w", quoteStart(ev.Data), err)
		}
		if !progressed {
			progressed = true
			idle.Reset(c.staleAfter)
			c.loadLevels(ctx)
			c.up(time.Now(), "stream")
		}
		c.partialKnown.Store(doc.Partial != nil)
		c.accept(&st, time.Now())
	}
}

// poll long-polls GET /v1/level until until, ctx ends or a request fails.
func (c *Client) poll(ctx context.Context, until time.Time) (progressed bool, err error) {
	wait := min(maxPollWait, max(c.staleAfter/2, time.Second)).Truncate(time.Second)
	for ctx.Err() == nil && time.Now().Before(until) {
		path := "/v1/level"
		after := c.view.Load().state // the state the request waits to pass
		if after != nil {
			path += "?wait=" + wait.String() + "&after=" + strconv.FormatUint(after.Sequence, 10)
		}
		rctx, cancel := context.WithTimeout(ctx, wait+requestTimeout)
		req, err := c.newRequest(rctx, http.MethodGet, path, nil)
		if err != nil {
			cancel()
			return progressed, err
		}
		var st State
		doc := stateDocument{State: &st}
		asked := time.Now()
		err = c.send(req, &doc)
		cancel()
		if err != nil {
			return progressed, err
		}
		if !progressed {
			c.loadLevels(ctx)
			c.up(time.Now(), "long-poll")
		}
		progressed = true
		c.partialKnown.Store(doc.Partial != nil)
		c.accept(&st, time.Now())
		// A daemon (or a proxy) that answers a wait at once must not draw
		// a request per round trip.
		if after != nil {
			gap := pollMinGap
			if st.Sequence != after.Sequence {
				gap = pollChangedGap
			}
			sleep(ctx, gap-time.Since(asked))
		}
	}
	return progressed, nil
}

// pollMinGap is the least time between two long-poll requests whose
// answer brought nothing new, and pollChangedGap between two that each
// brought a new state: a daemon that honours wait answers an unchanged
// state after it, and one (or a proxy) that ignores it drew 30,000
// requests in 2 s from one client.
const (
	pollMinGap     = time.Second
	pollChangedGap = 100 * time.Millisecond
)

// quoteStart quotes the first bytes of a rejected event's data for the
// log: an event may be megabytes.
func quoteStart(data string) string {
	const most = 200
	if len(data) <= most {
		return fmt.Sprintf("%q", data)
	}
	return fmt.Sprintf("%q... (%d bytes)", data[:most], len(data))
}

// stateDocument decodes a state document into State and tells whether it
// had the key "partial", null or not: a daemon that publishes it takes
// the admission report, an older one lacks the key and refuses the field.
// Its Partial field hides State's at the top level, so that the raw value
// is kept: nil when the key is absent, "null" or the object otherwise.
type stateDocument struct {
	*State
	Partial json.RawMessage `json:"partial"`
	// Threshold hides State's too, so that a document without the key
	// is refused rather than read as threshold 0 (everything admitted).
	Threshold *int `json:"priority_threshold"`
}

// UnmarshalJSON decodes the document, then State.Partial from the raw
// value, and refuses a document the daemon cannot have published
// (State.check).
func (d *stateDocument) UnmarshalJSON(b []byte) error {
	type plain stateDocument // without this method
	if err := json.Unmarshal(b, (*plain)(d)); err != nil {
		return err
	}
	if d.Threshold == nil {
		return errors.New("state document: no priority_threshold")
	}
	d.State.PriorityThreshold = *d.Threshold
	d.State.Partial = nil
	if d.Partial != nil {
		if err := json.Unmarshal(d.Partial, &d.State.Partial); err != nil {
			return err
		}
	}
	if err := d.State.check(); err != nil {
		return fmt.Errorf("state document: %w", err)
	}
	return nil
}

// loadLevels learns the level order that Do needs; best effort.
func (c *Client) loadLevels(ctx context.Context) {
	ls, err := c.Levels(ctx)
	if err != nil {
		return
	}
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = l.Name
	}
	c.names.Store(&names)
}
