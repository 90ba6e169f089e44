package client

import (
	"math"
	"time"
)

// Ticket is the decision about one request, made by Admit: whether it is
// served, the level that decided, and, once served, where its outcome
// goes. It is a small value (two pointers and a flag): pass it by value,
// keep it for the request's life, and call Done or Observe once when an
// admitted request ends. The zero Ticket is not admitted and records
// nothing. A Ticket may be used from any goroutine.
type Ticket struct {
	c        *Client
	v        *view
	admitted bool
}

// Admit decides whether a request of the given priority is served now,
// exactly as Allow does (the threshold, the partial band's draw, shadow
// mode and the fail mode), and counts the decision for the admission
// report: admitted, shed by the band's draw, or shed below it, under its
// priority, in the interval of the state it was judged against. This is
// what Middleware, Do and the degradedgrpc interceptors use; call it
// wherever a service decides admission by itself (a queue consumer, a
// protocol of its own) so that the daemon's law sees the offered load by
// priority. It is an atomic load, a compare, a probe of a small table and
// one atomic add, plus one draw in the band: no lock, no allocation.
//
// A negative priority counts as 0, one above PriorityCritical as
// PriorityCritical.
func (c *Client) Admit(priority int) Ticket {
	v := c.view.Load()
	return Ticket{c: c, v: v, admitted: v.decide(clampPriority(priority))}
}

// Admitted reports whether the request is to be served. In shadow mode
// it is always true.
func (t Ticket) Admitted() bool { return t.admitted }

// Level is the name of the level that decided, for X-Degraded-Level:
// "unknown" when the fail mode decided without a state.
func (t Ticket) Level() string {
	if t.v == nil {
		return "unknown"
	}
	return t.v.level
}

// RetryAfter is how long a shed caller should wait before trying again:
// the time until the level could drop (the state's earliest_recovery_at),
// at least one second; one second when that is unknown. HTTP answers it
// in whole seconds rounded up (Retry-After), gRPC in milliseconds
// (grpc-retry-pushback-ms).
func (t Ticket) RetryAfter() time.Duration {
	return retryAfterAt(t.recoveryAt(), time.Now())
}

func (t Ticket) recoveryAt() *time.Time {
	if t.v == nil {
		return nil
	}
	return t.v.recoveryAt
}

// Done records the outcome of an admitted request towards the daemon's
// error rate, as Record does. A shed request's ticket records nothing:
// shed load must never feed the error rate that caused the shedding.
func (t Ticket) Done(success bool) {
	if t.admitted {
		t.c.Record(success)
	}
}

// Observe records the outcome and the latency d of an admitted request,
// as Client.Observe does; nothing for a shed one.
func (t Ticket) Observe(success bool, d time.Duration) {
	if t.admitted {
		t.c.Observe(success, d)
	}
}

// retryAfterAt is max(1s, at - now); 1s without at.
func retryAfterAt(at *time.Time, now time.Time) time.Duration {
	if at == nil {
		return time.Second
	}
	return max(time.Second, at.Sub(now))
}

// retryAfterSeconds is a retry-after in whole seconds, rounded up.
func retryAfterSeconds(d time.Duration) int {
	return int(math.Ceil(d.Seconds()))
}
