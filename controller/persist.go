package controller

import (
	"errors"
	"fmt"
	"time"

	"github.com/degraded/degraded/levels"
)

// ErrNotSaved is wrapped by the error of a change that could not be
// written to the state file.
var ErrNotSaved = errors.New("state not saved")

// SequenceBlock is how many sequence numbers a save reserves: the state
// file records sequence + SequenceBlock as a ceiling, a start after an
// unclean shutdown resumes above it, and the controller never publishes
// past the ceiling it saved, so a sequence a reader has seen never names a
// different state after a restart. The next block is reserved when half
// of the current one is used.
const SequenceBlock = 1000

// maxSequence is the largest sequence a state file may hold: JSON readers
// that use float64 (JavaScript) lose integers above it.
const maxSequence = 1<<53 - 1

// reserveDue reports whether half of the reserved block is used, so a
// save should reserve the next one.
func (c *Controller) reserveDue() bool {
	r := &c.run
	return c.store != nil && r.seq+uint64(r.heldSteps)+SequenceBlock/2 >= r.ceiling
}

// save writes the published state to the store. clean marks the final
// save of a clean shutdown. A failed save is logged and retried on every
// health check until one succeeds; the state in memory stays in force
// meanwhile, and held changes are published once one succeeds.
func (c *Controller) save(clean bool) error {
	err := c.write(clean)
	switch {
	case err == nil:
		return nil
	case clean:
		c.log.Error("cannot save state at shutdown", "err", err)
	case c.logSaveError(err):
		c.log.Error("cannot save state; will retry on the next health check", "err", err, "failed_saves", c.run.failedSaves)
	}
	return fmt.Errorf("%w: %w", ErrNotSaved, err)
}

// write is save without its log, and its error is the store's (whose
// innermost cause logSaveError compares): New's first save, whose
// failure is the daemon's error at start, with no health check to retry
// it.
func (c *Controller) write(clean bool) error {
	if c.store == nil {
		return nil
	}
	r := &c.run
	p := c.persisted(r.m, r.seq+uint64(r.heldSteps), c.savedHistory(nil), clean)
	if err := c.store.Save(p); err != nil {
		c.saved(err)
		return err
	}
	c.saved(nil)
	r.dirty = false
	r.ceiling = p.SequenceCeiling
	r.capacityAt = capacityAt(p)
	if r.heldSteps > 0 {
		c.publish(time.Now(), levels.Output{})
	}
	return nil
}

// saveAhead saves the state a request would put in force, before it is:
// the machine next after out, its entries numbered as publish will number
// them. On success the reserved ceiling covers them.
func (c *Controller) saveAhead(next levels.Machine, now time.Time, out levels.Output) error {
	if c.store == nil {
		return nil
	}
	r := &c.run
	ts, seq := numbered(r.seq+uint64(r.heldSteps), now, out)
	p := c.persisted(next, seq, c.savedHistory(ts), false)
	if err := c.store.Save(p); err != nil {
		c.saved(err)
		c.log.Error("cannot save state; the change was not applied", "err", err)
		return fmt.Errorf("%w: %w", ErrNotSaved, err)
	}
	c.saved(nil)
	r.dirty = false
	r.ceiling = p.SequenceCeiling
	r.capacityAt = capacityAt(p)
	return nil
}

// capacityAt is the time of the capacity estimate p holds, zero without
// one.
func capacityAt(p *Persisted) time.Time {
	if p.Capacity == nil {
		return time.Time{}
	}
	return p.Capacity.At
}

// saved notes a save's outcome for the retry, the metric and the log.
func (c *Controller) saved(err error) {
	r := &c.run
	if err != nil {
		r.failedSaves++
	} else if r.unsaved {
		c.log.Info("state saved again", "failed_saves", r.failedSaves)
		r.failedSaves, r.saveErr, r.saveLog = 0, "", time.Time{}
	}
	r.unsaved = err != nil
	switch f := c.failure.Load(); {
	case err == nil:
		c.failure.Store(nil)
	case f == nil:
		c.failure.Store(&SaveFailure{Error: err.Error(), Since: time.Now()})
	default:
		c.failure.Store(&SaveFailure{Error: err.Error(), Since: f.Since})
	}
	if c.observer != nil {
		c.observer.SaveFailed(err != nil)
	}
}

