package levels

import (
	"fmt"
	"maps"
	"strings"
	"time"
)

// Recommend returns the most severe level for which any signal with a
// value strictly exceeds that level's threshold multiplied by scale, and
// the trigger that decided it. It returns 0 (Normal) and ok == false when no
// signal exceeds any threshold.
//
// [Next] calls it with scale 1 to decide escalation and with scale
// 1-hysteresis to decide recovery.
func (t *Table) Recommend(s Sample, scale float64) (index int, why Trigger, ok bool) {
	for i := len(t.levels) - 1; i >= 1; i-- {
		if why, ok := t.exceeds(s, i, scale); ok {
			return i, why, true
		}
	}
	return 0, Trigger{}, false
}

// exceeds returns the first signal with a value strictly above level i's
// threshold for it times scale.
func (t *Table) exceeds(s Sample, i int, scale float64) (Trigger, bool) {
	l := t.levels[i]
	for _, sig := range t.signals {
		th, has := l.Threshold(sig)
		v, hasValue := s.Value(sig)
		if !has || !hasValue {
			continue
		}
		if limit := th * scale; v > limit {
			why := Trigger{Signal: sig, Value: v, Threshold: limit, Level: l.Name}
			switch sig {
			case Latency:
				why.Label = "latency " + QuantileLabel(t.quantile)
			case ErrorRate:
				why.Label, why.Note = s.ErrorRateLabel, s.ErrorRateNote
			}
			return why, true
		}
	}
	return Trigger{}, false
}

// triggerAt is the signal of s that exceeds level i's threshold, when one
// does: the reason of a step the admission law stopped at level i.
func (t *Table) triggerAt(s Sample, i int) (Trigger, bool) {
	if i <= 0 || i >= len(t.levels) {
		return Trigger{}, false
	}
	return t.exceeds(s, i, 1)
}

// Rules are the tunables of the level machine; the zero value escalates
// at once, recovers at once, never lets a blind signal hold, refuses every
// override (MaxOverrideTTL 0) and runs the graduated admission law.
type Rules struct {
	// MinimumLevelDuration is the dwell before each one-level step down.
	MinimumLevelDuration time.Duration
	// EscalationDelay is how long the level must have been held before
	// escalating.
	EscalationDelay time.Duration
	// EscalateAfter is the number of consecutive ticks that must ask for a
	// higher level (0 and 1 both mean one).
	EscalateAfter int
	// Hysteresis scales every threshold by (1 - Hysteresis) for recovery.
	Hysteresis float64
	// BlindHold is how long a warming or failed signal may hold recovery
	// while another signal can see (0: it never holds).
	BlindHold time.Duration
	// ManualOnly computes the recommendation but never moves the level.
	ManualOnly bool
	// RecoveryJitter bounds the recovery draw r: a machine input's Jitter
	// is clamped to [0, RecoveryJitter).
	RecoveryJitter float64
	// MaxOverrideTTL is the longest override ttl; a restored or fleet
	// override is clamped to it.
	MaxOverrideTTL time.Duration
	// MinThroughput is the least number of observations the error window
	// and a report's latencies or outcomes need to be judged.
	MinThroughput int64
	// Shadow publishes with "shadow": levels move by the table rule, and
	// the partial admission is the law's open-loop estimate.
	Shadow bool
	// Admission is the admission mode; "" is AdmissionGraduated.
	Admission AdmissionMode
}

// Auto is the automatic level and what the rules remember between ticks.
// The zero value is Normal, entered at the zero time, with every signal
// seen at the zero time; a controller sets Since and Seen to its start.
type Auto struct {
	// Level is the automatic level's index.
	Level int
	// Since is when Level was entered: the dwell and escalation_delay
	// clocks. A controller that published Level later (after an override)
	// moves it forward, so no step down comes before a published
	// earliest_recovery_at.
	Since time.Time
	// Recommended is the level the last sample asked for.
	Recommended int
	// JitterR is this level's recovery jitter draw r, in [0,
	// recovery_jitter): a step down waits MinimumLevelDuration x (1 + r),
	// so replicas do not readmit low-priority traffic in lockstep. The
	// caller draws it when a level is entered or an override ends (Next is
	// pure: it never draws).
	JitterR float64
	// NotBefore, when set, is the earliest a step down may come: after an
	// override ends, MinimumLevelDuration x r from its end.
	NotBefore time.Time
	// Seen is, per signal, the last time it was available, or when it was
	// (re)created: the blind clock of DESIGN.md "Unknown is not healthy".
	// A signal missing from it has been blind since Since. Next never
	// modifies the map it is given: it returns a new one when it changes.
	Seen map[Signal]time.Time

	streak    int // consecutive ticks asking for more than Level
	streakMin int // the lowest level those ticks asked for
}

// Move is what one tick did to the automatic level: From == To when it
// stayed.
type Move struct {
	From, To int
	Reason   string
}

// Moved reports whether the level changed.
func (m Move) Moved() bool { return m.From != m.To }

