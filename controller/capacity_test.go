package controller

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/degraded/degraded/levels"
	"github.com/google/go-cmp/cmp"
)

// TestRestartKeepsTheCapacityEstimate: state.json keeps the admission
// law's capacity estimate, so that the first report after a restart in an
// overload gets a partial admission sized from it, instead of the level
// shedding its whole band until the law has overloaded the service again
// to measure it. An estimate older than ten minutes is let go, and one
// that is not a rate is refused with a log line naming it.
func TestRestartKeepsTheCapacityEstimate(t *testing.T) {
	for _, tt := range []struct {
		name     string
		age      time.Duration
		perSec   float64
		partial  *levels.Partial
		logNames string
	}{
		{name: "kept", age: time.Minute, perSec: 100, partial: &levels.Partial{From: 30, Fraction: 0.15}},
		{name: "older than ten minutes", age: 11 * time.Minute, perSec: 100},
		{name: "not a rate", age: time.Minute, perSec: -5, logNames: "saved capacity estimate -5/s is not a rate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := &FileStore{Dir: filepath.Join(t.TempDir(), "data")}
				r := newRig(t, Options{Store: store})
				r.errs.set(1000, 120) // 12%: Major by the table's error rate
				r.c.Check(context.Background())
				if st := r.c.State(); st.Level != "Major" || st.Partial != nil {
					t.Fatalf("before the restart: %s partial %+v, want Major with none (no capacity measured)", st.Level, st.Partial)
				}
				r.stop()
				p, _, err := store.Load()
				if err != nil {
					t.Fatal(err)
				}
				if p.Capacity != nil {
					t.Fatalf("a law that measured nothing saved %+v", p.Capacity)
				}
				// What a law that measured the service at perSec saves.
				p.Capacity = &levels.Capacity{PerSecond: tt.perSec, OverAt: time.Now().Add(-tt.age), At: time.Now().Add(-tt.age)}
				if err := store.Save(p); err != nil {
					t.Fatal(err)
				}

				time.Sleep(time.Second)
				var log strings.Builder
				errs := &fakeErrors{}
				errs.set(1000, 120)
				again := startNew(t, Options{Table: defaultTable(t), Store: store, CPU: &fakeSampler{}, Errors: errs, Logger: slog.New(slog.NewTextHandler(&log, nil))})
				if st := again.State(); st.Level != "Major" || st.Partial != nil {
					t.Fatalf("restarted: %s partial %+v, want Major, partial null until a report (DESIGN.md)", st.Level, st.Partial)
				}
				time.Sleep(2 * time.Second)
				again.Reported(levels.Report{At: time.Now(), Success: 80, Admission: &levels.Admission{
					Seconds: 1, Reporter: "a", Admitted: 80, ShedBelow: 300,
					Offered: map[int]int64{100: 20, 60: 60, 40: 100, 10: 200}}})
				synctest.Wait()
				// Target 95/s of 100: Major admits 80/s, and 15 of the 100/s in 30-49.
				if st := again.State(); st.Level != "Major" || !cmp.Equal(st.Partial, tt.partial) {
					t.Errorf("after the first report: %s partial %+v, want Major partial %+v", st.Level, st.Partial, tt.partial)
				}
				if tt.logNames != "" && !strings.Contains(log.String(), tt.logNames) {
					t.Errorf("the log does not name the refused estimate (%q):\n%s", tt.logNames, log.String())
				}
			})
		})
	}
}

// TestSteadyOverloadKeepsItsCapacityEstimateFresh: a steady overload
// changes no level, and state.json was saved only at level changes, so
// its capacity estimate aged in the file while the law kept it current:
// a restart ten minutes into the overload let it go and measured the
// service again by overloading it. The estimate is saved again once it is
// a minute newer than the one saved.
func TestSteadyOverloadKeepsItsCapacityEstimateFresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &FileStore{Dir: filepath.Join(t.TempDir(), "data")}
		r := newRig(t, Options{Store: store})
		r.errs.set(1000, 120) // 12%: Major by the table's error rate
		r.c.Check(context.Background())
		r.stop()
		p, _, err := store.Load()
		if err != nil {
			t.Fatal(err)
		}
		p.Capacity = &levels.Capacity{PerSecond: 100, OverAt: time.Now(), At: time.Now()}
		if err := store.Save(p); err != nil {
			t.Fatal(err)
		}

		errs := &fakeErrors{}
		errs.set(1000, 120)
		c := startNew(t, Options{Table: defaultTable(t), Store: store, CPU: &fakeSampler{}, Errors: errs})
		start := time.Now()
		for range 180 {
			time.Sleep(time.Second)
			c.Reported(levels.Report{At: time.Now(), Success: 95, Admission: &levels.Admission{
				Seconds: 1, Reporter: "a", Admitted: 95, ShedBelow: 300,
				Offered: map[int]int64{100: 20, 60: 60, 40: 100, 10: 200}}})
			synctest.Wait()
		}
		if st := c.State(); st.Level != "Major" || st.Partial == nil {
			t.Fatalf("after three minutes: %s partial %+v, want Major with a partial (nothing else changed)", st.Level, st.Partial)
		}
		saved, _, err := store.Load()
		if err != nil {
			t.Fatal(err)
		}
		if saved.Capacity == nil || time.Since(saved.Capacity.At) > capacitySaveEvery+time.Second {
			t.Errorf("three minutes after the start, state.json's capacity estimate is %+v (%v old), want one at most %v old",
				saved.Capacity, time.Since(capacityAt(saved)), capacitySaveEvery)
		}
		if saved.Capacity != nil && !saved.Capacity.At.After(start) {
			t.Errorf("state.json's capacity estimate is the one the start restored (%v), want the law's since", saved.Capacity.At)
		}
	})
}

// TestTooManyReportersAreLogged: the admission law tracks 256 reporters
// and forgets the least recently heard beyond them, reading the offered
// load low. That is logged, once a minute while it goes on, not silent.
func TestTooManyReportersAreLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		c := startNew(t, Options{Table: defaultTable(t), CPU: &fakeSampler{}, Errors: &fakeErrors{}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		next := 0
		report := func(n int) {
			for range n {
				next++
				c.Reported(levels.Report{At: time.Now(), Success: 1, Admission: &levels.Admission{
					Seconds: 1, Reporter: fmt.Sprintf("%x", next), Admitted: 1, Offered: map[int]int64{10: 1}}})
			}
			time.Sleep(300 * time.Millisecond) // the event evaluation takes them
			synctest.Wait()
		}
		warned := func() int {
			return strings.Count(logs.String(), "more clients report admission counts than the admission law tracks")
		}
		report(200)
		if warned() != 0 {
			t.Fatalf("200 reporters: %q, want no warning", logs.String())
		}
		report(100)
		if warned() != 1 || !strings.Contains(logs.String(), "reporters_forgotten=44") {
			t.Fatalf("300 reporters within a second: %q, want one warning, 44 forgotten", logs.String())
		}
		report(100)
		if warned() != 1 {
			t.Fatalf("more forgotten within the minute: %d warnings, want still 1", warned())
		}
		time.Sleep(time.Minute)
		report(300)
		if warned() != 2 {
			t.Fatalf("forgotten again a minute later: %d warnings, want 2", warned())
		}
	})
}
