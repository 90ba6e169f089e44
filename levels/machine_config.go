package levels

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"
)

// Reconfigure puts c in force for a config reload by actor. A reload is
// not a health check: it maps the levels in force by name onto the new
// table, recomputes the recommendation from the last sample and the
// partial admission, but makes no automatic transition and counts nothing
// towards escalate_after or a dwell. A level that no longer exists maps to
// the least severe level whose priority threshold is at least the removed
// one's (else the most severe). A table without the level an override in
// force names (local or fleet) is refused, naming the override, and
// nothing changes. Any change of the published document is one history
// entry (source config, by actor). renewed lists the signals whose
// samplers were re-created: their blind clocks start again, as a custom
// signal new to the table does.
func (m *Machine) Reconfigure(now time.Time, c Config, actor string, renewed []Signal) (Output, error) {
	t := c.Table
	for _, y := range []struct {
		l    *layer
		what string
	}{{m.local, "override"}, {m.fleet, "fleet override"}} {
		if y.l == nil {
			continue
		}
		if _, err := t.Index(y.l.ovr.Level); err != nil {
			o := y.l.ovr
			return Output{}, fmt.Errorf("the new levels drop %s, which the active %s (%s %s: %s) names; clear the %s first",
				o.Level, y.what, o.Mode, o.Level, o.Reason, y.what)
		}
	}
	before, beforePartial := m.key(), m.publishedPartial()
	old := m.cfg
	m.cfg = c
	seen := maps.Clone(m.auto.Seen)
	if seen == nil {
		seen = map[Signal]time.Time{}
	}
	for _, sig := range renewed {
		seen[sig] = now
	}
	for _, sig := range t.Signals() {
		if !sig.Builtin() && !old.Table.Custom(sig) {
			seen[sig] = now // a new custom signal starts blind now
		}
	}
	m.auto.Seen = seen
	autoWas := old.Table.Level(m.auto.Level)
	m.auto.Level, _ = t.Map(autoWas.Name, autoWas.PriorityThreshold)
	m.local, m.fleet = remap(m.local, t), remap(m.fleet, t)
	m.auto.Recommended, _, _ = t.Recommend(m.signals, 1)

	prev := old.Table.Level(m.pub)
	var found bool
	m.pub, found = t.Map(prev.Name, prev.PriorityThreshold)
	changes := modeChanges(old, c)
	reason := "config reload"
	if len(changes) > 0 {
		reason += ": " + strings.Join(changes, "; ")
	}
	var entries []Entry
	if next, _, _ := m.layered(); next != m.pub || !found {
		m.pub, m.since = next, now
		if !found {
			reason = strings.Join(append([]string{"config reload: level " + prev.Name + " no longer configured"}, changes...), "; ")
		}
		m.reason = reason
		entries = append(entries, Entry{From: prev.Name, To: t.Level(m.pub).Name, Source: SourceConfig, Reason: reason, Actor: actor})
	}
	m.law.level = -1 // the table changed: every band is new
	m.admit(now)
	if len(entries) == 0 && (m.key() != before || len(changes) > 0) {
		entries = append(entries, m.entry(SourceConfig, reason, actor))
	}
	return Output{Entries: entries, Admission: !samePartial(beforePartial, m.publishedPartial())}, nil
}

// remap returns y with its level's index and spelling in table t (which
// has the level: Reconfigure checked).
func remap(y *layer, t *Table) *layer {
	if y == nil {
		return nil
	}
	c := *y
	c.index, _ = t.Index(y.ovr.Level)
	c.ovr.Level = t.Level(c.index).Name
	return &c
}

// modeChanges describes the switches of mode and admission mode between
// two configs, for a history entry's reason: "mode enforce -> shadow".
func modeChanges(old, c Config) []string {
	var out []string
	if old.Rules.Shadow != c.Rules.Shadow {
		out = append(out, "mode "+modeName(old.Rules.Shadow)+" -> "+modeName(c.Rules.Shadow))
	}
	if old.admission() != c.admission() {
		out = append(out, "admission "+string(old.admission())+" -> "+string(c.admission()))
	}
	return out
}

// admission is the admission mode, "" read as graduated.
func (c Config) admission() AdmissionMode {
	if c.Rules.Admission == "" {
		return AdmissionGraduated
	}
	return c.Rules.Admission
}

// modeName is the config value of mode for Shadow.
func modeName(shadow bool) string {
	if shadow {
		return "shadow"
	}
	return "enforce"
}

// Saved is the durable part of a machine: what a restart must not lose.
// Levels are named, so that a changed table maps them by meaning, not by
// position. The partial admission is not saved: after a restart it starts
// null (the plain level sheds more, never less).
type Saved struct {
	Level     string
	Since     time.Time
	Reason    string
	Auto      string
	AutoSince time.Time
	JitterR   float64
	NotBefore time.Time
	Override  *Override
	Fleet     *FleetOverride
	Shadow    bool
	Admission AdmissionMode
	// Priorities maps each level name of the saving table to its priority
	// threshold, so that a level removed since maps by meaning.
	Priorities map[string]int
	// Capacity is the admission law's capacity estimate (graduated mode,
	// once measured; nil otherwise). partial is not saved (DESIGN.md): it
	// starts null after a restart, and the law sizes it again from the
	// first reports with this estimate instead of learning the capacity by
	// overloading the service again.
	Capacity *Capacity
}

