package controller

import (
	"errors"
	"time"
)

// Reconfigure replaces the controller's options, for a config reload. The
// Store, Observer and Logger given to New are kept. Levels in force are
// mapped by name onto the new table; a level that no longer exists is
// clamped to the most severe remaining one, which is recorded as a
// transition if it moves the published level.
func (c *Controller) Reconfigure(o Options) error {
	if o.Table == nil {
		return errors.New("controller: no level table")
	}
	o = o.withDefaults()
	c.mu.Lock()
	old := c.opts.Table
	c.opts = o
	t := o.Table
	c.auto = lookup(t, old.Level(c.auto).Name, c.auto)
	c.recommended = t.Clamp(c.recommended)
	if c.ovr != nil {
		c.ovrIndex = lookup(t, c.ovr.Level, c.ovrIndex)
		c.ovr.Level = t.Level(c.ovrIndex).Name
	}
	// The published index refers to the old table: map it by name.
	name := old.Level(c.pub).Name
	c.pub = lookup(t, name, c.pub)
	var moves []Transition
	if next := c.published(); next != c.pub || t.Level(next).Name != name {
		now := time.Now()
		c.pub, c.since = next, now
		reason := "config reload"
		if _, err := t.Index(name); err != nil {
			reason = "config reload: level " + name + " no longer configured"
		}
		moves = append(moves, c.record(now, name, SourceAuto, reason))
	}
	st := c.publishLocked()
	c.mu.Unlock()
	select {
	case c.reload <- struct{}{}:
	default:
	}
	_ = c.announce(moves, st, len(moves) > 0) // a failed save is logged and retried on the next tick
	return nil
}
