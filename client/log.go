package client

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"
)

// refusedLogEvery bounds how often a refused report is logged: a wrong
// token refuses every flush, once a second, and must not flood the log.
const refusedLogEvery = time.Minute

// WithLogger sets where the client tells what would otherwise go unseen:
// reports the daemon refuses (ERROR; a 401 or 403 names the token, at
// most once a minute with a count of the ones not logged), reports that
// cannot be delivered (WARN, once per outage; INFO when one is delivered
// again), contact lost with the daemon (WARN, once per outage and at most
// once a minute, with a count of the outages not logged), the state going
// stale (WARN), contact restored after a logged outage (INFO), and a
// sequence that went back, which is followed (WARN, at most once a minute). Default: slog.Default(). A nil logger
// keeps the default; to silence the client pass a logger whose handler
// discards, e.g. slog.New(slog.DiscardHandler).
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) {
		if l != nil {
			c.log = l
		}
	}
}

// refusals is the flusher's memory of refused reports, for rate-limiting
// their log lines. Owned by the one flush that runs at a time.
type refusals struct {
	loggedAt   time.Time // when the last refusal was logged; zero: never
	suppressed int       // refusals since then that were not logged
}

// refused logs a report the daemon will never accept, at most once per
// refusedLogEvery.
func (c *Client) refused(ae *APIError, success, failure int64, now time.Time) {
	r := &c.refusals
	if !r.loggedAt.IsZero() && now.Sub(r.loggedAt) < refusedLogEvery {
		r.suppressed++
		return
	}
	attrs := []any{
		slog.String("daemon", c.base.String()),
		slog.Int("status", ae.StatusCode),
		slog.String("answer", ae.Message),
		slog.Int64("dropped_success", success),
		slog.Int64("dropped_failure", failure),
	}
	if r.suppressed > 0 {
		attrs = append(attrs, slog.Int("refused_since_last_log", r.suppressed))
	}
	msg := "degraded refused an outcome report; its counts are dropped"
	if ae.StatusCode == http.StatusUnauthorized || ae.StatusCode == http.StatusForbidden {
		msg = "degraded refused an outcome report: the report token is likely wrong (WithToken must be the daemon's auth.report_token); the error rate does not see this service"
	}
	c.log.Error(msg, attrs...)
	r.loggedAt, r.suppressed = now, 0
}

// contactLogEvery bounds how often an outage is logged: a stream that
// delivers one state and drops, again and again, is one line a minute,
// not two per connection.
const contactLogEvery = time.Minute

// contactLog tracks contact with the daemon for the log: one line when it
// is lost, one when it is back. Owned by Run's follow goroutine.
type contactLog struct {
	connected  bool      // a state arrived in the current session
	lost       bool      // an outage began and has not ended
	logged     bool      // and its WARN was written
	lostAt     time.Time // when it began
	loggedAt   time.Time // when the last outage was logged
	suppressed int       // outages since then that were not logged
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
// outage is logged, at most once per contactLogEvery.
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
	if !l.loggedAt.IsZero() && now.Sub(l.loggedAt) < contactLogEvery {
		l.connected, l.logged = false, false
		l.suppressed++
		return
	}
	msg := "lost contact with degraded; reconnecting with backoff"
	if !l.connected {
		msg = "cannot reach degraded; retrying with backoff"
	}
	attrs := []any{slog.String("daemon", c.base.String()), slog.String("error", err.Error())}
	if l.suppressed > 0 {
		attrs = append(attrs, slog.Int("outages_since_last_log", l.suppressed))
	}
	c.log.Warn(msg, attrs...)
	l.connected, l.logged, l.loggedAt, l.suppressed = false, true, now, 0
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
