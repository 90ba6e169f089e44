package controller

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/degraded/degraded/levels"
)

// ErrInvalidOverride is wrapped by every error SetOverride returns for bad
// input; the message names what was wrong.
var ErrInvalidOverride = errors.New("invalid override")

// MaxReasonLength is the longest override reason accepted, in characters.
const MaxReasonLength = 500

// OverrideRequest is what an operator asks for.
type OverrideRequest struct {
	Level  string
	Mode   Mode
	TTL    time.Duration
	Reason string
	// Actor names who asks (see Override.Actor); "" is recorded as
	// "anonymous".
	Actor string
}

// SetOverride replaces any active override with r, effective at once, and
// returns the resulting state. The change is saved before it returns; if
// the save fails the override is still in force, and the error wraps
// ErrNotSaved.
func (c *Controller) SetOverride(r OverrideRequest) (*State, error) {
	c.mu.Lock()
	idx, err := c.checkOverride(r)
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	now := time.Now()
	if c.ovr == nil && c.fleet.ovr == nil {
		c.auto.Level, c.auto.Since = c.pub, c.since
	}
	name := c.opts.Table.Level(idx).Name // the table's spelling: names match case-insensitively
	actor := r.Actor
	if actor == "" {
		actor = ActorAnonymous
	}
	c.ovr = &Override{Level: name, Mode: r.Mode, Reason: r.Reason, SetAt: now.UTC(), ExpiresAt: now.Add(r.TTL).UTC(), Actor: actor}
	c.ovrIndex = idx
	c.ovrEnds = now.Add(r.TTL) // keeps the monotonic reading: wall-clock jumps don't move it
	reason := fmt.Sprintf("override set: %s %s for %s: %s", r.Mode, name, r.TTL, r.Reason)
	m, _ := c.commit(now, SourceOverride, reason, true)
	m = c.byActor(m, actor)
	st := c.publishLocked(now, SourceOverride, reason)
	c.mu.Unlock()
	return st, c.announce([]Transition{m}, true)
}

// ClearOverride ends the active override at once, by actor (see
// Override.Actor), and returns the resulting state; with no override
// active it changes nothing. Automatic control
// resumes from the published level, keeping its dwell clock. Like
// SetOverride, a failed save returns an error wrapping ErrNotSaved.
func (c *Controller) ClearOverride(actor string) (*State, error) {
	c.mu.Lock()
	if c.ovr == nil {
		st := c.state.Load()
		c.mu.Unlock()
		return st, nil
	}
	now := time.Now()
	m := c.byActor(c.endOverride(now, "override cleared: "+c.ovr.Reason), actor)
	st := c.publishLocked(now, SourceOverride, m.Reason)
	c.mu.Unlock()
	return st, c.announce([]Transition{m}, true)
}

// checkOverride validates r and returns its level's index. c.mu must be
// held.
func (c *Controller) checkOverride(r OverrideRequest) (int, error) {
	idx, err := c.opts.Table.Index(r.Level)
	switch {
	case err != nil:
		err = fmt.Errorf("%w: level: %w", ErrInvalidOverride, err)
	case r.Mode != ModePin && r.Mode != ModeFloor:
		err = fmt.Errorf("%w: mode must be pin or floor (was %q)", ErrInvalidOverride, r.Mode)
	case r.TTL < time.Second || r.TTL > c.opts.MaxOverrideTTL:
		err = fmt.Errorf("%w: ttl must be between 1s and %s (was %s)", ErrInvalidOverride, c.opts.MaxOverrideTTL, r.TTL)
	case r.Reason == "" || utf8.RuneCountInString(r.Reason) > MaxReasonLength:
		err = fmt.Errorf("%w: reason must be 1 to %d characters (was %d)", ErrInvalidOverride, MaxReasonLength, utf8.RuneCountInString(r.Reason))
	}
	return idx, err
}

// CheckOverride validates r as SetOverride does (the fleet override takes
// the same body), and returns it with the level spelled as the table
// spells it. Errors wrap ErrInvalidOverride.
func (c *Controller) CheckOverride(r OverrideRequest) (OverrideRequest, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	idx, err := c.checkOverride(r)
	if err != nil {
		return OverrideRequest{}, err
	}
	r.Level = c.opts.Table.Level(idx).Name
	return r, nil
}

// endOverride removes the override without moving the published level:
// the automatic level takes over from it. c.mu must be held.
func (c *Controller) endOverride(now time.Time, reason string) Transition {
	if c.fleet.ovr == nil {
		c.auto = c.resumeAuto(now)
	}
	c.ovr = nil
	m, _ := c.commit(now, SourceOverride, reason, true)
	return m
}

// resumeAuto is the automatic level when an override ends: the published
// level, keeping its dwell clock, with a new jitter draw r; the first step
// down also waits MinimumLevelDuration x r from now, so replicas whose
// override ended together do not step down together. c.mu must be held.
func (c *Controller) resumeAuto(now time.Time) levels.Auto {
	r := c.drawJitter()
	return levels.Auto{Level: c.pub, Since: c.since, Recommended: c.auto.Recommended, Seen: c.auto.Seen,
		JitterR: r, NotBefore: now.Add(time.Duration(float64(c.opts.MinimumLevelDuration) * r))}
}
