package client

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A daemon, or something posing as one, that publishes a state document
// no daemon can publish: the client keeps its last good state, says why
// at WARN, and never lets such a document shed PriorityCritical or admit
// what the good one shed.
func TestRefusesStatesNoDaemonPublishes(t *testing.T) {
	const good = `{"level":"Severe","index":4,"priority_threshold":70,"sequence":100,"source":"auto"}`
	cases := []struct{ name, doc, want string }{
		{"a threshold above PriorityCritical", `{"level":"Emergency","index":5,"priority_threshold":4294967296,"sequence":101}`, "priority_threshold 4294967296 is outside 0..2147483647"},
		{"a negative threshold", `{"level":"Emergency","index":5,"priority_threshold":-1,"sequence":101}`, "priority_threshold -1"},
		{"no threshold", `{"level":"Emergency","index":5,"sequence":101}`, "no priority_threshold"},
		{"no level", `{"index":5,"priority_threshold":100,"sequence":101}`, "no level"},
		{"a level name with a NUL", `{"level":"Sev\u0000ere","index":4,"priority_threshold":0,"sequence":101}`, "is not a level name"},
		{"a level name with CR LF", `{"level":"Severe\r\nX-Injected: 1","index":4,"priority_threshold":0,"sequence":101}`, "is not a level name"},
		{"a level name of 300 bytes", `{"level":"` + strings.Repeat("A", 300) + `","index":4,"priority_threshold":0,"sequence":101}`, "is not a level name"},
		{"a negative index", `{"level":"Bogus","index":-7,"priority_threshold":0,"sequence":101}`, "index -7 is outside 0..63"},
		{"an index past any table", `{"level":"Bogus","index":64,"priority_threshold":0,"sequence":101}`, "index 64"},
		{"a fraction above 1", `{"level":"Severe","index":4,"priority_threshold":70,"partial":{"from":50,"fraction":5},"sequence":101}`, "partial.fraction 5 is not in (0, 1)"},
		{"a fraction of 0", `{"level":"Severe","index":4,"priority_threshold":70,"partial":{"from":50,"fraction":0},"sequence":101}`, "partial.fraction 0"},
		{"a band that starts at the threshold", `{"level":"Severe","index":4,"priority_threshold":70,"partial":{"from":70,"fraction":0.5},"sequence":101}`, "partial.from 70"},
		{"a band below Normal", `{"level":"Normal","index":0,"priority_threshold":0,"partial":{"from":0,"fraction":0.5},"sequence":101}`, "partial at level index 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := newDaemon(t)
				streams := d.intercept("/v1/level/stream", func(w http.ResponseWriter, r *http.Request, n int32) bool {
					if n == 1 {
						sendEvents(w, r, true, good, tc.doc)
					} else {
						sendEvents(w, r, true, good)
					}
					return true
				})
				c, logs := d.startLogged(t)
				time.Sleep(time.Second) // the backoff before the second stream
				synctest.Wait()
				if st := c.State(); st.Level != "Severe" || st.Sequence != 100 || st.PriorityThreshold != 70 {
					t.Fatalf("state %s #%d threshold %d, want the last good one (Severe #100, 70)", st.Level, st.Sequence, st.PriorityThreshold)
				}
				if !c.Allow(PriorityCritical) || !c.Allow(70) || c.Allow(69) {
					t.Errorf("Allow(PriorityCritical, 70, 69) = %v %v %v, want true true false", c.Allow(PriorityCritical), c.Allow(70), c.Allow(69))
				}
				if got := logs.matching("WARN", "bad level event", tc.want); len(got) != 1 {
					t.Errorf("want one WARN naming %q:\n%s", tc.want, logs)
				}
				if n := streams.Load(); n != 2 {
					t.Errorf("%d streams, want 2: the client reconnects after a refused event", n)
				}
			})
		})
	}
}

