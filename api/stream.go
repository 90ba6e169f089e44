package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/degraded/degraded/controller"
)

// handleStream serves the level as Server-Sent Events: the current state on
// connect, then one event per change, a ping every heartbeat and, with
// ?samples=1, the signals after every health check. Each subscriber reads
// the latest snapshot when woken, so a slow one skips intermediate states
// and holds no queue.
func (s *server) handleStream() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.subscribers.Add(1) > int64(s.MaxSubscribers) {
			s.subscribers.Add(-1)
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("subscriber limit of %d reached", s.MaxSubscribers))
			return
		}
		s.Metrics.subscribed(1)
		defer func() {
			s.subscribers.Add(-1)
			s.Metrics.subscribed(-1)
		}()
		samples := r.URL.Query().Get("samples") == "1"

		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Time{}) // streams outlive the server's write timeout
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)

		c := s.Controller
		levelCh, sampleCh := c.LevelChanged(), c.Sampled()
		st := c.State()
		last := st.Sequence
		if _, err := io.WriteString(w, "retry: 2000\n\n"); err != nil {
			return
		}
		if s.writeLevel(w, st) != nil || rc.Flush() != nil {
			return
		}
		ping := time.NewTicker(s.Heartbeat)
		defer ping.Stop()
		for {
			var err error
			select {
			case <-r.Context().Done():
				return
			case <-ping.C:
				_, err = io.WriteString(w, ": ping\n\n")
			case <-levelCh:
			case <-sampleCh:
			}
			sampled := isClosed(sampleCh)
			levelCh, sampleCh = c.LevelChanged(), c.Sampled()
			st := c.State()
			if err == nil && st.Sequence != last {
				last = st.Sequence
				err = s.writeLevel(w, st)
			}
			if err == nil && samples && sampled {
				err = writeEvent(w, "sample", st.Sequence, st.Signals)
			}
			if err != nil || rc.Flush() != nil {
				return
			}
		}
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

// encodedLevel is a level event already encoded for one published state.
type encodedLevel struct {
	st    *controller.State
	event []byte
}

// writeLevel writes the level event for st. Every subscriber sends the
// same bytes for the same published state, so they are encoded once and
// shared: a change reaching 10,000 streams is one JSON encoding, not
// 10,000.
func (s *server) writeLevel(w io.Writer, st *controller.State) error {
	if c := s.lastLevel.Load(); c != nil && c.st == st {
		_, err := w.Write(c.event)
		return err
	}
	var b bytes.Buffer
	if err := encodeEvent(&b, "level", st.Sequence, st); err != nil {
		return err
	}
	s.lastLevel.Store(&encodedLevel{st: st, event: b.Bytes()})
	_, err := w.Write(b.Bytes())
	return err
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
