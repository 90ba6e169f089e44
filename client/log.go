package client

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"
)

// logEvery bounds how often one kind of line is logged: a wrong token
// refuses every flush, once a second, and a stream that delivers one
// state and drops, again and again, would be two lines a connection.
const logEvery = time.Minute

// limiter rate-limits one kind of log line to one per logEvery, counting
// the ones it holds back. Owned by whichever goroutine logs that kind.
type limiter struct {
	at         time.Time // when the last line was logged; zero: never
	suppressed int       // lines held back since then
}

// allow reports whether a line may be logged at now, and how many were
// held back before it; a line it refuses is counted.
func (l *limiter) allow(now time.Time) (ok bool, heldBack int) {
	if !l.at.IsZero() && now.Sub(l.at) < logEvery {
		l.suppressed++
		return false, 0
	}
	heldBack = l.suppressed
	l.at, l.suppressed = now, 0
	return true, heldBack
}

// WithLogger sets where the client tells what would otherwise go unseen:
// reports the daemon refuses (ERROR; a 401 or 403 names the token, at
// most once a minute with a count of the ones not logged), reports that
// cannot be delivered (WARN, once per outage; INFO when one is delivered
// again), contact lost with the daemon (WARN, once per outage and at most
// once a minute, with a count of the outages not logged), the state going
// stale (WARN), contact restored after a logged outage (INFO), and a
// sequence that went back, which is followed (WARN, at most once a
// minute). Default: slog.Default(). A nil logger keeps the default; to
// silence the client pass a logger whose handler discards, e.g.
// slog.New(slog.DiscardHandler).
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) {
		if l != nil {
			c.log = l
		}
	}
}

// refused logs a report the daemon will never accept, at most once per
// logEvery.
func (c *Client) refused(ae *APIError, success, failure int64, now time.Time) {
	ok, heldBack := c.refusals.allow(now)
	if !ok {
		return
	}
	attrs := []any{
		slog.String("daemon", c.base.String()),
		slog.Int("status", ae.StatusCode),
		slog.String("answer", ae.Message),
		slog.Int64("dropped_success", success),
		slog.Int64("dropped_failure", failure),
	}
	if heldBack > 0 {
		attrs = append(attrs, slog.Int("refused_since_last_log", heldBack))
	}
	msg := "degraded refused an outcome report; its counts are dropped"
	if ae.StatusCode == http.StatusUnauthorized || ae.StatusCode == http.StatusForbidden {
		msg = "degraded refused an outcome report: the report token is likely wrong (WithToken must be the daemon's auth.report_token); the error rate does not see this service"
	}
	c.log.Error(msg, attrs...)
}

// contactLog tracks contact with the daemon for the log: one line when it
// is lost, one when it is back. Owned by Run's follow goroutine.
type contactLog struct {
	connected bool      // a state arrived in the current session
	lost      bool      // an outage began and has not ended
	logged    bool      // and its WARN was written
	lostAt    time.Time // when it began
	limit     limiter   // outages logged, at most one per logEvery
}

// up notes a session that delivered its first state.
func (c *Client) up(now time.Time, how string) {
	l := &c.contactLog
	if l.lost && l.logged {
		c.log.Info("contact with degraded restored",
			slog.String("daemon", c.base.String()), slog.String("via", how),
			slog.Duration("after", now.Sub(l.lostAt).Round(time.Millisecond)))
	}
	l.connected, l.lost, l.logged = true, false, false
}

// down notes a session that ended with err; the first failure of an
// outage is logged, at most once per logEvery.
func (c *Client) down(now time.Time, err error) {
	l := &c.contactLog
	if err == nil { // a long-poll session that ended on schedule
		return
	}
	if l.lost || errors.Is(err, context.Canceled) {
		l.connected = false
		return
	}
	l.lost, l.lostAt = true, now
	ok, heldBack := l.limit.allow(now)
	if !ok {
		l.connected, l.logged = false, false
		return
	}
	msg := "lost contact with degraded; reconnecting with backoff"
	if !l.connected {
		msg = "cannot reach degraded; retrying with backoff"
	}
	attrs := []any{slog.String("daemon", c.base.String()), slog.String("error", err.Error())}
	if heldBack > 0 {
		attrs = append(attrs, slog.Int("outages_since_last_log", heldBack))
	}
	c.log.Warn(msg, attrs...)
	l.connected, l.logged = false, true
}

// undelivered tracks outcome reports that could not be delivered (the
// daemon unreachable, or answering 5xx, 408 or 429): one WARN when the
// first fails, one INFO when one is delivered again. The counts are kept
// for the next flush meanwhile. Owned by the flusher.
type undelivered struct {
	failing bool
	since   time.Time
	flushes int // failed flushes in this outage
}

// sent notes a flush that reached the daemon, or failed with err.
func (c *Client) sent(err error, now time.Time) {
	u := &c.undelivered
	switch {
	case err == nil && u.failing:
		c.log.Info("outcome reports reach degraded again",
			slog.String("daemon", c.base.String()),
			slog.Duration("after", now.Sub(u.since).Round(time.Millisecond)),
			slog.Int("failed_flushes", u.flushes))
		*u = undelivered{}
	case err == nil || errors.Is(err, context.Canceled):
	case !u.failing:
		c.log.Warn("cannot deliver outcome reports to degraded; their counts are kept for the next flush",
			slog.String("daemon", c.base.String()), slog.String("error", err.Error()))
		*u = undelivered{failing: true, since: now, flushes: 1}
	default:
		u.flushes++
	}
}