// A rejected event is logged by its first 200 bytes, not whole: an event
// may be 4 MiB, and quoted whole it was a 16 MiB log line.
func TestRejectedEventIsLoggedByItsStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		bad := `{"level":"Severe","reason":"` + strings.Repeat("x", 300<<10) + `"`
		d.intercept("/v1/level/stream", func(w http.ResponseWriter, r *http.Request, _ int32) bool {
			sendEvents(w, r, true, bad)
			return true
		})
		_, logs := d.startLogged(t)
		synctest.Wait()
		got := logs.matching("WARN", "bad level event", fmt.Sprintf("(%d bytes)", len(bad)))
		if len(got) != 1 || len(got[0]) > 1000 {
			t.Fatalf("want one WARN of under 1000 bytes with the event's size; got %d lines, the first %d bytes", len(got), len(firstOf(got)))
		}
	})
}

func firstOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// Without a stream, a long-poll answer with no level is not a state:
// under FailClosed the client still admits only PriorityCritical.
func TestLongPollRefusesADocumentWithoutALevel(t *testing.T) {
	for _, doc := range []string{`{}`, `null`, `{"level":""}`, `{"foo":1}`} {
		t.Run(doc, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := newDaemon(t)
				d.intercept("/v1/level/stream", notFound)
				d.intercept("/v1/level", func(w http.ResponseWriter, _ *http.Request, _ int32) bool {
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprint(w, doc)
					return true
				})
				c, logs := d.startLogged(t, WithFailMode(FailClosed))
				time.Sleep(5 * time.Second)
				synctest.Wait()
				if c.Allow(10) || !c.Allow(PriorityCritical) || c.State().Level != "" || !c.Stale() {
					t.Errorf("after %s: Allow(10) %v, Allow(critical) %v, level %q, stale %v; want false, true, \"\", true",
						doc, c.Allow(10), c.Allow(PriorityCritical), c.State().Level, c.Stale())
				}
				if got := logs.matching("WARN", "cannot reach degraded"); len(got) != 1 {
					t.Errorf("want the refused answer logged once:\n%s", logs)
				}
			})
		})
	}
}

// A daemon (or a proxy that strips the query) answering every long-poll
// at once draws one request a second, not one per round trip.
func TestLongPollIsPacedWhenTheWaitIsIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		d.intercept("/v1/level/stream", notFound)
		polls := d.intercept("/v1/level", func(_ http.ResponseWriter, r *http.Request, _ int32) bool {
			r.URL.RawQuery = "" // the wait is ignored
			return false
		})
		d.start()
		c := d.newClient()
		running(t, c)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := polls.Load(); n < 9 || n > 12 {
			t.Errorf("%d polls in 10s, want about 10", n)
		}
		if c.State().Level != "Normal" || c.Stale() {
			t.Errorf("level %q stale %v, want Normal, fresh", c.State().Level, c.Stale())
		}
	})
}

// A stream's "retry:" sets the backoff's base, never past its 30s cap: a
// retry of years left the client without a daemon for good.
func TestStreamRetryHintIsCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		streams := d.intercept("/v1/level/stream", func(w http.ResponseWriter, r *http.Request, n int32) bool {
			if n > 1 {
				return false
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "retry: 999999999999\n\n")
			sendEvents(w, r, false, minor)
			return true
		})
		d.start()
		c := d.newClient(WithStaleAfter(time.Hour))
		running(t, c)
		time.Sleep(31 * time.Second)
		synctest.Wait()
		if n := streams.Load(); n < 2 {
			t.Errorf("%d streams in 31s after a retry hint of 31 years, want a reconnect within the 30s cap", n)
		}
	})
}

// Reports that cannot be delivered are a WARN when the first fails and an
// INFO when one is delivered again; nothing in between.
func TestUndeliveredReportsAreLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		var failing atomic.Bool
		failing.Store(true)
		d.intercept("/v1/outcomes", func(w http.ResponseWriter, _ *http.Request, _ int32) bool {
			if failing.Load() {
				http.Error(w, "overloaded", http.StatusServiceUnavailable)
			}
			return failing.Load()
		})
		c, logs := d.startLogged(t)
		for range 10 {
			c.Record(true)
			time.Sleep(time.Second)
		}
		synctest.Wait()
		if got := logs.matching("WARN", "cannot deliver outcome reports", "503"); len(got) != 1 {
			t.Errorf("want one WARN for ten failed flushes:\n%s", logs)
		}
		failing.Store(false)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := logs.matching("INFO", "outcome reports reach degraded again", "failed_flushes="); len(got) != 1 {
			t.Errorf("want one INFO when the reports reach the daemon again:\n%s", logs)
		}
		if att, _ := d.win.Totals(time.Now()); att != 10 {
			t.Errorf("the daemon counted %d outcomes, want the 10 kept through the outage", att)
		}
	})
}

