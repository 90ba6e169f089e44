package client

import (
	"math"
	"net/http"
	"strconv"
	"time"
)

// PriorityFromHeader returns a priority function for Middleware that reads
// the request's priority from the named header (e.g. "X-Priority"),
// using fallback when it is missing or not an integer, and clamping it to
// 0..PriorityCritical. Set such a header only at a trusted edge: a caller
// that can set it can exempt itself from shedding.
func PriorityFromHeader(name string, fallback int) func(*http.Request) int {
	return func(r *http.Request) int {
		v := r.Header.Get(name)
		if v == "" {
			return fallback
		}
		p, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fallback
		}
		return int(min(max(p, 0), PriorityCritical))
	}
}

// Middleware sheds what the current level does not admit and reports the
// rest to the daemon's error rate. A request whose priority is not
// admitted is answered 503 with Retry-After (whole seconds until the level
// could drop, at least 1) and X-Degraded-Level, without reaching next and
// without being recorded: shed load must never feed the error rate that
// caused the shedding. An admitted request is recorded as a failure if next
// answers >= 500 or panics (the panic continues up the stack), else as a
// success.
func Middleware(c *Client, priority func(*http.Request) int) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			v := c.view.Load()
			if max(priority(r), 0) < v.threshold {
				h := w.Header()
				h.Set("Retry-After", strconv.Itoa(retryAfter(v.recoveryAt, time.Now())))
				h.Set("X-Degraded-Level", v.level)
				http.Error(w, "shed: the service is degraded, retry later", http.StatusServiceUnavailable)
				return
			}
			sw := &statusWriter{ResponseWriter: w}
			ok := false
			defer func() {
				if !ok {
					c.Record(false) // next panicked; let the panic go on
				}
			}()
			next.ServeHTTP(sw, r)
			ok = true
			c.Record(sw.status < 500)
		})
	}
}

// retryAfter is max(1, ceil(at - now)) in whole seconds; 1 without at.
func retryAfter(at *time.Time, now time.Time) int {
	if at == nil {
		return 1
	}
	return max(1, int(math.Ceil(at.Sub(now).Seconds())))
}

// statusWriter remembers the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
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
