package controller

import (
	"fmt"
	"time"

	"github.com/degraded/degraded/levels"
)

// SourceFleet: the fleet override decided (fleet mode).
const SourceFleet = "fleet"

// FleetInfo is what the controller shows of fleet mode in the state
// document. Connected is called when a document is built and must not
// block (an atomic load).
type FleetInfo struct {
	Name, Instance string
	Connected      func() bool
}

// FleetState is the state document's "fleet" object; absent when fleet
// mode is off.
type FleetState struct {
	Name      string         `json:"name"`
	Instance  string         `json:"instance"`
	Connected bool           `json:"connected"`
	Override  *FleetOverride `json:"override"`
}

// FleetOverride is the fleet layer's override: an Override with the ttl
// it was set for and the etcd mod_revision that wrote it.
type FleetOverride struct {
	Override
	TTL         time.Duration `json:"-"`
	ModRevision int64         `json:"mod_revision"`
}

// FleetUpdate is one change of the fleet override as etcd holds it at
// Revision: Override nil means none. Expired says the key went away by
// its lease rather than by a DELETE.
type FleetUpdate struct {
	Override *Override
	TTL      time.Duration
	Revision int64
	Expired  bool
	// Reset says etcd's revision went back (a restored or new cluster):
	// the remembered revision is forgotten and this update is the truth.
	Reset bool
}

// fleetLayer is the fleet override between the automatic level and the
// local override. Guarded by Controller.mu.
type fleetLayer struct {
	ovr   *FleetOverride
	index int
	ends  time.Time // ExpiresAt, with the monotonic reading when set here
	rev   int64     // the newest revision applied: older and equal ones are ignored
}

// ApplyFleet applies a fleet override update at once: set, replaced or
// ended, with one history entry (source fleet), saved before it returns
// (a failed save wraps ErrNotSaved). An update whose Revision is not newer
// than the last applied one changes nothing: the same mod_revision never
// adds a second entry. An override naming a level the table lacks wraps
// ErrInvalidOverride and is not applied.
func (c *Controller) ApplyFleet(u FleetUpdate) (*State, error) {
	c.mu.Lock()
	if u.Revision <= c.fleet.rev {
		st := c.state.Load()
		c.mu.Unlock()
		return st, nil
	}
	now := time.Now()
	var m Transition
	switch {
	case u.Override == nil && c.fleet.ovr == nil:
		c.fleet.rev = u.Revision
		st := c.state.Load()
		c.mu.Unlock()
		return st, nil
	case u.Override == nil:
		c.fleet.rev = u.Revision
		what := "cleared"
		if u.Expired || !now.Before(c.fleet.ends) {
			what = "expired"
		}
		m = c.endFleet(now, "fleet override "+what+": "+c.fleet.ovr.Reason)
	default:
		idx, err := c.opts.Table.Index(u.Override.Level)
		if err != nil || (u.Override.Mode != ModePin && u.Override.Mode != ModeFloor) {
			c.mu.Unlock()
			return nil, fmt.Errorf("%w: fleet override of revision %d: level %q, mode %q", ErrInvalidOverride, u.Revision, u.Override.Level, u.Override.Mode)
		}
		c.fleet.rev = u.Revision
		if !now.Before(u.Override.ExpiresAt) {
			// Already over by this instance's clock: nothing to apply.
			st := c.state.Load()
			c.mu.Unlock()
			return st, nil
		}
		if c.ovr == nil && c.fleet.ovr == nil {
			c.auto.Level, c.auto.Since = c.pub, c.since
		}
		o := *u.Override
		o.Level = c.opts.Table.Level(idx).Name
		c.fleet.ovr = &FleetOverride{Override: o, TTL: u.TTL, ModRevision: u.Revision}
		c.fleet.index = idx
		c.fleet.ends = now.Add(time.Until(o.ExpiresAt))
		reason := fmt.Sprintf("fleet override set: %s %s for %s: %s", o.Mode, o.Level, u.TTL, o.Reason)
		m, _ = c.commit(now, SourceFleet, reason, true)
	}
	st := c.publishLocked(now, SourceFleet, m.Reason)
	c.mu.Unlock()
	return st, c.announce([]Transition{m}, true)
}

