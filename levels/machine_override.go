package levels

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// ErrExpiredOverride is returned by ApplyFleet for a fleet override that
// has already expired by this machine's clock: nothing is applied (a fleet
// override in force ends), and the caller says so.
var ErrExpiredOverride = errors.New("fleet override already expired by this instance's clock")

// CheckOverride validates r as Machine.SetOverride does under c (the
// fleet override takes the same body), and returns it with the level
// spelled as the table spells it. Errors wrap ErrInvalidOverride.
func (c Config) CheckOverride(r OverrideRequest) (OverrideRequest, error) {
	idx, err := r.check(c.Table, c.Rules.MaxOverrideTTL)
	if err != nil {
		return OverrideRequest{}, err
	}
	r.Level = c.Table.Level(idx).Name
	return r, nil
}

// SetOverride replaces any local override with r from now, effective at
// once: one history entry, by r.Actor. Errors wrap ErrInvalidOverride and
// change nothing.
func (m *Machine) SetOverride(now time.Time, r OverrideRequest) (Output, error) {
	idx, err := r.check(m.cfg.Table, m.cfg.Rules.MaxOverrideTTL)
	if err != nil {
		return Output{}, err
	}
	before := m.publishedPartial()
	m.freezeAuto()
	name := m.cfg.Table.Level(idx).Name // the table's spelling: names match case-insensitively
	actor := actorOr(r.Actor)
	m.local = &layer{ovr: Override{Level: name, Mode: r.Mode, Reason: r.Reason, SetAt: now.UTC(), ExpiresAt: now.Add(r.TTL).UTC(), Actor: actor},
		index: idx, ends: now.Add(r.TTL)}
	m.law.changedAt = now
	reason := fmt.Sprintf("override set: %s %s for %s: %s", r.Mode, name, r.TTL, r.Reason)
	return Output{Entries: m.commit(now, SourceOverride, reason, actor, true), Admission: !samePartial(before, m.publishedPartial())}, nil
}

// ClearOverride ends the local override at once, by actor: one history
// entry; without one it changes nothing. Automatic control resumes from the
// published level (see resumeAuto), with the recovery draw jitter.
func (m *Machine) ClearOverride(now time.Time, actor string, jitter float64) Output {
	if m.local == nil {
		return Output{}
	}
	before := m.publishedPartial()
	entries := m.endLocal(now, "override cleared: "+m.local.ovr.Reason, actorOr(actor), jitter)
	return Output{Entries: entries, Admission: !samePartial(before, m.publishedPartial())}
}

// freezeAuto hands the automatic level the published one when the first
// override starts, so automatic control later resumes from where the
// service was.
func (m *Machine) freezeAuto() {
	if m.local == nil && m.fleet == nil {
		m.auto.Level, m.auto.Since = m.pub, m.since
	}
}

// endLocal removes the local override without moving the published level
// (when it was the last layer, the automatic level takes over from it).
func (m *Machine) endLocal(now time.Time, reason, actor string, jitter float64) []Entry {
	if m.fleet == nil {
		m.resumeAuto(now, jitter)
	}
	m.local = nil
	m.law.changedAt = now
	return m.commit(now, SourceOverride, reason, actor, true)
}

// endFleet removes the fleet override, as endLocal the local one.
func (m *Machine) endFleet(now time.Time, reason, actor string, jitter float64) []Entry {
	if m.local == nil {
		m.resumeAuto(now, jitter)
	}
	m.fleet = nil
	m.law.changedAt = now
	return m.commit(now, SourceFleet, reason, actor, true)
}

// resumeAuto makes the published level the automatic one when the last
// override ends, keeping its dwell clock, with a new recovery draw r; the
// first step down also waits MinimumLevelDuration x r from now, so replicas
// whose override ended together do not step down together.
func (m *Machine) resumeAuto(now time.Time, jitter float64) {
	r := m.jitter(jitter)
	m.auto = Auto{Level: m.pub, Since: m.since, Recommended: m.auto.Recommended, Seen: m.auto.Seen,
		JitterR: r, NotBefore: now.Add(time.Duration(float64(m.cfg.Rules.MinimumLevelDuration) * r))}
}

