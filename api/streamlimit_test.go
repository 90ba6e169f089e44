package api

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/degraded/degraded/controller"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// syncBuffer is a log sink safe for the handlers' goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newLog() (*slog.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

func droppedTotal(t *testing.T, r *rig, reason string) float64 {
	t.Helper()
	return testutil.ToFloat64(r.m.sseDrops.WithLabelValues(reason))
}

// TestStreamCap: SSE streams and waiting long-polls share one cap, so that
// short requests always find a connection; max_subscribers above it is
// lowered to it, and said so.
func TestStreamCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, logs := newLog()
		r := newRig(t, Deps{MaxStreams: 2, SSE: SSE{MaxSubscribers: 100, Heartbeat: time.Hour}, Logger: log})
		if !strings.Contains(logs.String(), "sse.max_subscribers lowered") || !strings.Contains(logs.String(), "lowered_to=2") {
			t.Errorf("no log of the lowered max_subscribers: %s", logs)
		}
		ctx, endStream := context.WithCancel(context.Background())
		streamDone := make(chan int, 1)
		go func() {
			req := newRequest("GET", "/v1/level/stream", "").WithContext(ctx)
			w := httptest.NewRecorder()
			r.h.ServeHTTP(w, req)
			streamDone <- w.Code
		}()
		polls := make(chan *httptest.ResponseRecorder, 2)
		go func() { polls <- r.do("GET", "/v1/level?wait=1m&after=0", "") }()
		synctest.Wait()

		w := r.do("GET", "/v1/level?wait=1m&after=0", "")
		if b := decodeBody[errorBody](t, w); w.Code != 503 || !strings.Contains(b.Error, "stream limit of 2 reached") {
			t.Errorf("a third long-poll: %d %q, want 503 naming the stream limit", w.Code, b.Error)
		}
		if w := r.do("GET", "/v1/level/stream", ""); w.Code != 503 || w.Header().Get("Connection") != "close" {
			t.Errorf("a third stream: %d Connection %q, want 503 closing the connection (a flood must not keep the slot)", w.Code, w.Header().Get("Connection"))
		}
		if got := droppedTotal(t, r, "limit"); got != 1 {
			t.Errorf(`sse_dropped_total{reason="limit"} = %v, want 1 (the refused stream)`, got)
		}
		if w := r.do("GET", "/v1/level", ""); w.Code != 200 {
			t.Errorf("a plain GET at the cap: %d, want 200", w.Code)
		}
		if w := r.do("GET", "/v1/level?wait=0s&after=0", ""); w.Code != 200 {
			t.Errorf("a long-poll that need not wait, at the cap: %d, want 200", w.Code)
		}

		endStream()
		if code := <-streamDone; code != 200 {
			t.Fatalf("the stream answered %d", code)
		}
		go func() { polls <- r.do("GET", "/v1/level?wait=1m&after=0", "") }()
		synctest.Wait()
		if _, err := r.c.SetOverride(controller.OverrideRequest{Level: "Major", Mode: controller.ModePin, TTL: time.Minute, Reason: "x"}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if w := <-polls; w.Code != 200 {
				t.Errorf("a long-poll within the cap: %d %s, want 200", w.Code, w.Body)
			}
		}
	})
}

// TestStuckSubscriberDropped: a subscriber that never reads fills the
// socket buffers; its write blocks and, after WriteTimeout, it is dropped
// and counted, while the server goes on.
func TestStuckSubscriberDropped(t *testing.T) {
	log, logs := newLog()
	r := newRig(t, Deps{SSE: SSE{WriteTimeout: 200 * time.Millisecond, Heartbeat: time.Hour}, Logger: log})
	srv := httptest.NewUnstartedServer(r.h)
	srv.Listener = smallSendBuffers{srv.Listener}
	srv.Start()
	defer srv.Close()

	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		_ = c.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024)
		})
		return err
	}}
	conn, err := d.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /v1/level/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}

	reason := strings.Repeat("r", 500) // ~1 KiB per event
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; !strings.Contains(logs.String(), "reason=write_timeout"); i++ {
		if time.Now().After(deadline) {
			t.Fatalf("the stuck subscriber was not dropped within 10s (%d changes sent)", i)
		}
		lvl := []string{"Minor", "Major"}[i%2]
		if _, err := r.c.SetOverride(controller.OverrideRequest{Level: lvl, Mode: controller.ModePin, TTL: time.Minute, Reason: reason}); err != nil {
			t.Fatal(err)
		}
	}
	if got := droppedTotal(t, r, "write_timeout"); got != 1 {
		t.Errorf(`sse_dropped_total{reason="write_timeout"} = %v, want 1`, got)
	}
	if got := gaugeValue(t, r, "degraded_sse_subscribers"); got != 0 {
		t.Errorf("degraded_sse_subscribers = %v after the drop, want 0", got)
	}
	resp, err := srv.Client().Get(srv.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the server after the drop: %v %v", resp, err)
	}
	resp.Body.Close()
	srv.Client().CloseIdleConnections()
}

// smallSendBuffers gives accepted connections a small send buffer, so that
// a subscriber that never reads blocks the server's writes quickly.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestStreamShutdown: the end of Server.Run's context ends open streams,
// counted as dropped for shutdown.
func TestStreamShutdown(t *testing.T) {
	r := newRig(t, Deps{})
	srv := httptest.NewServer(r.h)
	defer srv.Close()
	ch, _ := subscribe(t, context.Background(), srv.URL+"/v1/level/stream")
	next(t, ch, isLevel)
	r.stop()
	timeout := time.After(10 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-ch:
		case <-timeout:
			t.Fatal("the stream was still open 10s after shutdown")
		}
	}
	if got := droppedTotal(t, r, "shutdown"); got != 1 {
		t.Errorf(`sse_dropped_total{reason="shutdown"} = %v, want 1`, got)
	}
	srv.Client().CloseIdleConnections()
}
