package api

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/degraded/degraded/controller"
)

// rawStream opens GET /v1/level/stream on a raw TCP connection, with dial
// adjusting the socket before it connects.
func rawStream(t *testing.T, srv *httptest.Server, control func(fd uintptr)) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		if control != nil {
			return c.Control(control)
		}
		return nil
	}}
	conn, err := d.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, "GET /v1/level/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHubFraming: a hijacked stream answers as net/http would, chunk for
// chunk: the head, then `retry: 2000` and the current state, each a chunk.
func TestHubFraming(t *testing.T) {
	r := newRig(t, Deps{SSE: SSE{Heartbeat: time.Hour}})
	srv := httptest.NewServer(r.h)
	defer srv.Close()
	conn := rawStream(t, srv, nil)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" ||
		resp.Header.Get("Cache-Control") != "no-cache" || resp.Header.Get("X-Accel-Buffering") != "no" ||
		len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" || resp.Header.Get("Date") == "" {
		t.Fatalf("head %d %v %v, want 200 text/event-stream, no-cache, X-Accel-Buffering: no, chunked, a Date", resp.StatusCode, resp.Header, resp.TransferEncoding)
	}
	// The chunked body, undone by hand as a proxy would.
	want := "d\r\nretry: 2000\n\n\r\n"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != want {
		t.Fatalf("first chunk %q (%v), want %q", got, err, want)
	}
	events := make(chan sseEvent, 8)
	go readEvents(bufio.NewReader(resp.Body), events)
	if st := state(t, next(t, events, isLevel)); st.Level != "Normal" {
		t.Errorf("initial state %+v, want Normal", st)
	}
	if _, err := r.c.SetOverride(controller.OverrideRequest{Level: "Major", Mode: controller.ModePin, TTL: time.Minute, Reason: "x"}); err != nil {
		t.Fatal(err)
	}
	if st := state(t, next(t, events, isLevel)); st.Level != "Major" {
		t.Errorf("state after the override %+v, want Major", st)
	}
	conn.Close()
}

// TestHubDropsNonReadingSubscriber: a subscriber that never reads is
// dropped once its unsent bytes have stayed above zero for WriteTimeout,
// although no event is sent after it connects; a reading subscriber
// beside it stays.
func TestHubDropsNonReadingSubscriber(t *testing.T) {
	const writeTimeout = 300 * time.Millisecond
	r := newRig(t, Deps{SSE: SSE{WriteTimeout: writeTimeout, Heartbeat: 50 * time.Millisecond}})
	// A large state, so that the first event alone overflows the small
	// receive window of the stuck subscriber.
	if _, err := r.c.SetOverride(controller.OverrideRequest{Level: "Minor", Mode: controller.ModePin, TTL: time.Hour, Reason: strings.Repeat("r", 500)}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r.h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reader, _ := subscribe(t, ctx, srv.URL+"/v1/level/stream")
	next(t, reader, isLevel)

	start := time.Now()
	rawStream(t, srv, func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024)
	})
	eventually(t, 10*time.Second, "the stuck subscriber counted as dropped for write_timeout", func() bool {
		return droppedTotal(t, r, dropWriteTimeout) == 1
	})
	if took := time.Since(start); took < writeTimeout {
		t.Errorf("dropped after %v, before WriteTimeout %v", took, writeTimeout)
	}
	if got := gaugeValue(t, r, "degraded_sse_subscribers"); got != 1 {
		t.Errorf("degraded_sse_subscribers = %v after the drop, want 1 (the reading one)", got)
	}
	next(t, reader, func(ev sseEvent) bool { return ev.Comment == "ping" })
	if got := r.c.State().Sequence; got != 1 {
		t.Fatalf("sequence %d: an event was sent after the subscribers connected", got)
	}
}

