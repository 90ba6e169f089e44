package api

import (
	"bytes"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// hub serves the hijacked HTTP/1.1 event streams (finding F3 in
// bench/findings.md). A stream it holds costs no goroutine, no net/http
// buffer and no request: only its socket and a hubConn. Server.Run's
// goroutine (serve) runs the hub: from the first stream to the last it
// waits for changes, samples and ticks, encodes each event once, and
// writes the same bytes to every stream from GOMAXPROCS writers joined
// before the next event. Writes never block: what the socket does not take
// waits in hubConn.pending, which is a tail of the shared event and never
// more than one event; a stream that has unsent bytes (pending, or in its
// 16 KiB kernel send buffer) for WriteTimeout is dropped. A subscriber
// that closes or resets its end is noticed at once by a watcher (hangups)
// and at every check. Streams over TLSListener's TLS are served the same
// way. When Run's context ends, every stream is closed and no new one is
// adopted.
type hub struct {
	s *server

	mu                sync.Mutex
	conns             []*hubConn
	running           bool            // a round of streams is under way or asked for (start)
	closed            bool            // Run's context ended: no stream is adopted any more
	watch             *hangups        // the running round's watcher; nil if none could be had
	levelCh, sampleCh <-chan struct{} // the controller's channels for the round that start asks for

	// start tells serve that the first stream of a round arrived
	// (buffered: one per round).
	start chan struct{}
	// wake tells serve that the watcher saw a subscriber leave (buffered:
	// a wake-up waiting is enough).
	wake chan struct{}
}

// hubConn is one hijacked stream. Only the hub's goroutines touch it after
// adopt, one at a time, except hangup, which the hangups watcher sets.
type hubConn struct {
	conn    net.Conn  // closing it frees the connection's limit slot
	tls     *tlsBase  // under conn (a *tls.Conn) for a TLS stream; nil for plain
	sock    socket    // the TCP socket
	samples bool      // ?samples=1
	seq     uint64    // sequence of the last level event sent or pending
	pending []byte    // unsent tail of an event frame (plain streams)
	stuck   time.Time // since when it has had unsent bytes; zero if none
	ended   bool      // the hub must drop it, for reason
	reason  string
	watch   *hangups    // the watcher that has it, if any
	id      uint64      // its key in watch
	hangup  atomic.Bool // the subscriber closed or reset its end
}

const (
	sendBuffer = 16 << 10 // SO_SNDBUF of a hijacked stream (DESIGN.md "Stuck subscribers")
	perWriter  = 256      // streams below which one more writer goroutine is not worth it
	// preemptEvery is how many streams a writer serves between two looks
	// at whether the level changed during a heartbeat or check round.
	preemptEvery = 8
)

// streamHead is the response head net/http would write for the stream,
// with Connection: close: the stream is never followed by another request.
const streamHead = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n" +
	"X-Accel-Buffering: no\r\nTransfer-Encoding: chunked\r\nConnection: close\r\nDate: "

// pingFrame is ": ping" in one chunk.
var pingFrame = chunk([]byte(": ping\n\n"))

// chunk frames p as one chunk of a chunked body, as net/http's flush does.
func chunk(p []byte) []byte {
	b := make([]byte, 0, len(p)+12)
	b = strconv.AppendInt(b, int64(len(p)), 16)
	b = append(b, "\r\n"...)
	b = append(b, p...)
	return append(b, "\r\n"...)
}

// adopt hijacks an HTTP/1.1 stream, plain or over TLSListener's TLS,
// writes its head, `retry: 2000` and the current state, and hands it to
// the hub. It returns false, having touched nothing, when the stream
// cannot be hijacked or is not on TCP (HTTP/2, TLS from another listener,
// HTTP/1.0, a ResponseWriter without Hijack, an in-memory listener, a
// platform without the socket calls), so that the caller serves it
// itself. Once it returns true the stream's counts are the hub's to
// release.
func (h *hub) adopt(w http.ResponseWriter, r *http.Request) bool {
	if !socketsSupported || r.ProtoMajor != 1 || r.ProtoMinor != 1 {
		return false
	}
	switch r.Context().Value(http.LocalAddrContextKey).(type) {
	case *net.TCPAddr:
		if r.TLS != nil {
			return false // TLS from a listener of another kind
		}
	case tlsAddr: // TLSListener's
	default:
		return false // an in-memory network, a Unix socket: no TCP socket to serve
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	s := h.s
	sock, base, err := newSocket(conn)
	if err != nil {
		// A listener that wraps TCP connections in a type of its own: the
		// stream cannot be served here any more, nor handed back.
		s.Logger.Warn("SSE stream closed: not a TCP connection", "err", err, "remote_addr", r.RemoteAddr)
		h.drop(&hubConn{conn: conn}, dropWriteError)
		return true
	}
	// net/http's read and write deadlines stay on a hijacked connection.
	_ = conn.SetDeadline(time.Time{})
	_ = sock.setSendBuffer(sendBuffer)
	if base != nil {
		base.adopt(sock)
	}
	c := &hubConn{conn: conn, tls: base, sock: sock, samples: r.URL.Query().Get("samples") == "1"}
	if reason := h.add(c); reason != "" {
		h.drop(c, reason) // outside h.mu: drop closes the socket and logs
	}
	return true
}

// add writes c's head, `retry: 2000` and the current state, and puts c
// among the streams, asking serve for a round if none is running. It
// returns why c must be dropped instead, leaving that to the caller. h.mu
// is held from reading the state to adding c, so that a round carrying a
// newer level either finds c among the streams or waits for it: c never
// misses a change.
func (h *hub) add(c *hubConn) (dropped string) {
	s := h.s
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return dropShutdown
	}
	// A round asked for here waits on these, taken before the state is
	// read: a change published after the read closes them, so that the
	// round's first delivery carries it.
	levelCh, sampleCh := s.Controller.LevelChanged(), s.Controller.Sampled()
	st := s.Controller.State()
	ev, err := s.levelEvent(st)
	if err != nil {
		return dropWriteError
	}
	var b bytes.Buffer
	b.WriteString(streamHead)
	b.WriteString(time.Now().UTC().Format(http.TimeFormat))
	b.WriteString("\r\n\r\n")
	b.Write(chunk([]byte("retry: 2000\n\n")))
	b.Write(chunk(ev))
	c.seq = st.Sequence
	if err := c.send(b.Bytes()); err != nil {
		return dropWriteError
	}
	if !h.running {
		h.running = true
		h.levelCh, h.sampleCh = levelCh, sampleCh
		h.start <- struct{}{} // never blocks: serve took the last round's
	}
	h.conns = append(h.conns, c)
	h.watch.add(c)
	return ""
}

// send writes p, which must follow nothing pending, and keeps what the
// socket does not take as pending: a plain stream keeps a tail of p
// (shared by every stream), a TLS stream the encrypted rest (its own).
func (c *hubConn) send(p []byte) error {
	if c.tls != nil {
		_, err := c.conn.Write(p) // the tls.Conn, over c.tls: never blocks
		return err
	}
	n, err := c.sock.write(p)
	if err != nil {
		return err
	}
	if n < len(p) {
		c.pending = p[n:]
	}
	return nil
}

// hasPending says whether bytes wait to be written to the socket.
func (c *hubConn) hasPending() bool {
	if c.tls != nil {
		return len(c.tls.pending) > 0
	}
	return len(c.pending) > 0
}

// flush writes what the socket takes now of the pending bytes.
func (c *hubConn) flush() error {
	if c.tls != nil {
		return c.tls.flush()
	}
	n, err := c.sock.write(c.pending)
	c.pending = c.pending[n:]
	return err
}

// drop closes c and releases its counts; reason "" is a subscriber that
// left, which sse_dropped_total does not count.
func (h *hub) drop(c *hubConn, reason string) {
	s := h.s
	// Count before closing: whoever sees the stream end sees the count.
	s.release()
	if reason != "" {
		s.Metrics.sseDropped(reason)
		s.Logger.Debug("SSE subscriber dropped", "reason", reason, "remote_addr", c.conn.RemoteAddr().String())
	}
	c.watch.remove(c) // before the close: the descriptor may be reused
	_ = c.conn.Close()
}
