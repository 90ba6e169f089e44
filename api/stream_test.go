package api

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/levels"
)

// sseEvent is one parsed Server-Sent Event; comment lines become an event
// with Comment set.
type sseEvent struct {
	ID, Event, Data, Comment, Retry string
}

// readEvents parses the stream as the SSE spec says, sending each event.
func readEvents(body *bufio.Reader, out chan<- sseEvent) {
	defer close(out)
	var ev sseEvent
	for {
		line, err := body.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if ev != (sseEvent{}) {
				out <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"):
			out <- sseEvent{Comment: strings.TrimSpace(line[1:])}
		default:
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			switch k {
			case "id":
				ev.ID = v
			case "event":
				ev.Event = v
			case "data":
				if ev.Data != "" {
					ev.Data += "\n"
				}
				ev.Data += v
			case "retry":
				ev.Retry = v
			}
		}
	}
}

func subscribe(t *testing.T, ctx context.Context, url string) (<-chan sseEvent, *http.Response) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	ch := make(chan sseEvent, 64)
	if resp.StatusCode == 200 {
		go readEvents(bufio.NewReader(resp.Body), ch)
	}
	return ch, resp
}

func next(t *testing.T, ch <-chan sseEvent, want func(sseEvent) bool) sseEvent {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("stream ended")
			}
			if want(ev) {
				return ev
			}
		case <-timeout:
			t.Fatal("no matching event within 10s")
		}
	}
}

func isLevel(ev sseEvent) bool { return ev.Event == "level" }

func state(t *testing.T, ev sseEvent) controller.State {
	t.Helper()
	var st controller.State
	if err := json.Unmarshal([]byte(ev.Data), &st); err != nil {
		t.Fatalf("event data %q: %v", ev.Data, err)
	}
	if ev.ID != strconv.FormatUint(st.Sequence, 10) {
		t.Errorf("event id %s, want the sequence %d", ev.ID, st.Sequence)
	}
	return st
}

func TestStream(t *testing.T) {
	r := newRig(t, Deps{SSE: SSE{Heartbeat: 20 * time.Millisecond}})
	srv := httptest.NewServer(r.h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	events, resp := subscribe(t, ctx, srv.URL+"/v1/level/stream?samples=1")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	if ev := <-events; ev.Retry != "2000" {
		t.Fatalf("first event %+v, want retry: 2000", ev)
	}
	if st := state(t, next(t, events, isLevel)); st.Level != "Normal" || st.Sequence != 0 {
		t.Fatalf("initial state %+v", st)
	}
	// A stalled subscriber never reads; it must not hold the others up.
	subscribe(t, ctx, srv.URL+"/v1/level/stream")

	for i := range 50 {
		lvl := []string{"Minor", "Major"}[i%2]
		if _, err := r.c.SetOverride(controller.OverrideRequest{Level: lvl, Mode: controller.ModePin, TTL: time.Minute, Reason: "flip"}); err != nil {
			t.Fatal(err)
		}
	}
	st := state(t, next(t, events, func(ev sseEvent) bool { return isLevel(ev) && ev.ID == "50" }))
	if st.Level != "Major" || st.Source != "override" {
		t.Errorf("latest event %+v, want Major by override", st)
	}
	next(t, events, func(ev sseEvent) bool { return ev.Comment == "ping" })

	r.c.Check(context.Background())
	ev := next(t, events, func(ev sseEvent) bool { return ev.Event == "sample" })
	var sig levels.Sample
	if err := json.Unmarshal([]byte(ev.Data), &sig); err != nil || sig.SampledAt.IsZero() {
		t.Errorf("sample event %q: %v, want signals with sampled_at", ev.Data, err)
	}
}

func TestStreamSubscriberLimit(t *testing.T) {
	r := newRig(t, Deps{SSE: SSE{MaxSubscribers: 2}})
	srv := httptest.NewServer(r.h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		ch, resp := subscribe(t, ctx, srv.URL+"/v1/level/stream")
		if resp.StatusCode != 200 {
			t.Fatalf("subscriber within the limit: %d", resp.StatusCode)
		}
		next(t, ch, isLevel)
	}
	_, resp := subscribe(t, ctx, srv.URL+"/v1/level/stream")
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("subscriber over the limit: %d, want 503", resp.StatusCode)
	}
	if !strings.Contains(readBody(t, resp), "subscriber limit of 2 reached") {
		t.Error("503 must say the limit was reached")
	}
	if got := gaugeValue(t, r, "degraded_sse_subscribers"); got != 2 {
		t.Errorf("degraded_sse_subscribers = %v, want 2", got)
	}
}

// TestStreamSubscribersUnboundedByDefault: without MaxSubscribers (and
// MaxStreams) a handler bounds no stream count of its own.
func TestStreamSubscribersUnboundedByDefault(t *testing.T) {
	r := newRig(t, Deps{})
	srv := httptest.NewServer(r.h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 3 {
		ch, resp := subscribe(t, ctx, srv.URL+"/v1/level/stream")
		if resp.StatusCode != 200 {
			t.Fatalf("subscriber %d: %d, want 200", i+1, resp.StatusCode)
		}
		next(t, ch, isLevel)
	}
	if got := gaugeValue(t, r, "degraded_sse_subscribers"); got != 3 {
		t.Errorf("degraded_sse_subscribers = %v, want 3", got)
	}
}

// TestStreamEndsWithServer: a stream that cannot be hijacked (HTTP/2 over
// TLS) keeps its goroutine handler, which ends with the server's base
// context, as a shutdown does.
func TestStreamEndsWithServer(t *testing.T) {
	r := newRig(t, Deps{})
	base, stop := context.WithCancel(context.Background())
	srv := httptest.NewUnstartedServer(r.h)
	srv.EnableHTTP2 = true
	srv.Config.BaseContext = func(net.Listener) context.Context { return base }
	srv.StartTLS()
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/v1/level/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 {
		t.Fatalf("%s %d, want an HTTP/2 stream", resp.Proto, resp.StatusCode)
	}
	ch := make(chan sseEvent, 64)
	go readEvents(bufio.NewReader(resp.Body), ch)
	next(t, ch, isLevel)
	if got := gaugeValue(t, r, "degraded_sse_subscribers"); got != 1 {
		t.Errorf("degraded_sse_subscribers = %v, want 1", got)
	}
	stop()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, open := <-ch:
			if !open {
				return
			}
		case <-timeout:
			t.Fatal("the stream was still open 10s after the server's context ended")
		}
	}
}
