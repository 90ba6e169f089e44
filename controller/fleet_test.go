package controller

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/degraded/degraded/levels"
)

// fleetSet applies a fleet override of revision rev, set now for ttl.
func fleetSet(rev int64, level string, mode Mode, ttl time.Duration) func(*Controller) error {
	return func(c *Controller) error {
		now := time.Now().UTC()
		_, err := c.ApplyFleet(FleetUpdate{Override: &Override{Level: level, Mode: mode, Reason: "INC-42", SetAt: now, ExpiresAt: now.Add(ttl)},
			TTL: ttl, Revision: rev})
		return err
	}
}

// fleetGone applies the fleet override's deletion at revision rev.
func fleetGone(rev int64, expired bool) func(*Controller) error {
	return func(c *Controller) error {
		_, err := c.ApplyFleet(FleetUpdate{Revision: rev, Expired: expired})
		return err
	}
}

func TestFleetLayers(t *testing.T) {
	const m = time.Minute
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "a fleet pin replaces the automatic level and says so",
			steps: []step{
				{at: 0, cpu: 10, want: "Normal", source: "auto"},
				{at: time.Second, cpu: 10, act: fleetSet(5, "Major", ModePin, 15*m), want: "Major", source: "fleet",
					reason: "fleet override set: pin Major for 15m0s: INC-42"},
				{at: 30 * time.Second, cpu: 95, want: "Major", source: "fleet"},
			},
		},
		{
			name: "a fleet floor takes the max with the automatic level",
			steps: []step{
				{at: 0, cpu: 10, want: "Normal"},
				{at: time.Second, cpu: 10, act: fleetSet(5, "Moderate", ModeFloor, 15*m), want: "Moderate", source: "fleet"},
				{at: 30 * time.Second, cpu: 85, want: "Major", source: "auto"},
			},
		},
		{
			name: "a local pin replaces the fleet layer below it",
			steps: []step{
				{at: 0, cpu: 10, want: "Normal"},
				{at: time.Second, cpu: 10, act: fleetSet(5, "Major", ModePin, 15*m), want: "Major", source: "fleet"},
				{at: 2 * time.Second, cpu: 10, act: pin("Minor", 10*m), want: "Minor", source: "override"},
				{at: 3 * time.Second, cpu: 10, act: clear, want: "Major", source: "fleet"},
			},
		},
		{
			name: "a local floor below the fleet pin leaves the fleet deciding",
			steps: []step{
				{at: 0, cpu: 10, want: "Normal"},
				{at: time.Second, cpu: 10, act: fleetSet(5, "Major", ModePin, 15*m), want: "Major", source: "fleet"},
				{at: 2 * time.Second, cpu: 10, act: floor("Minor", 10*m), want: "Major", source: "fleet"},
				{at: 3 * time.Second, cpu: 10, act: floor("Severe", 10*m), want: "Severe", source: "override"},
			},
		},
		{
			name: "a local clear never clears the fleet override",
			steps: []step{
				{at: 0, cpu: 10, want: "Normal"},
				{at: time.Second, cpu: 10, act: fleetSet(5, "Major", ModePin, 15*m), want: "Major", source: "fleet"},
				{at: 2 * time.Second, cpu: 10, act: clear, want: "Major", source: "fleet"},
			},
		},
		{
			name: "the fleet override ends at its expires_at by this clock, at the next tick",
			steps: []step{
				{at: 0, cpu: 10, want: "Normal"},
				{at: time.Second, cpu: 10, act: fleetSet(5, "Major", ModePin, m), want: "Major", source: "fleet"},
				{at: 60 * time.Second, cpu: 85, want: "Major", source: "fleet"},
				{at: 61 * time.Second, cpu: 85, want: "Major", source: "auto", reason: "fleet override expired: INC-42"},
			},
		},
		{
			name: "a DELETE ends it at once",
			steps: []step{
				{at: 0, cpu: 10, want: "Normal"},
				{at: time.Second, cpu: 10, act: fleetSet(5, "Major", ModePin, m), want: "Major"},
				{at: 2 * time.Second, cpu: 10, act: fleetGone(6, false), want: "Major", source: "auto", reason: "fleet override cleared: INC-42"},
			},
		},
		{
			name: "a lease expiry reads as expired",
			steps: []step{
				{at: 0, cpu: 10, want: "Normal"},
				{at: time.Second, cpu: 10, act: fleetSet(5, "Major", ModePin, m), want: "Major"},
				{at: 2 * time.Second, cpu: 10, act: fleetGone(6, true), want: "Major", source: "auto", reason: "fleet override expired: INC-42"},
			},
		},
		{
			name: "after the fleet override, recovery steps down from the published level",
			steps: []step{
				{at: 0, cpu: 10, want: "Normal"},
				{at: time.Second, cpu: 10, act: fleetSet(5, "Moderate", ModePin, m), want: "Moderate"},
				{at: 2 * time.Second, cpu: 10, act: fleetGone(6, false), want: "Moderate"},
				{at: 62 * time.Second, cpu: 10, want: "Minor", source: "auto"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, Options{Rules: levels.Rules{MinimumLevelDuration: m}})
				r.steps(t, tt.steps)
			})
		})
	}
}

func TestFleetUpdatesAreIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Options{})
		r.c.Check(context.Background())
		set := fleetSet(7, "Major", ModePin, time.Hour)
		if err := set(r.c); err != nil {
			t.Fatal(err)
		}
		seq := r.c.State().Sequence
		for _, again := range []func(*Controller) error{set, fleetSet(6, "Severe", ModePin, time.Hour), fleetGone(7, false), fleetGone(3, false)} {
			if err := again(r.c); err != nil {
				t.Fatal(err)
			}
		}
		if st := r.c.State(); st.Sequence != seq || st.Level != "Major" {
			t.Errorf("after replays of revision 7 and older: sequence %d level %s, want %d Major unchanged", st.Sequence, st.Level, seq)
		}
		if n := len(r.c.History(100)); n != 1 {
			t.Errorf("history has %d entries, want 1 (one fleet set)", n)
		}
		_, err := r.c.ApplyFleet(FleetUpdate{Override: &Override{Level: "Nope", Mode: ModePin, ExpiresAt: time.Now().Add(time.Hour)}, Revision: 9})
		if !errors.Is(err, ErrInvalidOverride) {
			t.Errorf("an unknown level gave %v, want ErrInvalidOverride", err)
		}
	})
}

func TestFleetStateDocument(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		off := newRig(t, Options{})
		if st := off.c.State(); st.Fleet != nil {
			t.Errorf("fleet mode off: fleet = %+v, want absent", st.Fleet)
		}
		connected := true
		r := newRig(t, Options{Fleet: &FleetInfo{Name: "shop", Instance: "web-1", Connected: func() bool { return connected }}, Rules: levels.Rules{MinimumLevelDuration: time.Minute}})
		r.c.Check(context.Background())
		if err := fleetSet(5, "Major", ModePin, 15*time.Minute)(r.c); err != nil {
			t.Fatal(err)
		}
		st := r.c.State()
		if st.Fleet == nil || st.Fleet.Name != "shop" || st.Fleet.Instance != "web-1" || !st.Fleet.Connected ||
			st.Fleet.Override == nil || st.Fleet.Override.Level != "Major" || st.Fleet.Override.ModRevision != 5 {
			t.Fatalf("fleet = %+v, want shop/web-1 connected with the Major pin of revision 5", st.Fleet)
		}
		if st.EarliestRecoveryAt == nil || !st.EarliestRecoveryAt.Equal(st.Fleet.Override.ExpiresAt) {
			t.Errorf("earliest_recovery_at = %v, want the deciding fleet override's expires_at %v", st.EarliestRecoveryAt, st.Fleet.Override.ExpiresAt)
		}
		seq := st.Sequence
		connected = false
		time.Sleep(time.Second)
		r.c.Check(context.Background())
		if st := r.c.State(); st.Fleet.Connected || st.Sequence != seq {
			t.Errorf("etcd lost: connected %v sequence %d, want false and no new sequence (%d)", st.Fleet.Connected, st.Sequence, seq)
		}
	})
}

func TestFleetOverrideSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &FileStore{Dir: t.TempDir()}
		r := newRig(t, Options{Store: store})
		r.c.Check(context.Background())
		if err := fleetSet(5, "Major", ModePin, 10*time.Minute)(r.c); err != nil {
			t.Fatal(err)
		}
		stopFirst(t, r) // one daemon at a time holds a data_dir
		again := startNew(t, Options{Table: defaultTable(t), Store: store, CPU: &fakeSampler{v: 10}})
		st := again.State()
		if st.Level != "Major" || st.Source != "fleet" {
			t.Fatalf("after restart: %s from %s, want Major from fleet (etcd not yet read)", st.Level, st.Source)
		}
		n := len(again.History(1000))
		if _, err := again.ApplyFleet(FleetUpdate{Override: &Override{Level: "Major", Mode: ModePin, ExpiresAt: time.Now().Add(time.Hour)}, Revision: 5}); err != nil {
			t.Fatal(err)
		}
		if got := len(again.History(1000)); got != n {
			t.Errorf("the same mod_revision read again after the restart added %d history entries, want none", got-n)
		}
		time.Sleep(10 * time.Minute)
		again.Check(context.Background())
		if st := again.State(); st.Source != "auto" || st.Fleet != nil {
			t.Errorf("past expires_at with etcd unreachable: source %s, want auto", st.Source)
		}
		if h := again.History(2); len(h) != 2 || h[1].Source != "fleet" || h[1].Reason != "fleet override expired: INC-42" {
			t.Errorf("history %+v, want the fleet override expired by this clock, then recovery", h)
		}
	})
}

// TestRestoredFleetOverrideClamped: like a local one, a fleet override
// read back from the state file never outlives max_override_ttl from now,
// and one set "in the future" (the clock went back) is set now.
func TestRestoredFleetOverrideClamped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &FileStore{Dir: t.TempDir()}
		r := newRig(t, Options{Store: store})
		r.c.Check(context.Background())
		future := time.Now().Add(5 * time.Hour).UTC()
		if _, err := r.c.ApplyFleet(FleetUpdate{Override: &Override{Level: "Major", Mode: ModePin, Reason: "INC-42", SetAt: future, ExpiresAt: future.Add(10 * time.Hour)},
			TTL: 15 * time.Hour, Revision: 7}); err != nil {
			t.Fatal(err)
		}
		stopFirst(t, r) // one daemon at a time holds a data_dir
		again := startNew(t, Options{Table: defaultTable(t), Store: store, CPU: &fakeSampler{v: 10}, Rules: levels.Rules{MaxOverrideTTL: time.Hour}})
		f := again.FleetOverride()
		if f == nil {
			t.Fatal("after restart: no fleet override, want the saved one")
		}
		if want := time.Now().Add(time.Hour); !f.ExpiresAt.Equal(want) || f.SetAt.After(time.Now()) {
			t.Fatalf("restored fleet override set %v, expires %v; want set no later than now, expiring at %v (max_override_ttl from now)", f.SetAt, f.ExpiresAt, want)
		}
		time.Sleep(time.Hour)
		again.Check(context.Background())
		if f := again.FleetOverride(); f != nil {
			t.Errorf("an hour after the restart: fleet override %+v still in force, want it expired", f)
		}
	})
}

// fakeFleetErrors is the fleet's summed window; ok false is etcd gone.
type fakeFleetErrors struct {
	attempts, failures int64
	instances          int
	ok                 bool
}

func (f *fakeFleetErrors) ErrorRate() FleetWindow {
	if !f.ok {
		return FleetWindow{Local: "fleet unreachable"}
	}
	return FleetWindow{Attempts: f.attempts, Failures: f.failures, Instances: f.instances}
}

func TestFleetErrorRate(t *testing.T) {
	tests := []struct {
		name       string
		fleet      *fakeFleetErrors
		local      [2]int64
		want       string
		wantReason string
	}{
		{"the fleet's window decides, and the reason says so", &fakeFleetErrors{1000, 120, 7, true}, [2]int64{100, 0},
			"Major", "fleet error_rate 12.00% > 10% (Major) over 7 instances"},
		{"min_throughput applies to the sum", &fakeFleetErrors{9, 9, 3, true}, [2]int64{100, 50}, "Normal", ""},
		{"etcd unreachable: the local window, and the reason says so", &fakeFleetErrors{ok: false}, [2]int64{100, 12},
			"Major", "error_rate 12.00% > 10% (Major) (local: fleet unreachable)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, Options{FleetErrors: tt.fleet, Rules: levels.Rules{MinThroughput: 10}})
				r.errs.set(tt.local[0], tt.local[1])
				r.c.Check(context.Background())
				st := r.c.State()
				if st.Level != tt.want || (tt.wantReason != "" && st.Reason != tt.wantReason) {
					t.Errorf("level %s reason %q, want %s %q", st.Level, st.Reason, tt.want, tt.wantReason)
				}
				if st.Signals.WindowAttempts != tt.local[0] {
					t.Errorf("window_attempts %d, want the local %d: reports carry the local window", st.Signals.WindowAttempts, tt.local[0])
				}
			})
		})
	}
}
