package client

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// PriorityFromHeader returns a priority function for Middleware that reads
// the request's priority from the named header (e.g. "X-Priority"),
// using fallback when it is missing or not an integer, and clamping it to
// 0..PriorityCritical. Set such a header only at a trusted edge: a caller
// that can set it can exempt itself from shedding.
func PriorityFromHeader(name string, fallback int) func(*http.Request) int {
	key := http.CanonicalHeaderKey(name) // once, not per request
	return func(r *http.Request) int {
		vs := r.Header[key]
		if len(vs) == 0 || vs[0] == "" {
			return fallback
		}
		if p, ok := smallPriority(vs[0]); ok {
			return p
		}
		p, err := strconv.Atoi(vs[0])
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return fallback // not an integer; one out of range is clamped
		}
		return min(max(p, 0), PriorityCritical)
	}
}

// smallPriority parses the priorities a header carries in practice, one
// to three digits, in a few instructions: this runs on every request.
// Anything else is left to strconv.
func smallPriority(s string) (int, bool) {
	if len(s) == 0 || len(s) > 3 {
		return 0, false
	}
	p := 0
	for i := range len(s) {
		d := s[i] - '0'
		if d > 9 {
			return 0, false
		}
		p = p*10 + int(d)
	}
	return min(p, PriorityCritical), true
}

// Middleware sheds what the current level does not admit and reports the
// rest to the daemon's error rate and latency. A request is admitted as
// Allow admits it (the threshold, and the partial band's draw); one that
// is not is answered 503 with Retry-After (whole seconds until the level
// could drop, at least 1) and X-Degraded-Level, without reaching next and
// without being recorded: shed load must never feed the error rate that
// caused the shedding. An admitted request counts as a failure if next
// answers >= 500 or panics (the panic continues up the stack), else as a
// success; its latency is the time next took to return. Every decision,
// admitted or shed, is counted for the admission report (see Admit).
//
// Every admitted request's outcome is counted (Client.Record). Its latency
// is observed (Client.Observe) for every request while the client serves
// up to about 2,048 requests a second, and above that for a uniform random
// sample of at least 1,024 a second, re-chosen at each report: timing a
// request costs two clock reads, more than the rest of the middleware, and
// a quantile of that many observations a second is as good as one of all.
// In shadow mode (State.Shadow) nothing is shed: what would have been is
// counted as Allow counts it, then served and observed like any other
// request.
//
// The ResponseWriter next receives passes Flush through and unwraps
// (http.ResponseController reaches Hijack, deadlines and the rest). It is
// reused by later requests once next returns, so next must not use it
// after returning, as net/http already requires. An admitted request
// costs no allocation, unless WithPropagation is given. With
// WithRequestStart a timed request's latency counts from when a proxy in
// front saw it, so that a queue before the handler is seen too.
func Middleware(c *Client, priority func(*http.Request) int, opts ...MiddlewareOption) func(http.Handler) http.Handler {
	var cfg middlewareConfig
	for _, o := range opts {
		o(&cfg)
	}
	return func(next http.Handler) http.Handler {
		m := &middleware{c: c, priority: priority, next: next, epoch: time.Now(), propagate: cfg.propagate}
		if cfg.startHeader != "" {
			m.start = &requestStart{header: cfg.startHeader}
		}
		m.writers.New = func() any { return &statusWriter{rng: newXorshift()} }
		return m
	}
}

// MiddlewareOption configures Middleware.
type MiddlewareOption func(*middlewareConfig)

type middlewareConfig struct {
	propagate   bool
	startHeader string // canonical; "" without WithRequestStart
}

// WithPropagation makes Middleware put each admitted request's priority in
// its context (WithPriority), so that PriorityFrom, Transport and
// degradedgrpc's client interceptors carry it to the services the handler
// calls: a checkout request stays a checkout request three services down.
// It costs the request's copy with the new context (two allocations, 370
// bytes: 300 to 600 ns more per request on the benchmark's 2-core VM,
// bench/micro's BenchmarkMiddlewarePropagation), so it is off by default.
func WithPropagation() MiddlewareOption {
	return func(c *middlewareConfig) { c.propagate = true }
}

// WithRequestStart makes Middleware time each request from when the named
// header says it arrived at the proxy in front of the service, not from
// when the handler was called: the latency the daemon sees then includes
// the wait before the handler (the kernel's accept queue and socket
// buffers, the goroutines waiting for a saturated core), which a middleware
// inside the process cannot see any other way. On one busy core that wait
// is most of the latency the callers get.
//
// The header is the request-queueing convention of New Relic and others,
// "X-Request-Start" set by the proxy: nginx's
// `proxy_set_header X-Request-Start "t=${msec}";`, HAProxy's
// `http-request set-header X-Request-Start t=%[date(0,ms)]`, Heroku's
// router. Its value is a Unix time, optionally after "t=", in seconds (with
// a fraction), milliseconds, microseconds or nanoseconds, told apart by
// size. A time ahead of this host's clock (skew between hosts) counts as no
// wait. A value that does not parse, or is more than a minute old, is not
// used (the request is timed from the handler) and is logged (WARN, at
// most once a minute, with a count). Only the requests the middleware
// times read the header. Set it only at a trusted edge: a caller that
// sets it can make the service look slower than it is.
func WithRequestStart(header string) MiddlewareOption {
	return func(c *middlewareConfig) { c.startHeader = http.CanonicalHeaderKey(header) }
}

