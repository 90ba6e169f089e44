package client

import (
	"net/http"
	"strconv"
	"sync"
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
		if err != nil {
			return fallback
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
// costs no allocation, unless WithPropagation is given.
func Middleware(c *Client, priority func(*http.Request) int, opts ...MiddlewareOption) func(http.Handler) http.Handler {
	var cfg middlewareConfig
	for _, o := range opts {
		o(&cfg)
	}
	return func(next http.Handler) http.Handler {
		m := &middleware{c: c, priority: priority, next: next, epoch: time.Now(), propagate: cfg.propagate}
		m.writers.New = func() any { return &statusWriter{rng: newXorshift()} }
		return m
	}
}

// MiddlewareOption configures Middleware.
type MiddlewareOption func(*middlewareConfig)

type middlewareConfig struct {
	propagate bool
}

// WithPropagation makes Middleware put each admitted request's priority in
// its context (WithPriority), so that PriorityFrom, Transport and
// degradedgrpc's client interceptors carry it to the services the handler
// calls: a checkout request stays a checkout request three services down.
// It costs the request's copy with the new context (two allocations, about
// 100 ns more per request), so it is off by default.
func WithPropagation() MiddlewareOption {
	return func(c *middlewareConfig) { c.propagate = true }
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
	start := time.Duration(-1) // not timed
	if m.c.timing.timed(&sw.rng) {
		start = time.Since(m.epoch)
	}
	defer m.done(sw, start)
	m.next.ServeHTTP(sw, r)
	sw.returned = true
}

// done observes a request that next served, or panicked in (the panic
// goes on; its writer is not reused, since the handler's goroutines may
// still hold it): its latency too if it was timed (start >= 0), else only
// its outcome.
func (m *middleware) done(sw *statusWriter, start time.Duration) {
	ok := sw.returned && sw.status < 500
	if start >= 0 {
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
