package controller

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/degraded/degraded/levels"
)

// evaluate applies one health check's sample to the automatic level and
// returns the history entries it made. The rules, in order:
//
//   - An override whose ExpiresAt has passed ends; automatic control resumes
//     from the level that was published, keeping its dwell clock.
//   - Escalation: when the sample asks for more than the automatic level on
//     EscalateAfter consecutive ticks and that level has been held for
//     EscalationDelay, jump to the lowest level asked for over those ticks.
//     Every signal with a value counts, warming ones included.
//   - Recovery: otherwise, when the sample with every threshold scaled by
//     (1 - Hysteresis) asks for less than the automatic level, that level
//     has been held for MinimumLevelDuration (from dwellStart), and no blind
//     signal holds it (see holders), step down exactly one level.
//
// With ManualOnly the recommendation is computed and published but the
// automatic level never moves. c.mu must be held.
func (c *Controller) evaluate(now time.Time, s levels.Sample, states [levels.NumSignals]levels.SignalState) []Transition {
	var moves []Transition
	if c.ovr != nil && !now.Before(c.ovrEnds) {
		moves = append(moves, c.endOverride(now, "override expired: "+c.ovr.Reason))
	}
	c.ready = true
	c.last = s
	seeing := false
	for _, sig := range levels.AllSignals {
		if states[sig] == levels.Available {
			c.seen[sig] = now
		}
		seeing = seeing || s.Value(sig) != nil
	}
	c.blind = !seeing && slices.ContainsFunc(states[:], levels.SignalState.Blind)
	c.signals = Signals{
		CPUPercent: s.CPUPercent, MemoryPercent: s.MemoryPercent, ErrorRatePercent: s.ErrorRatePercent,
		WindowAttempts: s.WindowAttempts, WindowFailures: s.WindowFailures,
		Status: make(map[string]string, levels.NumSignals),
	}
	for _, sig := range levels.AllSignals {
		c.signals.Status[sig.String()] = states[sig].String()
	}
	at := s.SampledAt
	c.signals.SampledAt = &at
	c.samples = append(c.samples, c.signals)
	keep := min(SamplesLimit, max(1, int(SamplesSpan/c.opts.HealthCheckInterval)))
	if len(c.samples) > keep {
		c.samples = append(c.samples[:0], c.samples[len(c.samples)-keep:]...)
	}

	t := c.opts.Table
	rec, why, _ := t.Recommend(s, 1)
	c.recommended = rec
	if c.opts.ManualOnly {
		c.pending = 0
		return moves
	}
	if rec > c.auto {
		if c.pending == 0 || rec < c.pendingMin {
			c.pendingMin = rec
		}
		c.pending++
		if c.pending >= c.opts.EscalateAfter && now.Sub(c.autoSince) >= c.opts.EscalationDelay {
			c.pending = 0
			c.setAuto(now, c.pendingMin)
			if m, ok := c.commit(now, SourceAuto, why.String(), false); ok {
				moves = append(moves, m)
			}
		}
		return moves
	}
	c.pending = 0
	down, _, _ := t.Recommend(s, 1-c.opts.Hysteresis)
	if down >= c.auto || now.Sub(c.dwellStart()) < c.opts.MinimumLevelDuration {
		return moves
	}
	held, ignored := c.holders(now, states)
	if held {
		return moves
	}
	from := t.Level(c.auto).Name
	c.setAuto(now, c.auto-1)
	if m, ok := c.commit(now, SourceAuto, levels.RecoveryReason(from, c.opts.Hysteresis, ignored...), false); ok {
		moves = append(moves, m)
	}
	return moves
}

// holders decides whether blind signals hold the automatic level L: each
// warming or failed signal with a threshold at L or above holds it, until
// it has been blind for BlindHold; after that it is ignored (and returned,
// for the reason) but only while another signal with such a threshold is
// available. A controller that sees nothing never steps down by itself.
// BlindHold 0 means blind signals never hold. c.mu must be held.
func (c *Controller) holders(now time.Time, states [levels.NumSignals]levels.SignalState) (held bool, ignored []levels.BlindSignal) {
	t, l := c.opts.Table, c.auto
	for _, sig := range levels.AllSignals {
		if !states[sig].Blind() || !t.ThresholdFrom(sig, l) {
			continue
		}
		blindFor := now.Sub(c.seen[sig])
		if c.opts.BlindHold > 0 && blindFor < c.opts.BlindHold {
			return true, nil
		}
		other := slices.ContainsFunc(levels.AllSignals, func(o levels.Signal) bool {
			return o != sig && states[o] == levels.Available && t.ThresholdFrom(o, l)
		})
		if c.opts.BlindHold > 0 && !other {
			return true, nil
		}
		ignored = append(ignored, levels.BlindSignal{Signal: sig, State: states[sig], For: blindFor})
	}
	return false, ignored
}