// saveLogEvery is how often a save that keeps failing the same way is
// logged: it is retried on every health check.
const saveLogEvery = time.Minute

// logSaveError reports whether a failed save should be logged: a new
// cause (the innermost error: the temp file's name changes every time), or
// the same one a minute after it was last logged.
func (c *Controller) logSaveError(err error) bool {
	r := &c.run
	now := time.Now()
	cause := err
	for u := errors.Unwrap(cause); u != nil; u = errors.Unwrap(cause) {
		cause = u
	}
	if msg := cause.Error(); msg != r.saveErr || now.Sub(r.saveLog) >= saveLogEvery {
		r.saveErr, r.saveLog = msg, now
		return true
	}
	return false
}

// savedHistory is the history a save writes: the published entries, the
// held ones numbered as they will be, and more.
func (c *Controller) savedHistory(more []Transition) []Transition {
	r := &c.run
	c.mu.Lock()
	h := append([]Transition(nil), c.history...)
	c.mu.Unlock()
	seq := r.seq
	for _, t := range r.held {
		seq++
		t.Sequence = seq
		h = append(h, t)
	}
	h = append(h, more...)
	if len(h) > HistoryLimit {
		h = h[len(h)-HistoryLimit:]
	}
	return h
}

// persisted is the durable form of machine m published at seq.
func (c *Controller) persisted(m levels.Machine, seq uint64, history []Transition, clean bool) *Persisted {
	s := m.Saved()
	t := m.Config().Table
	idx, _ := t.Index(s.Level)
	auto, _ := t.Index(s.Auto)
	return &Persisted{
		Version: persistedVersion,
		Level:   s.Level, Index: idx, Since: s.Since, Reason: s.Reason,
		Auto: s.Auto, AutoIndex: auto, AutoSince: s.AutoSince,
		Sequence:        seq,
		SequenceCeiling: seq + SequenceBlock,
		CleanShutdown:   clean,
		Shadow:          s.Shadow,
		Admission:       s.Admission,
		Capacity:        s.Capacity,
		JitterR:         s.JitterR,
		NotBefore:       s.NotBefore,
		Levels:          s.Priorities,
		History:         history,
		Override:        s.Override,
		FleetOverride:   s.Fleet,
	}
}

// restore adopts a saved state (levels.Machine.Restore) and returns the
// entries it makes. A state that was not saved by a clean shutdown, or
// came from the previous copy, may be older than what readers saw, so it
// is republished above the reserved sequence ceiling with a restart entry.
func (c *Controller) restore(now time.Time, p *Persisted, fromPrev bool) []levels.Entry {
	r := &c.run
	r.seq = p.Sequence
	c.history = append([]Transition(nil), p.History...)
	if len(c.history) > HistoryLimit {
		c.history = c.history[len(c.history)-HistoryLimit:]
	}
	restart := ""
	if !p.CleanShutdown || fromPrev {
		restart = fmt.Sprintf("restored after unclean shutdown; changes after sequence %d may be lost", p.Sequence)
		r.seq = max(p.SequenceCeiling, p.Sequence)
	}
	entries, dropped := r.m.Restore(now, levels.Saved{Level: p.Level, Since: p.Since, Reason: p.Reason, Auto: p.Auto, AutoSince: p.AutoSince,
		JitterR: p.JitterR, NotBefore: p.NotBefore, Override: p.Override, Fleet: p.FleetOverride, Shadow: p.Shadow,
		Admission: p.Admission, Priorities: p.Levels, Capacity: p.Capacity}, restart)
	if dropped != nil {
		c.log.Error("saved state not restored in part", "err", dropped)
	}
	return entries
}
