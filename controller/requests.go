package controller

import (
	"errors"
	"fmt"
	"time"

	"github.com/degraded/degraded/levels"
)

// SetOverride replaces any active local override with r, effective at
// once, and returns the resulting state. The change is saved before it is
// in force: if the save fails, nothing changes and the error wraps
// ErrNotSaved. Errors about r wrap ErrInvalidOverride.
func (c *Controller) SetOverride(r OverrideRequest) (*State, error) {
	return c.request(func(now time.Time, m *levels.Machine) (levels.Output, levels.Line, error) {
		out, err := m.SetOverride(now, r)
		l := c.inputLine(now, levels.TriggerOverride, r.Actor)
		l.Request = &levels.LineRequest{Action: "set", Level: r.Level, Mode: string(r.Mode), TTL: r.TTL.String(), Reason: r.Reason}
		return out, l, err
	})
}

// ClearOverride ends the active local override at once, by actor (see
// Override.Actor), and returns the resulting state; with no override
// active it changes nothing. Automatic control resumes from the published
// level, keeping its dwell clock. Like SetOverride, the change is saved
// before it is in force, and a failed save changes nothing.
func (c *Controller) ClearOverride(actor string) (*State, error) {
	return c.request(func(now time.Time, m *levels.Machine) (levels.Output, levels.Line, error) {
		out := m.ClearOverride(now, actor, c.draw())
		l := c.inputLine(now, levels.TriggerOverride, actor)
		l.Request = &levels.LineRequest{Action: "clear"}
		return out, l, nil
	})
}

// request runs an override change on Run's goroutine: tried on a copy of
// the machine, saved, then put in force and published. An input that
// changes nothing answers the current state.
func (c *Controller) request(change func(now time.Time, m *levels.Machine) (levels.Output, levels.Line, error)) (*State, error) {
	var st *State
	var err error
	if e := c.do(func() {
		now := time.Now()
		next := c.run.m
		out, l, cerr := change(now, &next)
		if cerr != nil {
			st, err = nil, cerr
			return
		}
		if !out.Changed() {
			st = c.State()
			return
		}
		if serr := c.saveAhead(next, now, out); serr != nil {
			st, err = nil, serr
			return
		}
		c.run.m = next
		l = c.outcomeLine(l)
		c.record(l)
		c.publish(now, out)
		st = c.State()
	}); e != nil {
		return nil, e
	}
	return st, err
}

// ApplyFleet applies a fleet override update at once: set, replaced or
// ended, with one history entry (source fleet), then saves (a failed save
// wraps ErrNotSaved: the change is in force, as etcd holds it). An update
// whose revision is not newer than the last applied one changes nothing,
// unless u.Reset says etcd's revision went back. A fleet override this
// instance cannot apply (a level its table lacks, a bad reason) is refused
// with an error wrapping ErrInvalidOverride, one already expired by this
// instance's clock with one wrapping levels.ErrExpiredOverride; either way
// the fleet layer in force, which etcd no longer holds, is dropped.
func (c *Controller) ApplyFleet(u FleetUpdate) (*State, error) {
	var st *State
	var err error
	if e := c.do(func() {
		now := time.Now()
		out, aerr := c.run.m.ApplyFleet(now, u, c.draw())
		l := c.inputLine(now, levels.TriggerFleet, "")
		l.Fleet = &levels.LineFleet{Override: levels.LineOf(u.Override), Revision: u.Revision, Expired: u.Expired, Reset: u.Reset}
		if u.Override != nil {
			l.Actor, l.Fleet.TTL = u.Override.Actor, u.TTL.String()
		} else {
			l.Actor = u.Actor
		}
		c.changed(now, out, c.outcomeLine(l))
		st, err = c.State(), aerr
		if serr := c.saveErr(); serr != nil && aerr == nil && out.Changed() {
			err = serr
		}
	}); e != nil {
		return nil, e
	}
	return st, err
}

// Reconfigure replaces the controller's options, for a config reload by
// actor. The Store, Observer, Recorder and Logger given to New are kept.
// See levels.Machine.Reconfigure: a reload is not a tick, maps the levels
// in force by name onto the new table, refuses a table without the level
// an override in force names (nothing changes), and makes one history
// entry of any change of the document. Samplers and the error window that
// are the same values as before keep their blind clocks; new ones start
// warming.
func (c *Controller) Reconfigure(o Options, actor string) error {
	if o.Table == nil {
		return errors.New("controller: no level table")
	}
	o = o.withDefaults()
	var err error
	if e := c.do(func() { err = c.reconfigure(o, actor) }); e != nil {
		return e
	}
	return err
}

func (c *Controller) reconfigure(o Options, actor string) error {
	r := &c.run
	now := time.Now()
	old := r.opts
	var renewed []levels.Signal
	for sig, pair := range map[levels.Signal][2]Sampler{levels.CPU: {old.CPU, o.CPU}, levels.Memory: {old.Memory, o.Memory}} {
		if pair[0] != pair[1] {
			renewed = append(renewed, sig)
		}
	}
	out, err := r.m.Reconfigure(now, o.machineConfig(), actor, renewed)
	if err != nil {
		return err
	}
	o.Store, o.Observer, o.Recorder, o.Logger = old.Store, old.Observer, old.Recorder, old.Logger
	r.opts = o
	cfg := o.machineConfig()
	c.config.Store(&cfg)
	if old.Errors != o.Errors || old.ErrorWindow != o.ErrorWindow {
		r.errSince = now // a new window warms again
	}
	if o.HealthCheckInterval != old.HealthCheckInterval && r.ticker != nil {
		r.ticker.Reset(o.HealthCheckInterval)
	}
	l := c.inputLine(now, levels.TriggerReload, actor)
	lc := cfg.Line()
	lc.Measured = o.Measured
	l.Config, l.Renewed = &lc, renewed
	c.changed(now, out, c.outcomeLine(l))
	return nil
}

// saveErr is the error of the last save, if it failed.
func (c *Controller) saveErr() error {
	if c.run.unsaved {
		return fmt.Errorf("%w: the last save of the state file failed (see the log)", ErrNotSaved)
	}
	return nil
}