// A stream that delivers one state and drops, again and again, backs off
// as failures do, and is one WARN a minute with a count of the outages not
// logged, not two lines per connection (1,806 connections and as many
// lines in 90s before).
func TestFlappingStreamIsLoggedOnceAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		streams := d.intercept("/v1/level/stream", func(w http.ResponseWriter, r *http.Request, _ int32) bool {
			sendEvents(w, r, false, minor)
			return true
		})
		_, logs := d.startLogged(t)
		time.Sleep(150 * time.Second)
		synctest.Wait()
		if n := streams.Load(); n < 5 || n > 40 {
			t.Errorf("%d streams in 150s, want a flapping stream backed off to the 30s cap (5 to 40)", n)
		}
		lost := logs.matching("WARN", "lost contact with degraded")
		if len(lost) < 2 || len(lost) > 3 || !strings.Contains(lost[1], "outages_since_last_log=") {
			t.Errorf("%d streams gave %d lost-contact lines, want 2 or 3 in 150s, the later ones with a count:\n%s", streams.Load(), len(lost), logs)
		}
		if got := logs.matching("INFO", "contact with degraded restored"); len(got) > len(lost) {
			t.Errorf("%d restored lines, want one per logged outage at most:\n%s", len(got), logs)
		}
	})
}

// A stream that stalls after its state is lost contact, logged as such,
// and its return is logged too.
func TestStalledStreamIsLostContact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		d.intercept("/v1/level/stream", func(w http.ResponseWriter, r *http.Request, n int32) bool {
			if n == 1 {
				sendEvents(w, r, true, minor) // and never a byte more
			}
			return n == 1
		})
		c, logs := d.startLogged(t, WithStaleAfter(time.Minute))
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if got := logs.matching("WARN", "lost contact with degraded", "silent for 1m0s"); len(got) != 1 {
			t.Errorf("want the stall logged as lost contact:\n%s", logs)
		}
		if got := logs.matching("INFO", "contact with degraded restored"); len(got) != 1 {
			t.Errorf("want the reconnect logged:\n%s", logs)
		}
		if c.Stale() || c.State().Level != "Normal" {
			t.Errorf("level %q stale %v, want the daemon's Normal, fresh", c.State().Level, c.Stale())
		}
	})
}

// A daemon that publishes a new sequence every millisecond draws a flush
// every 100ms, not one per sequence (2,861 reports in 3 s before).
func TestNewSequenceFlushesAreSpaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		posts := d.intercept("/v1/outcomes", func(http.ResponseWriter, *http.Request, int32) bool { return false })
		d.start()
		c := d.newClient()
		running(t, c)
		synctest.Wait()
		levels := []string{"Minor", "Moderate"}
		for i := range 3000 {
			d.override(levels[i%2])
			c.Admit(50)
			time.Sleep(time.Millisecond)
			synctest.Wait()
		}
		// A flush every 100ms, each with at most maxEnded intervals, one
		// report each: 31 x 8 at most, where it was one or more a sequence.
		if n := posts.Load(); n < 20 || n > 31*maxEnded {
			t.Errorf("%d reports in 3s of a new sequence every millisecond, want at most %d", n, 31*maxEnded)
		}
	})
}

// Past a table's 64 level names (and "unknown"), shadow mode's counters
// make room rather than grow with every name a daemon invents.
func TestShadowLevelCountsAreBounded(t *testing.T) {
	var s shadowCounts
	for i := range 1000 {
		s.counter(fmt.Sprintf("L%d", i))
	}
	if n := len(s.byLevel); n > maxLevelCounts {
		t.Errorf("%d level counters, want at most %d", n, maxLevelCounts)
	}
	counted := s.counter("Severe")
	counted.Add(3)
	for i := range 1000 {
		s.counter(fmt.Sprintf("M%d", i))
	}
	if got := s.take(nil); got["Severe"] != 3 {
		t.Errorf("take = %v, want Severe's 3 kept while the others made room", got)
	}
}

