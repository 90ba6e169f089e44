package api

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestGhostSubscribersLeaveAtOnce: 100 subscribers that each send a byte
// after their request and close never lock out real ones under
// max_subscribers: 100. Each is noticed within 2 s, at the default
// heartbeat and write_timeout (checks every 2.5 s): the hub's watcher
// sees the close although the byte is unread (a MSG_PEEK saw the byte, not
// the close, and they stayed counted for 27-30 s).
func TestGhostSubscribersLeaveAtOnce(t *testing.T) {
	r := newRig(t, Deps{SSE: SSE{MaxSubscribers: 100}})
	srv := httptest.NewServer(r.h)
	defer srv.Close()
	var ghosts []net.Conn
	for range 100 {
		conn := rawStream(t, srv, nil)
		if _, err := http.ReadResponse(bufio.NewReader(conn), nil); err != nil {
			t.Fatal(err)
		}
		ghosts = append(ghosts, conn)
	}
	eventually(t, 5*time.Second, "100 subscribers counted", func() bool { return gaugeValue(t, r, "degraded_sse_subscribers") == 100 })
	if w := r.do("GET", "/v1/level/stream", ""); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("a 101st subscriber: %d, want 503 (the limit holds)", w.Code)
	}
	for _, c := range ghosts {
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	start := time.Now()
	eventually(t, 10*time.Second, "the ghosts no longer counted", func() bool { return gaugeValue(t, r, "degraded_sse_subscribers") == 0 })
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("100 ghosts left degraded_sse_subscribers after %v, want within 2s", took)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, resp := subscribe(t, ctx, srv.URL+"/v1/level/stream")
	if resp.StatusCode != 200 {
		t.Fatalf("a real subscriber after the ghosts left: %d, want 200", resp.StatusCode)
	}
	next(t, events, isLevel)
	for _, reason := range dropReasons {
		if got := droppedTotal(t, r, reason); got != 0 && reason != dropLimit {
			t.Errorf("sse_dropped_total{reason=%q} = %v, want 0: leaving is no drop", reason, got)
		}
	}
}

// TestPeerClosedSeesACloseBehindUnreadBytes: the check's own test for a
// departed subscriber (the watcher's backstop) sees a close that follows
// bytes the daemon never read.
func TestPeerClosedSeesACloseBehindUnreadBytes(t *testing.T) {
	conns, peers := loopbackStreams(t, 2)
	if _, err := peers[0].Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	peers[0].Close()
	if _, err := peers[1].Write([]byte("x")); err != nil { // sends, stays
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the closed peer seen", func() bool { return conns[0].sock.peerClosed() })
	if conns[1].sock.peerClosed() {
		t.Error("a peer that sent a byte and stayed is seen as closed")
	}
}
