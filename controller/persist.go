package controller

import (
	"errors"
	"fmt"
	"time"
)

// recoveredFrom reports whether the store's last Load fell back to an
// older copy of the state (FileStore's state.json.prev).
func recoveredFrom(s Store) bool {
	r, ok := s.(interface{ Recovered() error })
	return ok && r.Recovered() != nil
}

// restore adopts a saved state. Levels are mapped by name onto the current
// table (a removed level maps by priority threshold, see levels.Table.Map),
// times in the future are clamped to now, and an override never outlives
// MaxOverrideTTL from now. A state that was not saved by a clean shutdown
// (or came from the previous copy) may be older than what readers saw, so
// it is republished at the reserved sequence ceiling + 1.
func (c *Controller) restore(now time.Time, p *Persisted, recovered bool) {
	t := c.opts.Table
	c.since, c.auto.Since = clampPast(p.Since, now), clampPast(p.AutoSince, now)
	c.auto.JitterR = min(max(p.JitterR, 0), c.opts.RecoveryJitter)
	if limit := now.Add(c.opts.MinimumLevelDuration); p.NotBefore.After(limit) {
		c.auto.NotBefore = limit // a clock that went back must not hold recovery longer than a dwell
	} else {
		c.auto.NotBefore = p.NotBefore
	}
	c.reason = p.Reason
	c.seq = p.Sequence
	c.history = append([]Transition(nil), p.History...)
	if len(c.history) > HistoryLimit {
		c.history = c.history[len(c.history)-HistoryLimit:]
	}
	c.auto.Level, _ = t.Map(p.Auto, p.priority(p.Auto))
	var removed []string
	pub, found := t.Map(p.Level, p.priority(p.Level))
	if !found {
		removed = append(removed, p.Level)
	}
	c.pub = pub
	if p.Override != nil {
		o := c.restoredOverride(*p.Override, now)
		idx, _ := t.Map(o.Level, p.priority(o.Level))
		o.Level = t.Level(idx).Name
		c.ovr, c.ovrIndex, c.ovrEnds = &o, idx, o.ExpiresAt
	}
	c.restoreFleet(now, p)
	if !p.CleanShutdown || recovered {
		n := p.Sequence
		c.seq = max(p.SequenceCeiling, p.Sequence)
		c.record(now, t.Level(c.pub).Name, SourceRestart, fmt.Sprintf("restored after unclean shutdown; changes after sequence %d may be lost", n))
	}
	if len(removed) > 0 || c.published() != c.pub {
		from := p.Level
		c.pub, c.since = c.published(), now
		c.record(now, from, SourceConfig, "config: level "+p.Level+" no longer configured")
	}
	if p.Shadow != c.opts.Shadow {
		c.record(now, t.Level(c.pub).Name, SourceConfig, "config: "+modeChange(p.Shadow, c.opts.Shadow))
	}
}

// restoredOverride is a saved override as a start adopts it: set no later
// than now (the clock may have gone back) and ending no later than
// MaxOverrideTTL from now. c.mu must be held.
func (c *Controller) restoredOverride(o Override, now time.Time) Override {
	o.SetAt = clampPast(o.SetAt, now)
	if limit := now.Add(c.opts.MaxOverrideTTL); o.ExpiresAt.After(limit) {
		o.ExpiresAt = limit.UTC()
	}
	return o
}

// clampPast returns t, or now if t lies in the future (the clock went back).
func clampPast(t, now time.Time) time.Time {
	if t.After(now) {
		return now
	}
	return t
}

// ErrNotSaved is wrapped by the error of a change that is in force but
// could not be written to the state file, so a restart would lose it.
var ErrNotSaved = errors.New("change in force but not saved")

// SequenceBlock is how many sequence numbers each save reserves: the state
// file records sequence + SequenceBlock as a ceiling, and a start after an
// unclean shutdown resumes above it, so a sequence a reader has seen never
// names a different state after a restart.
const SequenceBlock = 1000

// maxSequence is the largest sequence a state file may hold: JSON readers
// that use float64 (JavaScript) lose integers above it.
const maxSequence = 1<<53 - 1

// save writes the latest state to the store. Saves are serialised and each
// writes the state as it is when the save starts, so the file never goes
// back in time. clean marks the final save of a clean shutdown.
//
// A failed save is logged and retried on every health check until one
// succeeds; the state in memory stays in force meanwhile.
func (c *Controller) save(clean bool) error {
	if c.store == nil {
		return nil
	}
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	c.mu.Lock()
	p := c.persisted(clean)
	c.mu.Unlock()
	err := c.store.Save(p)
	c.unsaved.Store(err != nil)
	if err != nil {
		if clean {
			c.log.Error("cannot save state at shutdown", "err", err)
		} else {
			c.log.Error("cannot save state; will retry on the next health check", "err", err)
		}
		return fmt.Errorf("%w: %w", ErrNotSaved, err)
	}
	return nil
}

func (c *Controller) persisted(clean bool) *Persisted {
	t := c.opts.Table
	p := &Persisted{
		Version: persistedVersion,
		Level:   t.Level(c.pub).Name, Index: c.pub, Since: c.since, Reason: c.reason,
		Auto: t.Level(c.auto.Level).Name, AutoIndex: c.auto.Level, AutoSince: c.auto.Since,
		Sequence:        c.seq,
		SequenceCeiling: c.seq + SequenceBlock,
		CleanShutdown:   clean,
		Shadow:          c.opts.Shadow,
		JitterR:         c.auto.JitterR,
		NotBefore:       c.auto.NotBefore,
		Levels:          make(map[string]int, t.Len()),
		History:         append([]Transition(nil), c.history...),
	}
	for _, l := range t.Levels() {
		p.Levels[l.Name] = l.PriorityThreshold
	}
	if c.ovr != nil {
		o := *c.ovr
		p.Override = &o
	}
	if c.fleet.ovr != nil {
		o := *c.fleet.ovr
		p.FleetOverride = &o
	}
	return p
}
