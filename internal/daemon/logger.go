package daemon

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"

	"github.com/degraded/degraded/config"
)

// logs is the daemon's logger, whose level and format a reload changes at
// once (DESIGN.md "What a reload applies"): the level through a
// slog.LevelVar, the format by swapping the handler that every logger
// derived from it writes through.
type logs struct {
	w     io.Writer
	level slog.LevelVar
	inner atomic.Pointer[slog.Handler] // the text or JSON handler in force
	log   *slog.Logger
}

func newLogs(c config.Log, w io.Writer) *logs {
	l := &logs{w: w}
	l.configure(c)
	l.log = slog.New(switching{l: l})
	return l
}

// configure puts c's level and format in force.
func (l *logs) configure(c config.Log) {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.Level)) // validated by config
	l.level.Set(lvl)
	opts := &slog.HandlerOptions{Level: &l.level}
	var h slog.Handler = slog.NewTextHandler(l.w, opts)
	if c.Format == "json" {
		h = slog.NewJSONHandler(l.w, opts)
	}
	l.inner.Store(&h)
}

// switching is the handler the daemon's loggers write through: it hands
// each record to the handler in force, with the attributes and groups
// that WithAttrs and WithGroup added, in order.
type switching struct {
	l    *logs
	with []func(slog.Handler) slog.Handler
}

func (s switching) handler() slog.Handler {
	h := *s.l.inner.Load()
	for _, f := range s.with {
		h = f(h)
	}
	return h
}

func (s switching) Enabled(_ context.Context, lvl slog.Level) bool { return lvl >= s.l.level.Level() }

func (s switching) Handle(ctx context.Context, r slog.Record) error {
	return s.handler().Handle(ctx, r)
}

func (s switching) WithAttrs(attrs []slog.Attr) slog.Handler {
	return switching{l: s.l, with: append(s.with[:len(s.with):len(s.with)], func(h slog.Handler) slog.Handler { return h.WithAttrs(attrs) })}
}

func (s switching) WithGroup(name string) slog.Handler {
	return switching{l: s.l, with: append(s.with[:len(s.with):len(s.with)], func(h slog.Handler) slog.Handler { return h.WithGroup(name) })}
}
