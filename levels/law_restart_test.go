package levels

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// restart stands for the daemon restarting now, as the controller does
// it: a new machine from the same config restores what the old one saved
// (keep decides whether the saved state keeps the capacity estimate),
// and the daemon's error window starts empty, warming for its 10 s.
func (s *sim) restart(t *testing.T, keep bool) {
	t.Helper()
	saved := s.m.Saved()
	if saved.Capacity == nil {
		t.Fatal("a machine that measured its capacity saved no estimate")
	}
	if !keep {
		saved.Capacity = nil
	}
	cfg := s.m.Config()
	cfg.Rules.BlindHold = 5 * time.Minute // the daemon's default: warming holds recovery
	m := NewMachine(cfg, s.now)
	if _, err := m.Restore(s.now, saved, "restored after unclean shutdown"); err != nil {
		t.Fatal(err)
	}
	for i := range s.win {
		s.win[i].att, s.win[i].fail, s.win[i].lat = 0, 0, [NumLatencyBuckets]int64{}
	}
	s.warmUntil = s.now.Add(10 * time.Second)
	s.m = m
	s.evaluate(TriggerStart)
}

// TestLawKeepsItsCapacityAcrossARestart: the daemon restarted 30 s into a
// 3x overload. With the estimate it saved, the law sizes the partial
// admission again from the first reports: no level change, and the 30 s
// after the restart are served as the 30 s before. Without it (the daemon
// before state.json kept the estimate), the level went down into the
// overload and back up once its window was warm: goodput over those 30 s
// fell from 93.5% to 67.4%, the top class's within the SLO to 82.5%.
func TestLawKeepsItsCapacityAcrossARestart(t *testing.T) {
	for _, keep := range []bool{true, false} {
		var goodput, top []float64
		changes := 0
		for seed := range 8 {
			s := newSim(t, simTable(t), simMix(0.5))
			s.rng = rand.New(rand.NewPCG(uint64(seed), 2))
			s.run(10 * time.Second)
			s.phase(simMix(3), 30*time.Second)
			s.restart(t, keep)
			before := s.changes
			st := s.phase(simMix(3), 30*time.Second)
			goodput, top = append(goodput, st.goodput(s.now)), append(top, st.topOK())
			changes = max(changes, s.changes-before)
		}
		t.Logf("estimate kept %v: goodput after the restart %.1f%% (least %.1f%%), top class %.2f%% (least %.2f%%), at most %d level changes",
			keep, 100*mean(goodput), 100*slices.Min(goodput), 100*mean(top), 100*slices.Min(top), changes)
		if !keep {
			if changes == 0 {
				t.Error("without the estimate the level did not move after the restart: the test does not show what the estimate is for")
			}
			continue
		}
		if changes != 0 {
			t.Errorf("the restarted law changed the level %d times in a steady 3x overload, want none", changes)
		}
		if gp := mean(goodput); gp < 0.9 || slices.Min(goodput) < 0.85 {
			t.Errorf("goodput after the restart %.1f%% (least %.1f%%), want at least 90%% (no stream under 85%%)", 100*gp, 100*slices.Min(goodput))
		}
		if m := mean(top); m < 0.995 {
			t.Errorf("the top class was served within the SLO %.2f%% of the time after the restart, want at least 99.5%%", 100*m)
		}
	}
}

// TestLawKeepsItsCapacityAcrossTwoRestarts: a daemon that crashes again
// before its law has decided anything (a crash loop) saves the estimate
// it restored, with its own time, so the second start restores it too;
// ten minutes after that time it is let go.
func TestLawKeepsItsCapacityAcrossTwoRestarts(t *testing.T) {
	s := newSim(t, simTable(t), simMix(0.5))
	s.run(10 * time.Second)
	s.phase(simMix(3), 20*time.Second)
	first := s.m.Saved().Capacity
	if first == nil {
		t.Fatal("a machine that measured its capacity saved no estimate")
	}
	restart := func(saved Saved, at time.Time) *Machine {
		m := NewMachine(s.m.Config(), at)
		if _, err := m.Restore(at, saved, ""); err != nil {
			t.Fatal(err)
		}
		return &m
	}
	second := restart(s.m.Saved(), s.now.Add(time.Second)).Saved()
	if second.Capacity == nil || *second.Capacity != *first {
		t.Fatalf("saved again before any decision: %+v, want the restored %+v", second.Capacity, *first)
	}
	if m := restart(second, s.now.Add(2*time.Second)); !m.law.known || m.law.capacity != first.PerSecond {
		t.Errorf("second restart: capacity %.0f/s (known %v), want the first run's %.0f/s", m.law.capacity, m.law.known, first.PerSecond)
	}
	if m := restart(second, first.At.Add(capacityKeep+time.Second)); m.law.known {
		t.Errorf("restored %.0f/s from an estimate older than %v", m.law.capacity, capacityKeep)
	}
}