// requestStartMaxAge is the oldest request start WithRequestStart uses: an
// older one is a wrong unit or a broken clock, not a queue.
const requestStartMaxAge = time.Minute

// requestStart is WithRequestStart's header and its count of values that
// could not be used.
type requestStart struct {
	header   string
	bad      atomic.Int64 // unusable values since the last log line
	loggedAt atomic.Int64 // Unix nanoseconds of the last log line; 0: never
}

// queued returns how long before now the request's header says it
// arrived, 0 without a header or when the header is ahead of now, and
// the time it names in Unix nanoseconds, 0 when it names none that is
// usable. An unusable value is counted and logged, rate-limited, and
// gives 0, 0.
func (s *requestStart) queued(c *Client, r *http.Request, now time.Time) (time.Duration, int64) {
	vs := r.Header[s.header]
	if len(vs) == 0 {
		return 0, 0
	}
	at, ok := parseRequestStart(vs[0])
	if ok {
		d := now.Sub(at)
		if d <= requestStartMaxAge {
			return max(d, 0), at.UnixNano()
		}
	}
	s.bad.Add(1)
	last := s.loggedAt.Load()
	if (last == 0 || now.UnixNano()-last >= int64(time.Minute)) && s.loggedAt.CompareAndSwap(last, now.UnixNano()) {
		v := vs[0]
		if len(v) > 64 {
			v = v[:64]
		}
		c.log.Warn("a request's start header is not a Unix time in the last minute; its request is timed from the handler",
			slog.String("header", s.header), slog.String("value", v),
			slog.Int64("unusable_since_last_log", s.bad.Swap(0)))
	}
	return 0, 0
}

// parseRequestStart reads a request start: an optional "t=", then a
// decimal Unix time in seconds (a fraction allowed), milliseconds,
// microseconds or nanoseconds, the unit the one that puts it after 1973;
// up to 2255.
func parseRequestStart(v string) (time.Time, bool) {
	if len(v) > 2 && v[0] == 't' && v[1] == '=' {
		v = v[2:]
	}
	if len(v) == 0 || len(v) > 32 {
		return time.Time{}, false
	}
	dots := 0
	for i := range len(v) {
		switch c := v[i]; {
		case c == '.':
			dots++
		case c < '0' || c > '9':
			return time.Time{}, false
		}
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || dots > 1 || f < 1e8 {
		return time.Time{}, false
	}
	var ns float64
	switch {
	case f < 1e11:
		ns = f * 1e9
	case f < 1e14:
		ns = f * 1e6
	case f < 1e17:
		ns = f * 1e3
	case f < 1e20:
		ns = f
	default:
		return time.Time{}, false
	}
	if ns >= 9e18 { // past int64's nanoseconds (2262)
		return time.Time{}, false
	}
	return time.Unix(0, int64(ns)), true
}

// middleware is the handler Middleware returns.
type middleware struct {
	c        *Client
	priority func(*http.Request) int
	next     http.Handler
	writers  sync.Pool // of *statusWriter, so that serving allocates nothing
	// epoch is the origin of the monotonic times the requests are timed
	// with: time.Since(epoch) reads only the monotonic clock, where
	// time.Now would read the wall clock too.
	epoch     time.Time
	propagate bool
	start     *requestStart // nil without WithRequestStart
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := m.priority(r)
	t := m.c.Admit(p)
	if !t.admitted {
		shed(w, t)
		return
	}
	if m.propagate {
		r = r.WithContext(WithPriority(r.Context(), p))
	}
	sw := m.writers.Get().(*statusWriter)
	sw.ResponseWriter = w
	timed := m.c.timing.timed(&sw.rng)
	var start time.Duration
	switch {
	case timed && m.start != nil:
		now := time.Now() // one read: the wall clock for the header, the monotonic for the epoch
		waited, at := m.start.queued(m.c, r, now)
		start = now.Sub(m.epoch) - waited
		if at != 0 && t.v != nil {
			t.v.tally.waited(now.UnixNano() - at) // how the queue before the middleware moves
		}
	case timed:
		start = time.Since(m.epoch)
	}
	defer m.done(sw, timed, start)
	m.next.ServeHTTP(sw, r)
	sw.returned = true
}

// done observes a request that next served, or panicked in (the panic
// goes on; its writer is not reused, since the handler's goroutines may
// still hold it): its latency too if it was timed (since start, on the
// epoch's clock), else only its outcome.
func (m *middleware) done(sw *statusWriter, timed bool, start time.Duration) {
	ok := sw.returned && sw.status < 500
	if timed {
		m.c.Observe(ok, time.Since(m.epoch)-start)
	} else {
		m.c.Record(ok)
	}
	if sw.returned {
		*sw = statusWriter{rng: sw.rng}
		m.writers.Put(sw)
	}
}

// shed answers a request the level does not admit.
func shed(w http.ResponseWriter, t Ticket) {
	h := w.Header()
	h.Set("Retry-After", strconv.Itoa(retryAfterSeconds(t.RetryAfter())))
	h.Set("X-Degraded-Level", t.Level())
	http.Error(w, "shed: the service is degraded, retry later", http.StatusServiceUnavailable)
}

// statusWriter remembers the status a handler answered with, and whether
// the handler returned (false: it panicked).
type statusWriter struct {
	http.ResponseWriter
	status   int
	returned bool
	rng      xorshift // which requests are timed; kept across uses
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush, Hijack and deadlines.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes through, so streaming handlers keep working.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