// ApplyFleet applies a change of the fleet override as etcd holds it:
// set, replaced or ended, with one history entry (source fleet). An update
// whose revision is not newer than the last applied one changes nothing
// (the same mod_revision never adds a second entry), unless u.Reset says
// etcd's revision went back. A fleet override is checked like a local one,
// with its ttl clamped to MaxOverrideTTL: one this machine cannot apply (a
// level the table lacks, a bad mode or reason) is refused with an error
// wrapping ErrInvalidOverride, and the fleet layer in force, which etcd no
// longer holds, is dropped. One already expired by now is not applied
// either (ErrExpiredOverride), and likewise ends the layer in force.
func (m *Machine) ApplyFleet(now time.Time, u FleetUpdate, jitter float64) (Output, error) {
	if u.Reset {
		m.fleetRev = 0
	}
	if u.Revision <= m.fleetRev {
		return Output{}, nil
	}
	m.fleetRev = u.Revision
	before := m.publishedPartial()
	out := func(entries []Entry, err error) (Output, error) {
		return Output{Entries: entries, Admission: !samePartial(before, m.publishedPartial())}, err
	}
	if u.Override == nil {
		if m.fleet == nil {
			return Output{}, nil
		}
		what := "cleared"
		if u.Expired || !now.Before(m.fleet.ends) {
			what = "expired"
		}
		actor := u.Actor
		if actor == "" {
			actor = ActorDaemon
		}
		return out(m.endFleet(now, "fleet override "+what+": "+m.fleet.ovr.Reason, actor, jitter), nil)
	}
	o := *u.Override
	idx, err := m.cfg.Table.Index(o.Level)
	switch {
	case err != nil:
		err = fmt.Errorf("%w: fleet override of revision %d: level %q is not configured here", ErrInvalidOverride, u.Revision, o.Level)
	case o.Mode != ModePin && o.Mode != ModeFloor:
		err = fmt.Errorf("%w: fleet override of revision %d: mode must be pin or floor (was %q)", ErrInvalidOverride, u.Revision, o.Mode)
	case o.Reason == "" || utf8.RuneCountInString(o.Reason) > MaxReasonLength:
		err = fmt.Errorf("%w: fleet override of revision %d: reason must be 1 to %d characters (was %d)", ErrInvalidOverride, u.Revision,
			MaxReasonLength, utf8.RuneCountInString(o.Reason))
	case !now.Before(o.ExpiresAt):
		err = fmt.Errorf("%w: fleet override of revision %d (%s %s) expired at %s", ErrExpiredOverride, u.Revision, o.Mode, o.Level,
			o.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if err != nil {
		var entries []Entry
		if m.fleet != nil {
			why := "fleet override refused: "
			if errors.Is(err, ErrExpiredOverride) {
				why = "fleet override expired: "
			}
			entries = m.endFleet(now, why+m.fleet.ovr.Reason, ActorDaemon, jitter)
		}
		return out(entries, err)
	}
	m.freezeAuto()
	o.Level = m.cfg.Table.Level(idx).Name
	o.Actor = actorOr(o.Actor)
	if limit := now.Add(m.cfg.Rules.MaxOverrideTTL); o.ExpiresAt.After(limit) {
		o.ExpiresAt = limit.UTC()
	}
	ttl := u.TTL
	if ttl > m.cfg.Rules.MaxOverrideTTL {
		ttl = m.cfg.Rules.MaxOverrideTTL
	}
	m.fleet = &layer{ovr: o, index: idx, ends: now.Add(o.ExpiresAt.Sub(now)), ttl: ttl, rev: u.Revision}
	m.law.changedAt = now
	reason := fmt.Sprintf("fleet override set: %s %s for %s: %s", o.Mode, o.Level, ttl, o.Reason)
	return out(m.commit(now, SourceFleet, reason, o.Actor, true), nil)
}

// Note records a history entry that moves nothing, such as the
// controller's restart entry, and returns it.
func (m *Machine) Note(source, reason, actor string) Entry {
	return m.entry(source, reason, actor)
}
