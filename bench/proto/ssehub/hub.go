// Package ssehub is a prototype of the fix proposed for the daemon's SSE
// fan-out in docs/performance.md (findings F2 and F3): the stream handler
// hijacks the connection, writes the response head and the current state,
// hands the bare net.Conn to one Hub and returns, so a subscriber holds no
// goroutine, no net/http buffers and no request; on a change the Hub
// encodes the event once and writes the same bytes to every connection
// from GOMAXPROCS workers. It lives in bench/ only to be measured beside
// the daemon's handler; it serves level events and pings (not ?samples=1).
package ssehub

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/degraded/degraded/controller"
)

// Source is what the Hub reads from the controller.
type Source interface {
	State() *controller.State
	LevelChanged() <-chan struct{}
}

// Hub owns every hijacked stream. Create it with New, run it with Run.
type Hub struct {
	src          Source
	heartbeat    time.Duration
	writeTimeout time.Duration

	mu   sync.Mutex
	cur  []byte // the current state's event, encoded once
	seq  uint64
	subs []net.Conn
}

func New(src Source, heartbeat time.Duration) *Hub {
	h := &Hub{src: src, heartbeat: heartbeat, writeTimeout: 5 * time.Second}
	h.cur, h.seq = encode(src.State())
	return h
}

func encode(st *controller.State) ([]byte, uint64) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "id: %d\nevent: level\ndata: ", st.Sequence)
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(st)
	b.WriteByte('\n')
	return b.Bytes(), st.Sequence
}

const head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\nConnection: close\r\n\r\nretry: 2000\n\n"

// ServeHTTP is GET /v1/level/stream.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// HTTP/2 cannot hijack: the daemon would keep its goroutine
		// handler for those.
		http.Error(w, "cannot hijack", http.StatusInternalServerError)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_ = conn.SetWriteDeadline(time.Now().Add(h.writeTimeout))
	if _, err := conn.Write(append([]byte(head), h.cur...)); err != nil {
		conn.Close()
		return
	}
	h.subs = append(h.subs, conn)
}

// Run broadcasts every change and a ping every heartbeat until ctx ends,
// then closes every stream.
func (h *Hub) Run(ctx context.Context) error {
	ping := time.NewTicker(h.heartbeat)
	defer ping.Stop()
	changed := h.src.LevelChanged()
	for {
		select {
		case <-ctx.Done():
			h.mu.Lock()
			for _, c := range h.subs {
				c.Close()
			}
			h.subs = nil
			h.mu.Unlock()
			return nil
		case <-ping.C:
			h.mu.Lock()
			subs := h.subs
			h.mu.Unlock()
			h.write(subs, []byte(": ping\n\n"))
		case <-changed:
			changed = h.src.LevelChanged()
			st := h.src.State()
			h.mu.Lock()
			if st.Sequence == h.seq {
				h.mu.Unlock()
				continue
			}
			h.cur, h.seq = encode(st)
			msg, subs := h.cur, h.subs
			h.mu.Unlock()
			h.write(subs, msg)
		}
	}
}

// write sends msg to every conn from GOMAXPROCS workers and drops the
// connections that fail (closed by the client, or not drained within the
// write timeout).
func (h *Hub) write(subs []net.Conn, msg []byte) {
	workers := min(runtime.GOMAXPROCS(0), max(1, len(subs)/64))
	dead := make([][]net.Conn, workers)
	var wg sync.WaitGroup
	chunk := (len(subs) + workers - 1) / workers
	deadline := time.Now().Add(h.writeTimeout)
	for w := range workers {
		part := subs[min(w*chunk, len(subs)):min((w+1)*chunk, len(subs))]
		wg.Go(func() {
			for _, c := range part {
				_ = c.SetWriteDeadline(deadline)
				if _, err := c.Write(msg); err != nil {
					c.Close()
					dead[w] = append(dead[w], c)
				}
			}
		})
	}
	wg.Wait()
	n := 0
	for _, d := range dead {
		n += len(d)
	}
	if n == 0 {
		return
	}
	gone := make(map[net.Conn]bool, n)
	for _, d := range dead {
		for _, c := range d {
			gone[c] = true
		}
	}
	h.mu.Lock()
	kept := h.subs[:0:0]
	for _, c := range h.subs {
		if !gone[c] {
			kept = append(kept, c)
		}
	}
	h.subs = kept
	h.mu.Unlock()
}

// Len is the number of open streams.
func (h *Hub) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}