// TestHubSubscriberLeaves: a subscriber that closes its connection leaves
// degraded_sse_subscribers within a heartbeat, and is no drop.
func TestHubSubscriberLeaves(t *testing.T) {
	const heartbeat = 100 * time.Millisecond
	r := newRig(t, Deps{SSE: SSE{Heartbeat: heartbeat}})
	srv := httptest.NewServer(r.h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stay, _ := subscribe(t, ctx, srv.URL+"/v1/level/stream")
	next(t, stay, isLevel)
	conn := rawStream(t, srv, nil)
	eventually(t, 5*time.Second, "two subscribers counted", func() bool {
		return gaugeValue(t, r, "degraded_sse_subscribers") == 2
	})
	conn.Close()
	start := time.Now()
	eventually(t, 5*time.Second, "the subscriber that left is no longer counted", func() bool {
		return gaugeValue(t, r, "degraded_sse_subscribers") == 1
	})
	if took := time.Since(start); took > 2*heartbeat {
		t.Errorf("degraded_sse_subscribers followed after %v, want within a heartbeat (%v) and some slack", took, heartbeat)
	}
	for _, reason := range dropReasons {
		if got := droppedTotal(t, r, reason); got != 0 {
			t.Errorf("sse_dropped_total{reason=%q} = %v, want 0: leaving is no drop", reason, got)
		}
	}
}

// TestHubShutdown: the end of Server.Run's context closes every hijacked
// stream, counted as dropped for shutdown, Run returns once the hub's
// goroutines have ended (goleak checks), and a stream opened afterwards is
// closed at once.
func TestHubShutdown(t *testing.T) {
	r := newRig(t, Deps{SSE: SSE{Heartbeat: time.Hour}})
	srv := httptest.NewServer(r.h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var chans []<-chan sseEvent
	for range 3 {
		ch, _ := subscribe(t, ctx, srv.URL+"/v1/level/stream")
		next(t, ch, isLevel)
		chans = append(chans, ch)
	}
	r.stop()
	for _, ch := range chans {
		for range ch { // nothing more than what was sent, then the end
		}
	}
	if got := droppedTotal(t, r, dropShutdown); got != 3 {
		t.Errorf(`sse_dropped_total{reason="shutdown"} = %v, want 3`, got)
	}
	if got := gaugeValue(t, r, "degraded_sse_subscribers"); got != 0 {
		t.Errorf("degraded_sse_subscribers = %v after shutdown, want 0", got)
	}
	conn := rawStream(t, srv, nil)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(conn); err != nil || len(b) != 0 {
		t.Errorf("a stream after shutdown read %q (%v), want closed with nothing written", b, err)
	}
	if got := droppedTotal(t, r, dropShutdown); got != 4 {
		t.Errorf(`sse_dropped_total{reason="shutdown"} = %v, want 4`, got)
	}
}

// loopbackStreams returns n hub streams on real loopback connections and
// the peers that read them.
func loopbackStreams(t *testing.T, n int) ([]*hubConn, []net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []*hubConn
	var peers []net.Conn
	for range n {
		peer, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conn, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { peer.Close(); conn.Close() })
		sock, _, err := newSocket(conn)
		if err != nil {
			t.Fatal(err)
		}
		conns, peers = append(conns, &hubConn{conn: conn, sock: sock}), append(peers, peer)
	}
	return conns, peers
}

// A heartbeat or check round of many streams stops as soon as the level
// changes, so that the change is not queued behind it; the round ends
// early only then.
func TestHubRoundYieldsToALevelChange(t *testing.T) {
	const n = 3 * perWriter
	conns, peers := loopbackStreams(t, n)
	h := &hub{s: newServer(Deps{SSE: SSE{WriteTimeout: time.Second}}), conns: conns}
	pinged := func() (got int) {
		deadline := time.Now().Add(100 * time.Millisecond) // one wait for all
		for _, p := range peers {
			_ = p.SetReadDeadline(deadline)
			buf := make([]byte, len(pingFrame))
			if k, _ := io.ReadFull(p, buf); k == len(pingFrame) && string(buf) == string(pingFrame) {
				got++
			}
		}
		return got
	}

	quiet := make(chan struct{})
	if left, preempted := h.deliver(&frames{now: time.Now(), ping: true, preempt: quiet}); !left || preempted {
		t.Fatalf("a round with no level change: left %v, preempted %v; want true, false", left, preempted)
	}
	if got := pinged(); got != n {
		t.Errorf("%d of %d streams pinged by a whole round", got, n)
	}

	changed := make(chan struct{})
	close(changed)
	if left, preempted := h.deliver(&frames{now: time.Now(), ping: true, preempt: changed}); !left || !preempted {
		t.Fatalf("a round after a level change: left %v, preempted %v; want true, true", left, preempted)
	}
	if got := pinged(); got != 0 {
		t.Errorf("%d streams pinged after the level changed, want 0: the round must give way", got)
	}
}
