package api

import "time"

// SSE are the event stream settings (config sse.*). Zero fields mean the
// documented defaults. Deps.SSE sets them at start, Server.SetSSE on a
// reload: they apply at once, to open streams too.
type SSE struct {
	// Heartbeat is the ping period (sse.heartbeat). Zero means 15s, the
	// config default: every stream pings, because a client treats a
	// silent stream as lost.
	Heartbeat time.Duration
	// WriteTimeout is how long one write to a stream may block, or its
	// unsent bytes stay above zero, before the subscriber is dropped
	// (sse.write_timeout). Zero means 10s, the config default: a
	// subscriber that stops reading is always dropped.
	WriteTimeout time.Duration
	// MaxSubscribers bounds concurrent streams (sse.max_subscribers). It
	// is lowered to Deps.MaxStreams when above it, and said so in the log.
	// 0 means no bound besides MaxStreams.
	MaxSubscribers int
}

// sseInForce is the SSE value in force, defaults applied. It is never
// changed: setSSE replaces it and closes changed, so that a stream
// waiting on it resets its tickers.
type sseInForce struct {
	SSE
	changed chan struct{}
}

// setSSE puts v in force, with the defaults SSE documents.
func (s *server) setSSE(v SSE) {
	if v.Heartbeat <= 0 {
		v.Heartbeat = 15 * time.Second
	}
	if v.WriteTimeout <= 0 {
		v.WriteTimeout = 10 * time.Second
	}
	if s.MaxStreams > 0 && v.MaxSubscribers > s.MaxStreams {
		s.Logger.Info("sse.max_subscribers lowered to the stream cap, max_connections - 32", "max_subscribers", v.MaxSubscribers, "lowered_to", s.MaxStreams)
		v.MaxSubscribers = s.MaxStreams
	}
	if old := s.sse.Swap(&sseInForce{SSE: v, changed: make(chan struct{})}); old != nil {
		close(old.changed)
	}
}

// checkEvery is how often the hub checks every stream for a departed peer
// and for unsent bytes, even when nothing is sent: a quarter of
// WriteTimeout, at most a heartbeat, so that degraded_sse_subscribers lags
// by less than a heartbeat and a stuck stream goes within 1.5 x
// WriteTimeout.
func (v *sseInForce) checkEvery() time.Duration {
	return min(v.Heartbeat, max(v.WriteTimeout/4, time.Millisecond))
}