// dwellStart is when the automatic level's dwell began. While the
// automatic level is the published one, it is never before the published
// level's since: no step down comes before the earliest_recovery_at that
// the state published, whatever overrides came and went.
func (c *Controller) dwellStart() time.Time {
	if c.pub == c.auto && c.since.After(c.autoSince) {
		return c.since
	}
	return c.autoSince
}

func (c *Controller) setAuto(now time.Time, level int) {
	c.auto = level
	c.autoSince = now
}

// published returns the level the override and the automatic level give.
func (c *Controller) published() int {
	switch {
	case c.ovr == nil:
		return c.auto
	case c.ovr.Mode == ModePin:
		return c.ovrIndex
	default:
		return max(c.auto, c.ovrIndex)
	}
}

// overrideDecides reports whether the override, not the automatic level,
// holds the published level.
func (c *Controller) overrideDecides() bool {
	return c.ovr != nil && (c.ovr.Mode == ModePin || c.ovrIndex >= c.auto)
}

// commit publishes the level the current inputs give. It records one
// history entry and one sequence step when the published level changed or
// overrideChanged is set, and reports whether it did.
func (c *Controller) commit(now time.Time, source, reason string, overrideChanged bool) (Transition, bool) {
	next := c.published()
	if next == c.pub && !overrideChanged {
		return Transition{}, false
	}
	from := c.opts.Table.Level(c.pub).Name
	if next != c.pub {
		c.pub = next
		c.since = now
	}
	return c.record(now, from, source, reason), true
}

// record appends a history entry from the named level to the published
// one and advances the sequence.
func (c *Controller) record(now time.Time, from, source, reason string) Transition {
	c.seq++
	c.reason = reason
	m := Transition{Sequence: c.seq, From: from, To: c.opts.Table.Level(c.pub).Name, Source: source, Reason: reason, At: now.UTC()}
	c.history = append(c.history, m)
	if len(c.history) > HistoryLimit {
		c.history = append(c.history[:0], c.history[len(c.history)-HistoryLimit:]...)
	}
	return m
}

// build assembles the state document from the fields under c.mu.
func (c *Controller) build() *State {
	t := c.opts.Table
	l := t.Level(c.pub)
	st := &State{
		Level:             l.Name,
		Index:             c.pub,
		PriorityThreshold: l.PriorityThreshold,
		DisabledFeatures:  t.DisabledFeatures(c.pub),
		Source:            SourceAuto,
		Recommended:       t.Level(c.recommended).Name,
		Reason:            c.reason,
		Since:             c.since.UTC(),
		Sequence:          c.seq,
		Signals:           c.signals,
	}
	if c.ovr != nil {
		o := *c.ovr
		st.Override = &o
	}
	decides := c.overrideDecides()
	if decides {
		st.Source = SourceOverride
	}
	// earliest_recovery_at: none at Normal; the override's expiry while it
	// holds the level (or the end of the dwell, if later, when the
	// automatic level is the same); none when only an override could lower
	// the level; otherwise the end of the dwell.
	switch {
	case c.pub == 0:
	case decides:
		at := c.ovr.ExpiresAt.UTC()
		if dwell := c.dwellStart().Add(c.opts.MinimumLevelDuration).UTC(); c.ovrIndex == c.auto && !c.opts.ManualOnly && dwell.After(at) {
			at = dwell
		}
		st.EarliestRecoveryAt = &at
	case c.opts.ManualOnly:
	default:
		at := c.dwellStart().Add(c.opts.MinimumLevelDuration).UTC()
		st.EarliestRecoveryAt = &at
	}
	st.Blind = c.blind
	return st
}

// docKey is what clients act on in a state document: a change of any of
// these is a new sequence (signals and recommended travel in sample events).
type docKey struct {
	level, source, features, override string
	threshold                         int
	recovery                          time.Time
}

func keyOf(st *State) docKey {
	k := docKey{level: st.Level, source: st.Source, threshold: st.PriorityThreshold, features: strings.Join(st.DisabledFeatures, "\x00")}
	if st.EarliestRecoveryAt != nil {
		k.recovery = *st.EarliestRecoveryAt
	}
	if o := st.Override; o != nil {
		k.override = fmt.Sprint(*o)
	}
	return k
}
