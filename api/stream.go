package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/degraded/degraded/controller"
)

// Reasons a stream ends that sse_dropped_total{reason} counts.
const (
	dropWriteTimeout = "write_timeout"
	dropWriteError   = "write_error"
	dropLimit        = "limit"
	dropShutdown     = "shutdown"
)

var dropReasons = []string{dropWriteTimeout, dropWriteError, dropLimit, dropShutdown}

// handleStream serves the level as Server-Sent Events: the current state on
// connect, then one event per change, a ping every heartbeat and, with
// ?samples=1, the signals after every health check. An HTTP/1.1 stream,
// plain or over TLSListener's TLS, is hijacked and handed to the hub
// (hub.go); what cannot be hijacked (HTTP/2, TLS from another listener)
// keeps a goroutine here. Either way a slow subscriber skips intermediate
// states and holds no queue, and one that stops reading for WriteTimeout
// is dropped. The settings in force (SSE) apply to open streams at once.
func (s *server) handleStream() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if n, max := s.subscribers.Add(1), s.sse.Load().MaxSubscribers; max > 0 && n > int64(max) {
			s.subscribers.Add(-1)
			s.Metrics.sseDropped(dropLimit)
			refuseStream(w, fmt.Sprintf("subscriber limit of %d reached", max))
			return
		}
		if !s.acquireStream() {
			s.subscribers.Add(-1)
			s.Metrics.sseDropped(dropLimit)
			refuseStream(w, s.streamLimitMessage())
			return
		}
		s.Metrics.subscribed(1)
		if s.hub.adopt(w, r) {
			return // the hub now owns the stream and releases its counts
		}
		defer s.release()
		if reason := s.stream(w, r); reason != "" {
			s.Metrics.sseDropped(reason)
			s.Logger.Debug("SSE subscriber dropped", "reason", reason, "remote_addr", r.RemoteAddr)
		}
	}
}

// release gives back the counts a stream took when it was admitted.
func (s *server) release() {
	s.subscribers.Add(-1)
	s.streams.Add(-1)
	s.Metrics.subscribed(-1)
}

// stream writes events until the subscriber leaves (""), or the stream
// ends for a reason sse_dropped_total counts.
func (s *server) stream(w http.ResponseWriter, r *http.Request) (dropped string) {
	samples := r.URL.Query().Get("samples") == "1"
	rc := http.NewResponseController(w)
	write := func(batch func() error) string { return s.writeBatch(rc, batch) }
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	c := s.Controller
	levelCh, sampleCh := c.LevelChanged(), c.Sampled()
	st := c.State()
	last := st.Sequence
	if reason := write(func() error {
		if _, err := io.WriteString(w, "retry: 2000\n\n"); err != nil {
			return err
		}
		return s.writeLevel(w, st)
	}); reason != "" {
		return reason
	}
	set := s.sse.Load()
	ping := time.NewTicker(set.Heartbeat)
	defer ping.Stop()
	for {
		pinged := false
		select {
		case <-r.Context().Done():
			if isClosed(s.shutdown) {
				return dropShutdown
			}
			return ""
		case <-s.shutdown:
			return dropShutdown
		case <-set.changed: // a reload: the next ping is one new heartbeat away
			set = s.sse.Load()
			ping.Reset(set.Heartbeat)
			continue
		case <-ping.C:
			pinged = true
		case <-levelCh:
		case <-sampleCh:
		}
		sampled := isClosed(sampleCh)
		levelCh, sampleCh = c.LevelChanged(), c.Sampled()
		st := c.State()
		changed := st.Sequence != last
		last = st.Sequence
		if !pinged && !changed && !(samples && sampled) {
			continue
		}
		if reason := write(func() error {
			if pinged {
				if _, err := io.WriteString(w, ": ping\n\n"); err != nil {
					return err
				}
			}
			if changed {
				if err := s.writeLevel(w, st); err != nil {
					return err
				}
			}
			if samples && sampled {
				return writeEvent(w, "sample", st.Sequence, st.Signals)
			}
			return nil
		}); reason != "" {
			return reason
		}
	}
}

// writeBatch runs one batch of writes and the flush under a fresh write
// deadline, and says why the stream must end, if it must.
func (s *server) writeBatch(rc *http.ResponseController, batch func() error) (dropped string) {
	_ = rc.SetWriteDeadline(time.Now().Add(s.sse.Load().WriteTimeout))
	err := batch()
	if err == nil {
		err = rc.Flush()
	}
	switch {
	case err == nil:
		return ""
	case errors.Is(err, os.ErrDeadlineExceeded):
		return dropWriteTimeout
	default:
		return dropWriteError
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// encodedLevel is one published state encoded once: its JSON, and the
// level event that carries it.
type encodedLevel struct {
	st    *controller.State
	json  []byte // the state document without "reports", ending in "}"
	event []byte
}

// writeLevel writes the level event for st. Every subscriber sends the
// same bytes for the same published state, so they are encoded once and
// shared: a change reaching 10,000 streams is one JSON encoding, not
// 10,000.
func (s *server) writeLevel(w io.Writer, st *controller.State) error {
	ev, err := s.levelEvent(st)
	if err != nil {
		return err
	}
	_, err = w.Write(ev)
	return err
}

// levelEvent is the shared encoding of the level event for st.
func (s *server) levelEvent(st *controller.State) ([]byte, error) {
	e, err := s.encodeLevel(st)
	if err != nil {
		return nil, err
	}
	return e.event, nil
}

// encodeLevel encodes st once for every reader of the same published
// state: SSE subscribers and GET /v1/level alike.
func (s *server) encodeLevel(st *controller.State) (*encodedLevel, error) {
	if c := s.lastLevel.Load(); c != nil && c.st == st {
		return c, nil
	}
	var b bytes.Buffer
	if err := encodeEvent(&b, "level", st.Sequence, st); err != nil {
		return nil, err
	}
	ev := b.Bytes()
	data := ev[bytes.Index(ev, []byte("data: "))+len("data: "):]
	e := &encodedLevel{st: st, json: data[:len(data)-len("\n\n")], event: ev}
	s.lastLevel.Store(e)
	return e, nil
}

// writeEvent writes one SSE event; JSON holds no newlines, so data is one line.
func writeEvent(w io.Writer, event string, id uint64, v any) error {
	var b bytes.Buffer
	if err := encodeEvent(&b, event, id, v); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// encodeEvent appends one SSE event to b.
func encodeEvent(b *bytes.Buffer, event string, id uint64, v any) error {
	fmt.Fprintf(b, "id: %d\nevent: %s\ndata: ", id, event)
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // ends the data line with "\n"
		return err
	}
	b.WriteByte('\n')
	return nil
}

// refuseStream answers 503 to a stream or long-poll over its cap and closes
// the connection, so a flood of them never holds the slots that short
// requests (health, override, metrics) need.
func refuseStream(w http.ResponseWriter, msg string) {
	w.Header().Set("Connection", "close")
	writeError(w, http.StatusServiceUnavailable, msg)
}