// FleetOverride returns the fleet override in force, or nil.
func (c *Controller) FleetOverride() *FleetOverride {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fleet.ovr == nil {
		return nil
	}
	o := *c.fleet.ovr
	return &o
}

// endFleet removes the fleet override; like endOverride, automatic
// control takes over from the published level. c.mu must be held.
func (c *Controller) endFleet(now time.Time, reason string) Transition {
	if c.ovr == nil {
		c.auto = c.resumeAuto(now)
	}
	c.fleet.ovr = nil
	m, _ := c.commit(now, SourceFleet, reason, true)
	return m
}

// expireFleet ends a fleet override whose expires_at has passed by this
// instance's clock, at a health check. c.mu must be held.
func (c *Controller) expireFleet(now time.Time) []Transition {
	if c.fleet.ovr == nil || now.Before(c.fleet.ends) {
		return nil
	}
	return []Transition{c.endFleet(now, "fleet override expired: "+c.fleet.ovr.Reason)}
}

// layered is the published level the layers give, auto -> fleet -> local
// (a pin replaces the level below it, a floor takes the max), the source
// of the layer that set it, and the override deciding, if any.
func (c *Controller) layered() (level int, source string, decider *Override, deciderIndex int) {
	var fleet, local *levels.Layer
	if f := c.fleet.ovr; f != nil {
		fleet = &levels.Layer{Index: c.fleet.index, Pin: f.Mode == ModePin}
	}
	if o := c.ovr; o != nil {
		local = &levels.Layer{Index: c.ovrIndex, Pin: o.Mode == ModePin}
	}
	level, by := levels.Layered(c.auto.Level, fleet, local)
	switch by {
	case 1:
		return level, SourceFleet, &c.fleet.ovr.Override, level
	case 2:
		return level, SourceOverride, c.ovr, level
	}
	return level, SourceAuto, nil, 0
}

// fleetState is the document's fleet object, nil when fleet mode is off.
// c.mu must be held.
func (c *Controller) fleetState() *FleetState {
	fi := c.opts.Fleet
	if fi == nil {
		return nil
	}
	fs := &FleetState{Name: fi.Name, Instance: fi.Instance}
	if fi.Connected != nil {
		fs.Connected = fi.Connected()
	}
	if c.fleet.ovr != nil {
		o := *c.fleet.ovr
		fs.Override = &o
	}
	return fs
}

// restoreFleet adopts the saved fleet override: honoured until its
// expires_at (the first health check ends one already past it), never
// beyond MaxOverrideTTL from now. c.mu must be held.
func (c *Controller) restoreFleet(now time.Time, p *Persisted) {
	f := p.FleetOverride
	if f == nil {
		return
	}
	c.fleet.rev = f.ModRevision
	idx, err := c.opts.Table.Index(f.Level)
	if err != nil {
		return
	}
	o := *f
	o.Override = c.restoredOverride(f.Override, now)
	c.fleet.ovr, c.fleet.index, c.fleet.ends = &o, idx, o.ExpiresAt
}

// FleetErrorRate is the fleet's error window (error_rate_scope: fleet).
type FleetErrorRate interface {
	ErrorRate() FleetWindow
}

// FleetWindow is the fleet's error window as this instance last saw it:
// the aggregate's sums over the live instances' windows and how many
// instances they cover. Local, when set, says why the local window is used
// instead ("fleet unreachable", "fleet aggregate stale").
type FleetWindow struct {
	Attempts, Failures int64
	Instances          int
	Local              string
}

// fleetWindow returns the window the error rate is computed from: the
// fleet's when fleet is set and reachable, else the local attempts and
// failures; it notes which in sample for the reason.
func fleetWindow(fleet FleetErrorRate, sample *levels.Sample, attempts, failures int64) (int64, int64) {
	if fleet == nil {
		return attempts, failures
	}
	w := fleet.ErrorRate()
	if w.Local != "" {
		sample.ErrorRateNote = " (local: " + w.Local + ")"
		return attempts, failures
	}
	sample.ErrorRateLabel, sample.ErrorRateNote = "fleet error_rate", fmt.Sprintf(" over %d instances", w.Instances)
	return w.Attempts, w.Failures
}
