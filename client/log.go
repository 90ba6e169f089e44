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
// most once a minute with a count of the ones not logged), contact lost
// with the daemon (WARN, once per outage), the state going stale (WARN),
// and contact restored (INFO). Default: slog.Default(). A nil logger
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

// contactLog tracks contact with the daemon for the log: one line when it
// is lost, one when it is back. Owned by Run's follow goroutine.
type contactLog struct {
	connected bool      // a state arrived in the current session
	lost      bool      // an outage was logged and has not ended
	lostAt    time.Time // when it began
}

// up notes a session that delivered its first state.
func (c *Client) up(now time.Time, how string) {
	l := &c.contactLog
	if l.lost {
		c.log.Info("contact with degraded restored",
			slog.String("daemon", c.base.String()), slog.String("via", how),
			slog.Duration("after", now.Sub(l.lostAt).Round(time.Millisecond)))
	}
	l.connected, l.lost = true, false
}

// down notes a session that ended with err; the first failure of an
// outage is logged.
func (c *Client) down(now time.Time, err error) {
	l := &c.contactLog
	if err == nil { // a long-poll session that ended on schedule
		return
	}
	if l.lost || errors.Is(err, context.Canceled) {
		l.connected = false
		return
	}
	msg := "lost contact with degraded; reconnecting with backoff"
	if !l.connected {
		msg = "cannot reach degraded; retrying with backoff"
	}
	c.log.Warn(msg, slog.String("daemon", c.base.String()), slog.String("error", err.Error()))
	l.connected, l.lost, l.lostAt = false, true, now
}
