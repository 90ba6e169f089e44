package fleet

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapLogger is a zap logger for etcd's client that writes its warnings
// and errors to log, with "etcd client: " before the message and zap's
// fields as attributes; debug and info lines are dropped, and one message
// is written at most once every 10s (its client retries every 25ms while
// a member is down, each retry a warning), with how many were not.
func zapLogger(log *slog.Logger) *zap.Logger {
	return zap.New(slogCore{log: log, limit: &limiter{last: map[string]time.Time{}, dropped: map[string]int{}}})
}

// limitEvery is how often one message of etcd's client is logged.
const limitEvery = 10 * time.Second

// limiter remembers when each message was last logged, and how many
// since were not.
type limiter struct {
	mu      sync.Mutex
	last    map[string]time.Time
	dropped map[string]int
}

// allow says whether msg is logged now, and how many were dropped before.
func (l *limiter) allow(msg string, now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[msg]; ok && now.Sub(t) < limitEvery {
		l.dropped[msg]++
		return false, 0
	}
	if len(l.last) > 1000 { // messages are a fixed set; this never grows far
		clear(l.last)
	}
	n := l.dropped[msg]
	delete(l.dropped, msg)
	l.last[msg] = now
	return true, n
}

// slogCore is a zapcore.Core over a slog.Logger, at warn and above.
type slogCore struct {
	log    *slog.Logger
	fields []zapcore.Field
	limit  *limiter
}

var _ zapcore.Core = slogCore{}

func (c slogCore) Enabled(l zapcore.Level) bool { return l >= zapcore.WarnLevel }

func (c slogCore) With(fields []zapcore.Field) zapcore.Core {
	return slogCore{log: c.log, fields: append(slices.Clip(c.fields), fields...), limit: c.limit}
}

func (c slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	ok, dropped := c.limit.allow(e.LoggerName+"\x00"+e.Message, e.Time)
	if !ok {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	attrs := make([]slog.Attr, 0, len(keys)+1)
	if e.LoggerName != "" {
		attrs = append(attrs, slog.String("logger", e.LoggerName))
	}
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, enc.Fields[k]))
	}
	if dropped > 0 {
		attrs = append(attrs, slog.Int("suppressed", dropped))
	}
	level := slog.LevelWarn
	if e.Level >= zapcore.ErrorLevel {
		level = slog.LevelError
	}
	c.log.LogAttrs(context.Background(), level, "etcd client: "+e.Message, attrs...)
	return nil
}

func (c slogCore) Sync() error { return nil }
