package client

import (
	"bytes"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"
)

// TestShadowAdmitsEverythingAndReportsWhatItWouldShed: a daemon in shadow
// mode at Major; Allow and the middleware admit everything, whatever the
// fail mode and even once stale, and what they would have shed reaches
// the daemon as would_shed, with the outcomes.
func TestShadowAdmitsEverythingAndReportsWhatItWouldShed(t *testing.T) {
	for _, mode := range []FailMode{FailOpen, FailLastKnown, FailClosed} {
		t.Run(mode.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := newDaemon(t)
				d.shadow = true
				d.override("Major") // threshold 50
				d.start()
				c := d.newClient(WithFailMode(mode), WithStaleAfter(time.Minute), WithReportInterval(time.Second))
				running(t, c)
				synctest.Wait()
				if st := c.State(); !st.Shadow || st.Level != "Major" {
					t.Fatalf("state shadow %v level %s, want shadow at Major", st.Shadow, st.Level)
				}

				for _, p := range []int{0, 10, 49, 50, PriorityCritical} {
					if !c.Allow(p) {
						t.Errorf("Allow(%d) = false in shadow mode", p)
					}
				}
				served := 0
				h := Middleware(c, PriorityFromHeader("X-Priority", 50))(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					served++
				}))
				r := httptest.NewRequest("GET", "/", nil)
				r.Header.Set("X-Priority", "10")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != 200 || served != 1 {
					t.Errorf("middleware in shadow mode: %d, handler reached %d times, want 200 and reached", w.Code, served)
				}
				time.Sleep(time.Second)
				synctest.Wait()
				if got, want := d.shedReports(), map[string]int64{"Major": 4}; !maps.Equal(got, want) {
					t.Errorf("daemon got would_shed %v, want %v (Allow 0, 10, 49 and the middleware's 10)", got, want)
				}
				if a, _ := d.win.Totals(time.Now()); a != 1 {
					t.Errorf("daemon got %d outcomes, want the middleware's 1 (it still observes)", a)
				}

				d.stop()
				time.Sleep(2 * time.Minute)
				if !c.Stale() || !c.Allow(10) {
					t.Errorf("stale in shadow mode: stale %v Allow(10) %v, want stale and admitted", c.Stale(), c.Allow(10))
				}
			})
		})
	}
}

// TestWouldShedOnlyToAShadowDaemon: counts taken while the state said
// shadow are not sent once the daemon is back to enforce, and a daemon
// that does not say shadow (an older one) never gets the field, so its
// outcomes are never refused for it.
func TestWouldShedOnlyToAShadowDaemon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		d := newDaemon(t)
		d.shadow = true
		d.override("Major")
		d.start()
		c := d.newClient(WithReportInterval(time.Second), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		running(t, c)
		synctest.Wait()
		c.Allow(10)
		c.Record(true)
		d.setShadow(false) // before the flush
		synctest.Wait()
		if c.Allow(10) {
			t.Fatalf("enforcing at Major: Allow(10) %v, want false", c.Allow(10))
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if a, _ := d.win.Totals(time.Now()); a != 1 || d.shedReports() != nil {
			t.Errorf("daemon got %d outcomes and would_shed %v, want 1 and none", a, d.shedReports())
		}
		if logs.Len() != 0 {
			t.Errorf("logs: %s, want no refused report", logs.String())
		}
	})
}

// TestAllowInShadowModeDoesNotAllocate: counting is one atomic add.
func TestAllowInShadowModeDoesNotAllocate(t *testing.T) {
	st := majorState(time.Now().Add(time.Minute))
	st.Shadow = true
	c := at(t, st)
	if n := testing.AllocsPerRun(1000, func() { c.Allow(10) }); n != 0 {
		t.Errorf("Allow in shadow mode allocates %v times, want 0", n)
	}
	if got := c.shadow.take(nil); got["Major"] != 1001 {
		t.Errorf("counted %v, want Major 1001 (AllocsPerRun runs once more to warm up)", got)
	}
}

// A client in shadow mode counts what it admits but would have shed under
// the level that would have shed it: the state's, while fresh or under
// FailLastKnown; "unknown" once stale under FailClosed, where the fail
// mode and no level decides; nothing under FailOpen, which sheds nothing.
// PriorityCritical is never counted.
func TestShadowCountsUnderTheLevelThatWouldHaveShed(t *testing.T) {
	for _, tc := range []struct {
		mode  FailMode
		stale bool
		want  map[string]int64
	}{
		{FailOpen, false, map[string]int64{"Major": 1}},
		{FailOpen, true, nil},
		{FailLastKnown, true, map[string]int64{"Major": 1}},
		{FailClosed, true, map[string]int64{"unknown": 1}},
	} {
		name := tc.mode.String()
		if tc.stale {
			name += " stale"
		}
		t.Run(name, func(t *testing.T) {
			st := majorState(time.Now().Add(time.Minute))
			st.Shadow = true
			c := at(t, st, WithFailMode(tc.mode))
			if tc.stale {
				c.setStale(true)
			}
			for _, p := range []int{10, PriorityCritical} {
				if !c.Allow(p) {
					t.Errorf("Allow(%d) = false in shadow mode", p)
				}
			}
			if got := c.shadow.take(nil); !maps.Equal(got, tc.want) {
				t.Errorf("would-shed counts %v, want %v", got, tc.want)
			}
		})
	}
}
