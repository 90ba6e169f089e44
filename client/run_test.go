package client

import (
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestFollowsTheLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		d.start()
		c := d.newClient()
		var mu sync.Mutex
		var changes [][2]string
		cancel := c.OnChange(func(old, new State) {
			mu.Lock()
			changes = append(changes, [2]string{old.Level, new.Level})
			mu.Unlock()
		})
		stop := running(t, c)
		synctest.Wait()
		if st := c.State(); st.Level != "Normal" || c.Stale() {
			t.Fatalf("after connecting: level %q stale %v, want Normal and fresh", st.Level, c.Stale())
		}

		d.override("Major")
		synctest.Wait()
		st := c.State()
		if st.Level != "Major" || st.Sequence != 1 || st.Source != SourceOverride || st.Override == nil || st.Override.Reason != "test Major" {
			t.Fatalf("after override: %+v, want Major by override at sequence 1", st)
		}
		for _, tc := range []struct {
			priority int
			want     bool
		}{{0, false}, {49, false}, {50, true}, {PriorityCritical, true}} {
			if got := c.Allow(tc.priority); got != tc.want {
				t.Errorf("Allow(%d) at Major = %v, want %v", tc.priority, got, tc.want)
			}
		}
		if c.Feature("recommendations") || c.Feature("search") || !c.Feature("checkout") {
			t.Errorf("features at Major: recommendations %v search %v checkout %v, want off off on",
				c.Feature("recommendations"), c.Feature("search"), c.Feature("checkout"))
		}

		cancel()
		d.override("Minor")
		synctest.Wait()
		if c.State().Level != "Minor" {
			t.Errorf("level %q, want Minor", c.State().Level)
		}
		mu.Lock()
		if want := [][2]string{{"", "Normal"}, {"Normal", "Major"}}; len(changes) != 2 || changes[0] != want[0] || changes[1] != want[1] {
			t.Errorf("OnChange saw %v, want %v and nothing after cancel", changes, want)
		}
		mu.Unlock()

		if err := stop(); !isCanceled(err) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	})
}

func TestReconnectsAfterRestartAndCatchesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		d.start()
		c := d.newClient(WithStaleAfter(time.Minute))
		running(t, c)
		synctest.Wait()

		d.stop()
		d.override("Moderate")
		d.override("Severe") // two changes while the client cannot see them
		time.Sleep(10 * time.Second)
		if st := c.State(); st.Level != "Normal" || c.Stale() {
			t.Fatalf("daemon down 10s: %q stale %v, want the last state, not yet stale", st.Level, c.Stale())
		}
		d.start()
		time.Sleep(35 * time.Second) // more than the backoff cap
		synctest.Wait()
		want := d.sequence()
		if st := c.State(); st.Sequence != want || st.Level != "Severe" || c.Stale() {
			t.Fatalf("after restart: sequence %d level %q stale %v, want sequence %d Severe fresh", st.Sequence, st.Level, c.Stale(), want)
		}
	})
}

func TestFailModes(t *testing.T) {
	// The daemon pins Major (threshold 50, disables "search"), then dies.
	tests := []struct {
		mode                      FailMode
		beforeAllow, staleAllow   bool // Allow(10)
		beforeSearch, staleSearch bool
	}{
		{FailOpen, true, true, true, true},
		{FailLastKnown, true, false, true, false},
		{FailClosed, false, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.mode.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := newDaemon(t)
				c := d.newClient(WithFailMode(tt.mode), WithStaleAfter(time.Minute))
				running(t, c)
				synctest.Wait()
				if !c.Stale() || c.Allow(10) != tt.beforeAllow || c.Feature("search") != tt.beforeSearch || !c.Allow(PriorityCritical) {
					t.Errorf("before any state: stale %v Allow(10) %v search %v, want stale, %v, %v, critical admitted",
						c.Stale(), c.Allow(10), c.Feature("search"), tt.beforeAllow, tt.beforeSearch)
				}

				d.override("Major")
				d.start()
				time.Sleep(31 * time.Second)
				synctest.Wait()
				if c.Stale() || c.Allow(10) || c.Feature("search") {
					t.Fatalf("connected at Major: stale %v Allow(10) %v search %v, want fresh and both false", c.Stale(), c.Allow(10), c.Feature("search"))
				}

				d.stop()
				last := time.Unix(0, c.lastContact.Load()) // the last event or ping
				time.Sleep(time.Until(last.Add(59 * time.Second)))
				if c.Stale() {
					t.Fatal("stale 59s after the last contact, want 60s")
				}
				time.Sleep(2 * time.Second)
				if !c.Stale() || c.Allow(10) != tt.staleAllow || c.Feature("search") != tt.staleSearch || !c.Allow(PriorityCritical) {
					t.Errorf("stale: stale %v Allow(10) %v search %v, want stale, %v, %v, critical admitted",
						c.Stale(), c.Allow(10), c.Feature("search"), tt.staleAllow, tt.staleSearch)
				}
				if c.State().Level != "Major" {
					t.Errorf("State() while stale = %q, want the last known Major", c.State().Level)
				}

				d.start()
				time.Sleep(31 * time.Second)
				synctest.Wait()
				if c.Stale() || c.Allow(10) {
					t.Errorf("back in contact: stale %v Allow(10) %v, want fresh at Major", c.Stale(), c.Allow(10))
				}
			})
		})
	}
}

func TestRecordIsFlushedAndKeptWhileDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		d.start()
		c := d.newClient(WithReportInterval(time.Second))
		stop := running(t, c)
		for i := range 1000 {
			c.Record(i%20 != 0)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if a, f := d.win.Totals(time.Now()); a != 1000 || f != 50 {
			t.Fatalf("after one interval: %d attempts %d failures, want 1000 and 50", a, f)
		}

		d.stop()
		for range 10 {
			c.Record(false)
		}
		time.Sleep(5 * time.Second) // several failed flushes
		d.start()
		c.Record(true)
		time.Sleep(time.Second)
		synctest.Wait()
		if a, f := d.win.Totals(time.Now()); a != 1011 || f != 60 {
			t.Fatalf("after the daemon came back: %d attempts %d failures, want 1011 and 60 (nothing lost, nothing doubled)", a, f)
		}

		c.Record(false)
		if err := stop(); !isCanceled(err) {
			t.Fatalf("Run: %v", err)
		}
		if a, f := d.win.Totals(time.Now()); a != 1012 || f != 61 {
			t.Errorf("after Run ended: %d attempts %d failures, want the final flush to deliver the last failure", a, f)
		}
	})
}

func TestRetainedCountsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t) // never started: every flush fails
		c := d.newClient()
		c.pending = counts{success: maxRetained, failure: maxRetained / 4}
		c.Record(false)
		if err := c.flush(t.Context(), true); err == nil {
			t.Fatal("flush to a stopped daemon succeeded")
		}
		if total := c.pending.success + c.pending.failure; total > maxRetained {
			t.Errorf("kept %d counts, want at most %d", total, maxRetained)
		}
		if ratio := float64(c.pending.failure) / float64(c.pending.success); ratio < 0.2499 || ratio > 0.2501 {
			t.Errorf("failure ratio %.4f after scaling, want 0.25 kept", ratio)
		}
	})
}

func TestFallsBackToLongPollBehindABufferingProxy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		// A proxy that buffers the stream: headers arrive, events never do.
		d.wrap = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/level/stream" {
					w.Header().Set("Content-Type", "text/event-stream")
					w.WriteHeader(http.StatusOK)
					w.(http.Flusher).Flush()
					<-r.Context().Done()
					return
				}
				next.ServeHTTP(w, r)
			})
		}
		d.start()
		c := d.newClient()
		running(t, c)
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if st := c.State(); st.Level != "Normal" || c.Stale() {
			t.Fatalf("after falling back: level %q stale %v, want Normal by long-poll", st.Level, c.Stale())
		}
		d.override("Moderate")
		synctest.Wait()
		if st := c.State(); st.Level != "Moderate" {
			t.Fatalf("long-poll did not deliver the change: %q", st.Level)
		}
		time.Sleep(3 * time.Minute) // polls answering on their 30s wait keep it fresh
		if c.Stale() {
			t.Error("stale while long-polling")
		}
	})
}

func TestFallsBackToLongPollWithoutAStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		d.wrap = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/level/stream" {
					http.NotFound(w, r)
					return
				}
				next.ServeHTTP(w, r)
			})
		}
		d.start()
		c := d.newClient()
		running(t, c)
		synctest.Wait()
		d.override("Severe")
		synctest.Wait()
		if st := c.State(); st.Level != "Severe" {
			t.Fatalf("level %q, want Severe by long-poll", st.Level)
		}
	})
}

func TestRunTwiceIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		c := d.newClient()
		running(t, c)
		synctest.Wait()
		if err := c.Run(t.Context()); err == nil || isCanceled(err) {
			t.Errorf("second Run: %v, want an error", err)
		}
	})
}
