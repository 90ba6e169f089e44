package controller

import (
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
//   - Recovery: otherwise, when the sample with every threshold scaled by
//     (1 - Hysteresis) asks for less than the automatic level and that level
//     has been held for MinimumLevelDuration, step down exactly one level.
//
// With ManualOnly the recommendation is computed and published but the
// automatic level never moves. c.mu must be held.
func (c *Controller) evaluate(now time.Time, s levels.Sample) []Transition {
	var moves []Transition
	if c.ovr != nil && !now.Before(c.ovrEnds) {
		moves = append(moves, c.endOverride(now, "override expired: "+c.ovr.Reason))
	}
	c.ready = true
	c.signals = Signals{
		CPUPercent: s.CPUPercent, MemoryPercent: s.MemoryPercent, ErrorRatePercent: s.ErrorRatePercent,
		WindowAttempts: s.WindowAttempts, WindowFailures: s.WindowFailures,
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
	if down < c.auto && now.Sub(c.autoSince) >= c.opts.MinimumLevelDuration {
		from := t.Level(c.auto).Name
		c.setAuto(now, c.auto-1)
		if m, ok := c.commit(now, SourceAuto, levels.RecoveryReason(from, c.opts.Hysteresis), false); ok {
			moves = append(moves, m)
		}
	}
	return moves
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
	// holds the level; otherwise the end of the dwell.
	switch {
	case c.pub == 0:
	case decides:
		at := c.ovr.ExpiresAt.UTC()
		st.EarliestRecoveryAt = &at
	default:
		at := c.since.Add(c.opts.MinimumLevelDuration).UTC()
		st.EarliestRecoveryAt = &at
	}
	return st
}
