package controller

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/degraded/degraded/levels"
)

// Reconfigure replaces the controller's options, for a config reload. The
// Store, Observer and Logger given to New are kept.
//
// A reload is not a tick: it maps the levels in force by name onto the new
// table, recomputes the recommendation from the last sample and
// republishes, but makes no automatic transition and counts nothing
// towards escalate_after or a dwell. A level that no longer exists maps to
// the least severe level whose priority threshold is at least the removed
// one's (else the most severe), recorded as a transition with source
// config. A table without the level the active override names is refused,
// and nothing changes. Samplers and the error window that are the same
// values as before keep their blind clocks; new ones start warming. Only
// one Check or Reconfigure runs at a time.
func (c *Controller) Reconfigure(o Options) error {
	if o.Table == nil {
		return errors.New("controller: no level table")
	}
	o = o.withDefaults()
	c.evalMu.Lock()
	defer c.evalMu.Unlock()
	c.mu.Lock()
	t, old := o.Table, c.opts
	if c.ovr != nil {
		if _, err := t.Index(c.ovr.Level); err != nil {
			c.mu.Unlock()
			return fmt.Errorf("the new levels drop %s, which the active override (%s %s: %s) names; clear the override first",
				c.ovr.Level, c.ovr.Mode, c.ovr.Level, c.ovr.Reason)
		}
	}
	now := time.Now()
	c.opts = o
	seen := maps.Clone(c.auto.Seen)
	if seen == nil {
		seen = map[levels.Signal]time.Time{}
	}
	for sig, pair := range map[levels.Signal][2]Sampler{levels.CPU: {old.CPU, o.CPU}, levels.Memory: {old.Memory, o.Memory}} {
		if pair[0] != pair[1] {
			seen[sig] = now
		}
	}
	for _, sig := range t.Signals() {
		if !old.Table.Custom(sig) && !sig.Builtin() {
			seen[sig] = now // a new custom signal starts blind now
		}
	}
	c.auto.Seen = seen
	if old.Errors != o.Errors || old.ErrorWindow != o.ErrorWindow {
		c.errSince = now
	}
	c.auto.Level, _ = t.Map(old.Table.Level(c.auto.Level).Name, old.Table.Level(c.auto.Level).PriorityThreshold)
	if c.ovr != nil {
		c.ovrIndex, _ = t.Index(c.ovr.Level)
		c.ovr.Level = t.Level(c.ovrIndex).Name
	}
	c.auto.Recommended, _, _ = t.Recommend(c.signals, 1)
	// The published index refers to the old table: map it by name.
	before := c.seq
	prev := old.Table.Level(c.pub)
	var found bool
	c.pub, found = t.Map(prev.Name, prev.PriorityThreshold)
	var moves []Transition
	reason := "config reload"
	if old.Shadow != o.Shadow {
		reason += ": " + modeChange(old.Shadow, o.Shadow)
	}
	if next := c.published(); next != c.pub || !found {
		c.pub, c.since = next, now
		if !found {
			reason = "config reload: level " + prev.Name + " no longer configured"
			if old.Shadow != o.Shadow {
				reason += "; " + modeChange(old.Shadow, o.Shadow)
			}
		}
		moves = append(moves, c.record(now, prev.Name, SourceConfig, reason))
	}
	st := c.publishLocked(now, SourceConfig, reason)
	c.mu.Unlock()
	c.recordLine(now, levels.TriggerReload, st, c.latencyCounts(o, now))
	select {
	case c.reload <- struct{}{}:
	default:
	}
	_ = c.announce(moves, st.Sequence != before) // a failed save is logged and retried on the next tick
	return nil
}

// modeChange describes a switch of mode for a history entry's reason:
// "mode enforce -> shadow".
func modeChange(from, to bool) string {
	return "mode " + modeName(from) + " -> " + modeName(to)
}

// modeName is the config value of mode for Options.Shadow.
func modeName(shadow bool) string {
	if shadow {
		return "shadow"
	}
	return "enforce"
}
