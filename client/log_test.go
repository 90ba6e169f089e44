package client

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// captured is a slog.Handler that keeps every record, for tests.
type captured struct {
	mu      sync.Mutex
	records []string // "LEVEL message key=value ..."
}

func (h *captured) Enabled(context.Context, slog.Level) bool { return true }
func (h *captured) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *captured) WithGroup(string) slog.Handler            { return h }

func (h *captured) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.mu.Lock()
	h.records = append(h.records, b.String())
	h.mu.Unlock()
	return nil
}

// matching returns the records that contain every one of parts.
func (h *captured) matching(parts ...string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
next:
	for _, r := range h.records {
		for _, p := range parts {
			if !strings.Contains(r, p) {
				continue next
			}
		}
		out = append(out, r)
	}
	return out
}

func (h *captured) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.records, "\n")
}

// A wrong report token makes every flush answer 401: the client says so at
// ERROR, naming the status and the token, once a minute at most.
func TestRefusedReportsAreLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		d.wrap = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/outcomes" {
					w.Header().Set("WWW-Authenticate", "Bearer")
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusUnauthorized)
					fmt.Fprintln(w, `{"error":"missing or wrong token"}`)
					return
				}
				next.ServeHTTP(w, r)
			})
		}
		d.start()
		logs := &captured{}
		c := d.newClient(WithToken("wrong"), WithLogger(slog.New(logs)))
		running(t, c)
		synctest.Wait()

		refused := func() []string { return logs.matching("ERROR", "report token is likely wrong", "status=401") }
		for range 30 { // a dead token refuses every flush for 30s
			c.Record(true)
			c.Record(false)
			time.Sleep(time.Second)
			synctest.Wait()
		}
		if got := refused(); len(got) != 1 {
			t.Fatalf("after 30 refused flushes: %d ERROR lines naming the token, want exactly 1 (rate-limited):\n%s", len(got), logs)
		}
		if got := refused()[0]; !strings.Contains(got, "dropped_success=1") || !strings.Contains(got, "daemon=http://degraded.test") {
			t.Errorf("the line should name the daemon and what was dropped: %s", got)
		}
		for range 31 {
			c.Record(true)
			time.Sleep(time.Second)
			synctest.Wait()
		}
		got := refused()
		if len(got) != 2 || !strings.Contains(got[1], "refused_since_last_log=") {
			t.Errorf("a minute later: %d lines, want a second one counting the refusals not logged:\n%s", len(got), logs)
		}
		if a, _ := d.win.Totals(time.Now()); a != 0 {
			t.Errorf("the window holds %d attempts, want none: every report was refused", a)
		}
	})
}

// Losing the daemon is logged once, the state going stale once, and the
// return once: not once per retry.
func TestLostContactAndReconnectAreLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		d.start()
		logs := &captured{}
		c := d.newClient(WithStaleAfter(time.Minute), WithLogger(slog.New(logs)))
		running(t, c)
		synctest.Wait()
		if s := logs.String(); s != "" {
			t.Fatalf("a healthy start logged:\n%s", s)
		}

		d.stop()
		time.Sleep(90 * time.Second) // many retries, and stale after 1m
		synctest.Wait()
		if got := logs.matching("WARN", "lost contact with degraded", "daemon=http://degraded.test"); len(got) != 1 {
			t.Errorf("%d lost-contact lines, want 1:\n%s", len(got), logs)
		}
		if got := logs.matching("WARN", "the fail mode decides", "fail_mode=open"); len(got) != 1 {
			t.Errorf("%d stale lines, want 1:\n%s", len(got), logs)
		}
		if got := logs.matching("contact with degraded restored"); len(got) != 0 {
			t.Errorf("restored while the daemon is down:\n%s", logs)
		}

		d.start()
		time.Sleep(35 * time.Second) // more than the backoff cap
		synctest.Wait()
		if got := logs.matching("INFO", "contact with degraded restored", "via=stream", "after="); len(got) != 1 {
			t.Errorf("%d restored lines, want 1:\n%s", len(got), logs)
		}
		if c.Stale() {
			t.Error("still stale after reconnecting")
		}
	})
}

// A daemon that was never reachable is logged as such, once.
func TestUnreachableAtStartIsLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		logs := &captured{}
		c := d.newClient(WithStaleAfter(10*time.Minute), WithLogger(slog.New(logs)))
		running(t, c)
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := logs.matching("WARN", "cannot reach degraded", "connection refused"); len(got) != 1 {
			t.Errorf("%d cannot-reach lines, want 1:\n%s", len(got), logs)
		}
	})
}

// A newer daemon's state document carries fields this client does not
// know (such as "reports"); they are ignored, on Fetch and on the stream.
func TestStateToleratesUnknownFields(t *testing.T) {
	doc := `{"level":"Minor","index":1,"priority_threshold":10,"sequence":3,"source":"auto",` +
		`"reports":{"refused_total":12,"last_refused_at":"2026-12-01T10:00:00Z","window_attempts":5,"window_failures":1},` +
		`"signals":{"cpu_percent":12.5,"latency_ms":40,"status":{"cpu":"available"}},"future":{"a":[1,2]}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/level":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintln(w, doc)
		case "/v1/level/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "id: 3\nevent: level\ndata: %s\n\n", doc)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c, err := New(srv.URL, WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Fetch(t.Context())
	if err != nil || st.Level != "Minor" || st.Sequence != 3 || st.Signals.CPUPercent == nil || *st.Signals.CPUPercent != 12.5 {
		t.Fatalf("Fetch = %+v, %v; want Minor #3 with cpu 12.5", st, err)
	}
	got := make(chan State, 1)
	c.OnChange(func(_, st State) {
		select {
		case got <- st:
		default:
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	select {
	case st := <-got:
		if st.Level != "Minor" || !c.Allow(10) || c.Allow(9) {
			t.Errorf("streamed state %+v: want Minor admitting 10, not 9", st)
		}
	case <-time.After(10 * time.Second):
		t.Error("no state from the stream within 10s")
	}
	cancel()
	<-done
	srv.CloseClientConnections()
}
