package controller

import (
	"fmt"
	"strings"
	"time"

	"github.com/degraded/degraded/levels"
)

// evaluate applies one health check's sample and returns the history
// entries it made. An override whose ExpiresAt has passed ends first:
// automatic control resumes from the level that was published, keeping its
// dwell clock. Then the pure rules of [levels.Next] move the automatic
// level, and the published level follows it unless an override decides.
// c.mu must be held.
func (c *Controller) evaluate(now time.Time, s levels.Sample) []Transition {
	var moves []Transition
	if c.ovr != nil && !now.Before(c.ovrEnds) {
		moves = append(moves, c.endOverride(now, "override expired: "+c.ovr.Reason))
	}
	moves = append(moves, c.expireFleet(now)...)
	c.ready = true
	c.signals = s
	c.samples = append(c.samples, s)
	keep := min(SamplesLimit, max(1, int(SamplesSpan/c.opts.HealthCheckInterval)))
	if len(c.samples) > keep {
		c.samples = append(c.samples[:0], c.samples[len(c.samples)-keep:]...)
	}
	return append(moves, c.moveAuto(now, s, levels.Next)...)
}

// rule is one of the pure rules that move the automatic level:
// [levels.Next] at a health check, [levels.Event] at an event.
type rule func(levels.Auto, *levels.Table, levels.Sample, time.Time, levels.Rules) (levels.Auto, levels.Move)

// moveAuto applies next to the automatic level, its dwell starting at
// dwellStart. A new automatic level draws its recovery jitter, and the
// published level follows it unless an override decides: the history
// entry that made, if any, is returned. c.mu must be held.
func (c *Controller) moveAuto(now time.Time, s levels.Sample, next rule) []Transition {
	c.auto.Since = c.dwellStart()
	var m levels.Move
	c.auto, m = next(c.auto, c.opts.Table, s, now, c.opts.rules())
	if !m.Moved() {
		return nil
	}
	c.auto.JitterR, c.auto.NotBefore = c.drawJitter(), time.Time{}
	if t, ok := c.commit(now, SourceAuto, m.Reason, false); ok {
		return []Transition{t}
	}
	return nil
}

// recoveryAt is the earliest automatic step down: the jittered dwell from
// dwellStart, and not before the auto level's NotBefore. c.mu must be held.
func (c *Controller) recoveryAt() time.Time {
	a := c.auto
	a.Since = c.dwellStart()
	return a.RecoveryAt(c.opts.rules())
}

// drawJitter draws a level's recovery jitter r, uniform in [0,
// RecoveryJitter).
func (c *Controller) drawJitter() float64 {
	if c.opts.RecoveryJitter <= 0 {
		return 0
	}
	return c.opts.RecoveryJitter * c.opts.Rand()
}

// dwellStart is when the automatic level's dwell began. While the
// automatic level is the published one, it is never before the published
// level's since: no step down comes before the earliest_recovery_at that
// the state published, whatever overrides came and went.
func (c *Controller) dwellStart() time.Time {
	if c.pub == c.auto.Level && c.since.After(c.auto.Since) {
		return c.since
	}
	return c.auto.Since
}

// published returns the level the automatic level and the overrides
// give, layered auto -> fleet -> local (see layered).
func (c *Controller) published() int {
	level, _, _, _ := c.layered()
	return level
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
	m := Transition{Sequence: c.seq, From: from, To: c.opts.Table.Level(c.pub).Name, Source: source, Reason: reason, Actor: ActorDaemon, At: now.UTC()}
	c.history = append(c.history, m)
	if len(c.history) > HistoryLimit {
		c.history = append(c.history[:0], c.history[len(c.history)-HistoryLimit:]...)
	}
	return m
}

// byActor names actor as the author of the newest history entry, m. c.mu
// must be held.
func (c *Controller) byActor(m Transition, actor string) Transition {
	if actor == "" {
		actor = ActorAnonymous
	}
	m.Actor = actor
	c.history[len(c.history)-1].Actor = actor
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
		Recommended:       t.Level(c.auto.Recommended).Name,
		Reason:            c.reason,
		Since:             c.since.UTC(),
		Sequence:          c.seq,
		Shadow:            c.opts.Shadow,
		Signals:           c.signals,
	}
	if c.ovr != nil {
		o := *c.ovr
		st.Override = &o
	}
	_, source, decider, deciderIndex := c.layered()
	st.Source = source
	st.Fleet = c.fleetState()
	// earliest_recovery_at: none at Normal; the override's expiry while it
	// holds the level (or the end of the dwell, if later, when the
	// automatic level is the same); none when only an override could lower
	// the level; otherwise the end of the dwell.
	switch {
	case c.pub == 0:
	case decider != nil:
		at := decider.ExpiresAt.UTC()
		if dwell := c.recoveryAt().UTC(); deciderIndex == c.auto.Level && !c.opts.ManualOnly && dwell.After(at) {
			at = dwell
		}
		st.EarliestRecoveryAt = &at
	case c.opts.ManualOnly:
	default:
		at := c.recoveryAt().UTC()
		st.EarliestRecoveryAt = &at
	}
	st.Blind = c.signals.Blind()
	st.JitterR = c.auto.JitterR
	return st
}

// docKey is what clients act on in a state document: a change of any of
// these is a new sequence (signals and recommended travel in sample events).
type docKey struct {
	level, source, features, override, fleet string
	threshold                                int
	recovery                                 time.Time
	shadow                                   bool
}

func keyOf(st *State) docKey {
	k := docKey{level: st.Level, source: st.Source, threshold: st.PriorityThreshold, features: strings.Join(st.DisabledFeatures, "\x00"), shadow: st.Shadow}
	if st.EarliestRecoveryAt != nil {
		k.recovery = *st.EarliestRecoveryAt
	}
	if o := st.Override; o != nil {
		k.override = fmt.Sprint(*o)
	}
	if f := st.Fleet; f != nil && f.Override != nil {
		k.fleet = fmt.Sprint(*f.Override)
	}
	return k
}