// Run leaves no connection of its own transport behind: its idle
// connections' goroutines end when it returns.
func TestRunClosesItsIdleConnections(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/level/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "event: level\ndata: {\"level\":\"Normal\",\"index\":0,\"priority_threshold\":0,\"sequence\":1,\"partial\":null}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case "/v1/levels":
			fmt.Fprint(w, `{"levels":[{"name":"Normal","index":0,"priority_threshold":0}]}`)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer srv.Close()
	c, err := New(srv.URL, WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var once sync.Once
	c.OnChange(func(_, _ State) { once.Do(func() { close(started) }) })
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) })
	<-started
	c.Record(true) // the last flush opens a connection of its own
	cancel()
	wg.Wait()
	for wait := time.Millisecond; persistConns() > 0 && wait < 5*time.Second; wait *= 2 {
		time.Sleep(wait) // goroutines end a moment after their connection closes
	}
	if n := persistConns(); n > 0 {
		t.Errorf("connection goroutines of the client's transport outlived Run (%d stack frames)", n)
	}
}

// persistConns counts the goroutines of net/http's client connections.
func persistConns() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "net/http.(*persistConn)")
}

// intercept serves the fake daemon's requests for path with h, which is
// told how many such requests came so far (from 1) and returns false to
// pass one on to the daemon. Call it before start; it wraps what an
// earlier intercept set.
func (d *daemon) intercept(path string, h func(w http.ResponseWriter, r *http.Request, n int32) bool) *atomic.Int32 {
	var count atomic.Int32
	inner := d.wrap
	d.wrap = func(next http.Handler) http.Handler {
		if inner != nil {
			next = inner(next)
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != path || !h(w, r, count.Add(1)) {
				next.ServeHTTP(w, r)
			}
		})
	}
	return &count
}

// sendEvents answers a stream with the level events of docs, then holds
// it open until the client goes unless hold is false.
func sendEvents(w http.ResponseWriter, r *http.Request, hold bool, docs ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, doc := range docs {
		fmt.Fprintf(w, "event: level\ndata: %s\n\n", doc)
	}
	w.(http.Flusher).Flush()
	if hold {
		<-r.Context().Done()
	}
}

// notFound answers 404: a daemon without the route.
func notFound(w http.ResponseWriter, r *http.Request, _ int32) bool {
	http.NotFound(w, r)
	return true
}

// minor is a valid state document.
const minor = `{"level":"Minor","index":1,"priority_threshold":10,"sequence":1}`

// A sequence that goes back (a daemon whose data_dir was wiped starts
// again from 1) is followed, since refusing it would strand the client
// until the daemon passed the old number, and said at WARN, at most once
// a minute.
func TestSequenceGoingBackIsFollowedAndLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		d.intercept("/v1/level/stream", func(w http.ResponseWriter, r *http.Request, n int32) bool {
			sendEvents(w, r, true,
				`{"level":"Severe","index":4,"priority_threshold":70,"sequence":100}`,
				`{"level":"Minor","index":1,"priority_threshold":10,"sequence":5}`,
				`{"level":"Severe","index":4,"priority_threshold":70,"sequence":101}`,
				`{"level":"Minor","index":1,"priority_threshold":10,"sequence":6}`)
			return true
		})
		c, logs := d.startLogged(t)
		synctest.Wait()
		if st := c.State(); st.Level != "Minor" || st.Sequence != 6 {
			t.Errorf("state %s #%d, want the daemon's last, Minor #6", st.Level, st.Sequence)
		}
		if got := logs.matching("WARN", "sequence went back", "was=100", "now=5"); len(got) != 1 || len(logs.matching("sequence went back")) != 1 {
			t.Errorf("want one WARN for two steps back within a minute:\n%s", logs)
		}
	})
}

// startLogged starts the fake daemon and a running client of it with
// opts, logging into the returned records.
func (d *daemon) startLogged(t testing.TB, opts ...Option) (*Client, *captured) {
	t.Helper()
	d.start()
	logs := &captured{}
	c := d.newClient(append(opts, WithLogger(slog.New(logs)))...)
	running(t, c)
	return c, logs
}