// Saved returns the machine's durable state.
func (m *Machine) Saved() Saved {
	t := m.cfg.Table
	s := Saved{Level: t.Level(m.pub).Name, Since: m.since, Reason: m.reason, Auto: t.Level(m.auto.Level).Name, AutoSince: m.auto.Since,
		JitterR: m.auto.JitterR, NotBefore: m.auto.NotBefore, Shadow: m.cfg.Rules.Shadow, Admission: m.cfg.admission(),
		Priorities: make(map[string]int, t.Len())}
	for _, l := range t.Levels() {
		s.Priorities[l.Name] = l.PriorityThreshold
	}
	p := m.Published()
	s.Override, s.Fleet = p.Override, p.Fleet
	if m.cfg.graduated() {
		s.Capacity = m.law.saved()
	}
	return s
}

// ReportersOverflowed is how many reporters the admission law has
// forgotten because more clients reported than it tracks (256): it forgets
// the least recently heard, and reads the offered load low while that
// lasts, so it may admit more than the capacity. The controller logs it.
func (m *Machine) ReportersOverflowed() uint64 { return m.law.overflowed }

// CapacityAt is when the admission law's capacity estimate was last
// updated (Saved's Capacity.At), zero without one: a controller saves it
// again when it has moved on (controller.capacitySaveEvery).
func (m *Machine) CapacityAt() time.Time {
	if !m.cfg.graduated() {
		return time.Time{}
	}
	return m.law.savedAt()
}

// priority is the saved priority threshold of the named level, or
// math.MaxInt when the saving table did not know it.
func (s Saved) priority(name string) int {
	if v, ok := s.Priorities[name]; ok {
		return v
	}
	return math.MaxInt
}

// Restore adopts a saved state at a start, and returns the history
// entries it makes. Levels are mapped by name onto the table (a removed
// level maps by priority threshold, see Table.Map), times in the future
// are clamped to now (the clock went back), the recovery draw to
// RecoveryJitter, and an override never outlives MaxOverrideTTL from now. A
// saved fleet override naming a level the table lacks is dropped, and
// dropped says why; so does a saved capacity estimate the admission law
// refuses (law.restore). restart, when not empty, is the reason of an
// entry (source restart) made before the others: the controller's, for a
// start after an unclean shutdown. A published level that no longer exists, or
// that the layers no longer give, is one entry (source config), and so is a
// change of mode or admission mode since the save.
func (m *Machine) Restore(now time.Time, s Saved, restart string) (entries []Entry, dropped error) {
	t := m.cfg.Table
	m.since, m.auto.Since = clampPast(s.Since, now), clampPast(s.AutoSince, now)
	m.auto.JitterR = min(max(s.JitterR, 0), m.cfg.Rules.RecoveryJitter)
	m.auto.NotBefore = s.NotBefore
	if limit := now.Add(m.cfg.Rules.MinimumLevelDuration); s.NotBefore.After(limit) {
		m.auto.NotBefore = limit // a clock that went back must not hold recovery longer than a dwell
	}
	m.reason = s.Reason
	m.auto.Level, _ = t.Map(s.Auto, s.priority(s.Auto))
	pub, found := t.Map(s.Level, s.priority(s.Level))
	m.pub = pub
	if s.Override != nil {
		o := m.restored(*s.Override, now)
		idx, _ := t.Map(o.Level, s.priority(o.Level))
		o.Level = t.Level(idx).Name
		m.local = &layer{ovr: o, index: idx, ends: o.ExpiresAt}
	}
	if f := s.Fleet; f != nil {
		m.fleetRev = f.ModRevision
		if idx, err := t.Index(f.Level); err != nil {
			dropped = fmt.Errorf("%w: the saved fleet override (%s %s: %s) names level %s, which is not configured: dropped",
				ErrInvalidOverride, f.Mode, f.Level, f.Reason, f.Level)
		} else {
			o := m.restored(f.Override, now)
			o.Level = t.Level(idx).Name
			m.fleet = &layer{ovr: o, index: idx, ends: o.ExpiresAt, ttl: min(f.TTL, m.cfg.Rules.MaxOverrideTTL), rev: f.ModRevision}
		}
	}
	if c := s.Capacity; c != nil && m.cfg.graduated() {
		if err := m.law.restore(*c, now); err != nil {
			dropped = errors.Join(dropped, err)
		}
	}
	if restart != "" {
		entries = append(entries, m.entry(SourceRestart, restart, ActorDaemon))
	}
	if next, _, _ := m.layered(); !found || next != m.pub {
		from := s.Level
		m.pub, m.since = next, now
		m.reason = "config: level " + s.Level + " no longer configured"
		entries = append(entries, Entry{From: from, To: t.Level(m.pub).Name, Source: SourceConfig, Reason: m.reason, Actor: ActorDaemon})
	}
	was := Config{Rules: Rules{Shadow: s.Shadow, Admission: s.Admission}}
	if s.Admission == "" {
		was.Rules.Admission = m.cfg.admission() // saved before admission modes: no switch to report
	}
	if changes := modeChanges(was, m.cfg); len(changes) > 0 {
		entries = append(entries, m.entry(SourceConfig, "config: "+strings.Join(changes, "; "), ActorDaemon))
	}
	return entries, dropped
}

// restored is a saved override as a start adopts it: set no later than
// now and ending no later than MaxOverrideTTL from now.
func (m *Machine) restored(o Override, now time.Time) Override {
	o.SetAt = clampPast(o.SetAt, now)
	if limit := now.Add(m.cfg.Rules.MaxOverrideTTL); o.ExpiresAt.After(limit) {
		o.ExpiresAt = limit.UTC()
	}
	return o
}

// clampPast returns t, or now if t lies in the future.
func clampPast(t, now time.Time) time.Time {
	if t.After(now) {
		return now
	}
	return t
}