// Next applies one health check's sample at now to the automatic level.
// It is a pure function of its arguments: the controller and `degraded
// replay` run exactly this code. The rules, in order:
//
//   - Escalation: when the sample asks for more than a.Level on
//     EscalateAfter consecutive ticks and a.Level has been held for
//     EscalationDelay, jump to the lowest level asked for over those ticks.
//     Every signal with a value counts, warming ones included.
//   - Recovery: otherwise, when the sample with every threshold scaled by
//     (1 - Hysteresis) asks for less than a.Level, a.Level has been held for
//     MinimumLevelDuration x (1 + a.JitterR) (and a.NotBefore has passed;
//     see RecoveryAt), and no blind signal holds it, step down exactly
//     one level. A warming or failed signal with a threshold at a.Level or
//     above holds it until it has been blind for BlindHold; after that it
//     stops holding only while another signal with such a threshold is
//     available, and the reason names it. So with BlindHold > 0 a sample in
//     which every such signal is warming or failed never steps down;
//     absent and off signals never hold (low traffic is not an incident),
//     and with BlindHold 0 nothing blind holds.
//
// With ManualOnly the recommendation is computed but the level never moves.
func Next(a Auto, t *Table, s Sample, now time.Time, r Rules) (Auto, Move) {
	a.Seen = seen(a.Seen, s, now)
	rec, why, _ := t.Recommend(s, 1)
	a.Recommended = rec
	m := Move{From: a.Level, To: a.Level}
	if r.ManualOnly {
		a.streak = 0
		return a, m
	}
	if rec > a.Level {
		if a.streak == 0 || rec < a.streakMin {
			a.streakMin = rec
		}
		a.streak++
		if a.streak >= max(r.EscalateAfter, 1) && now.Sub(a.Since) >= r.EscalationDelay {
			a.streak = 0
			a.Level, a.Since = a.streakMin, now
			m.To, m.Reason = a.Level, why.String()
		}
		return a, m
	}
	a.streak = 0
	down, _, _ := t.Recommend(s.forRecovery(), 1-r.Hysteresis)
	if down >= a.Level || now.Before(a.RecoveryAt(r)) {
		return a, m
	}
	held, ignored := holders(a, t, s, now, r)
	if held {
		return a, m
	}
	from := t.Level(a.Level).Name
	a.Level, a.Since = a.Level-1, now
	m.To, m.Reason = a.Level, RecoveryReason(from, r.Hysteresis, ignored...)
	return a, m
}

// RecoveryAt is the earliest moment the rules let a.Level step down: the
// dwell, stretched by the jitter draw, from Since, and not before
// NotBefore.
func (a Auto) RecoveryAt(r Rules) time.Time {
	at := a.Since.Add(time.Duration(float64(r.MinimumLevelDuration) * (1 + a.JitterR)))
	if a.NotBefore.After(at) {
		return a.NotBefore
	}
	return at
}

// seen returns the blind clocks after a sample at now: every available
// signal was seen now. It returns a new map when it changes anything.
func seen(old map[Signal]time.Time, s Sample, now time.Time) map[Signal]time.Time {
	var out map[Signal]time.Time
	for sig, st := range s.States {
		if st != Available {
			continue
		}
		if out == nil {
			out = make(map[Signal]time.Time, len(old)+len(s.States))
			maps.Copy(out, old)
		}
		out[sig] = now
	}
	if out == nil {
		return old
	}
	return out
}

// holders decides whether blind signals hold the automatic level; see Next.
func holders(a Auto, t *Table, s Sample, now time.Time, r Rules) (held bool, ignored []BlindSignal) {
	l := a.Level
	for _, sig := range t.signals {
		st := s.State(sig)
		if !st.Blind() || !t.ThresholdFrom(sig, l) {
			continue
		}
		since, ok := a.Seen[sig]
		if !ok {
			since = a.Since
		}
		blindFor := now.Sub(since)
		if r.BlindHold > 0 && blindFor < r.BlindHold {
			return true, nil
		}
		if r.BlindHold > 0 && !anotherSees(t, s, sig, l) {
			return true, nil
		}
		ignored = append(ignored, BlindSignal{Signal: sig, State: st, For: blindFor})
	}
	return false, ignored
}

// anotherSees reports whether a signal other than sig, with a threshold at
// level l or above, is available.
func anotherSees(t *Table, s Sample, sig Signal, l int) bool {
	for _, o := range t.signals {
		if o != sig && s.State(o) == Available && t.ThresholdFrom(o, l) {
			return true
		}
	}
	return false
}

// RecoveryReason is the reason recorded when the level steps down from
// the named level, e.g. "recovered: all signals below Moderate thresholds
// less 10% hysteresis". Blind signals that were ignored because another
// signal could see are named after it: "recovered: all available signals
// below Major thresholds less 10% hysteresis; cpu failed for 5m3s".
func RecoveryReason(from string, hysteresis float64, ignored ...BlindSignal) string {
	if len(ignored) == 0 {
		return fmt.Sprintf("recovered: all signals below %s thresholds less %s%% hysteresis", from, formatNumber(hysteresis*100))
	}
	names := make([]string, len(ignored))
	for i, b := range ignored {
		names[i] = b.String()
	}
	return fmt.Sprintf("recovered: all available signals below %s thresholds less %s%% hysteresis; %s",
		from, formatNumber(hysteresis*100), strings.Join(names, ", "))
}
