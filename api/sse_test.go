package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// streamWriter is a ResponseWriter that cannot be hijacked, so the stream
// stays on its handler's goroutine, and whose body may be read while the
// handler writes.
type streamWriter struct {
	mu     sync.Mutex
	header http.Header
	body   strings.Builder
}

func (w *streamWriter) Header() http.Header { return w.header }
func (w *streamWriter) WriteHeader(int)     {}
func (w *streamWriter) Flush()              {}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.body.Write(p)
}

func (w *streamWriter) pings() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Count(w.body.String(), ": ping\n")
}

func isPing(ev sseEvent) bool { return ev.Comment == "ping" }

// TestSetSSEReachesHandlerStreams: a stream served on its handler's
// goroutine pings one new heartbeat after SetSSE, not at the old period.
func TestSetSSEReachesHandlerStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Deps{SSE: SSE{Heartbeat: time.Hour}})
		ctx, leave := context.WithCancel(context.Background())
		w := &streamWriter{header: http.Header{}}
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.h.ServeHTTP(w, newRequest("GET", "/v1/level/stream", "").WithContext(ctx))
		}()
		synctest.Wait()
		time.Sleep(time.Minute)
		r.srv.SetSSE(SSE{Heartbeat: time.Second})
		time.Sleep(time.Second - time.Millisecond)
		synctest.Wait()
		if n := w.pings(); n != 0 {
			t.Fatalf("%d pings before the new heartbeat passed, want 0", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n := w.pings(); n != 1 {
			t.Fatalf("%d pings one new heartbeat after SetSSE, want 1", n)
		}
		leave()
		<-done
	})
}

// TestSetSSEReachesHubStreams: a hijacked stream, served by the hub,
// pings at the new heartbeat after SetSSE; before it, at an hour, it
// would not have pinged during the test.
func TestSetSSEReachesHubStreams(t *testing.T) {
	r := newRig(t, Deps{SSE: SSE{Heartbeat: time.Hour}})
	srv := httptest.NewServer(r.h)
	defer srv.Close()
	ch, _ := subscribe(t, context.Background(), srv.URL+"/v1/level/stream")
	next(t, ch, isLevel)
	r.srv.SetSSE(SSE{Heartbeat: 10 * time.Millisecond})
	next(t, ch, isPing)
	next(t, ch, isPing)
	srv.Client().CloseIdleConnections()
}

// TestSetSSELimitsNewStreams: a lowered max_subscribers refuses the next
// stream and ends none that is open; raised again, it admits.
func TestSetSSELimitsNewStreams(t *testing.T) {
	r := newRig(t, Deps{SSE: SSE{MaxSubscribers: 2, Heartbeat: time.Hour}})
	srv := httptest.NewServer(r.h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		ch, _ := subscribe(t, ctx, srv.URL+"/v1/level/stream")
		next(t, ch, isLevel)
	}
	r.srv.SetSSE(SSE{MaxSubscribers: 1, Heartbeat: time.Hour})
	if _, resp := subscribe(t, ctx, srv.URL+"/v1/level/stream"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a stream over the lowered limit: %d, want 503", resp.StatusCode)
	}
	if got := gaugeValue(t, r, "degraded_sse_subscribers"); got != 2 {
		t.Errorf("degraded_sse_subscribers = %v after lowering the limit, want 2: no open stream ends", got)
	}
	r.srv.SetSSE(SSE{MaxSubscribers: 3, Heartbeat: time.Hour})
	ch, resp := subscribe(t, ctx, srv.URL+"/v1/level/stream")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a stream under the raised limit: %d, want 200", resp.StatusCode)
	}
	next(t, ch, isLevel)
	srv.Client().CloseIdleConnections()
}
