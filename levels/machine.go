package levels

import (
	"strings"
	"time"
)

// AdmissionMode says how a level admits requests (config admission.mode).
type AdmissionMode string

// The admission modes.
const (
	// AdmissionGraduated: besides every priority at or above the level's
	// threshold, a fraction of the band just below it is admitted
	// ([Partial]), sized by the admission law from the services' reports.
	AdmissionGraduated AdmissionMode = "graduated"
	// AdmissionLevels: the plain table rule, priority >= threshold.
	AdmissionLevels AdmissionMode = "levels"
)

// Config is everything the machine's decisions depend on besides its
// inputs: the level table and the rules.
type Config struct {
	Table *Table
	Rules Rules
}

// graduated reports whether the admission law runs.
func (c Config) graduated() bool { return c.Rules.Admission != AdmissionLevels }

// Machine is the level machine: everything the published state depends on
// (the automatic level and its dwell, escalation streaks, blind clocks,
// the recovery draw, the fleet and local override layers, and the
// admission law with its partial admission) and the one place every rule
// that decides a level lives. Its methods take the moment and their input
// and return the history entries they made; they never read a clock, draw
// a random number or do I/O, so `degraded replay` reproduces a recording by
// feeding the same inputs to the same machine.
//
// A Machine is a value. Copying it makes an independent machine: no method
// modifies a map, slice or pointed-to value that a copy may share (they are
// replaced instead), so a caller can try an input on a copy and keep or
// drop the result. A Machine is not safe for concurrent use.
type Machine struct {
	cfg    Config
	auto   Auto
	pub    int       // the published level
	since  time.Time // when pub last changed: the dwell clock of earliest_recovery_at
	reason string    // the reason of the last history entry
	local  *layer    // the local override; nil when none
	fleet  *layer    // the fleet override; nil when none
	// fleetRev is the newest fleet revision applied: older and equal
	// updates are ignored.
	fleetRev int64
	signals  Sample // the last evaluation's sample
	ready    bool   // a health check has run
	law      law    // the graduated admission law (law.go)
}

// layer is one override in force: the override as published, its level in
// the table, and when it ends (with the monotonic reading when set by this
// process, so a wall-clock jump does not move it). For the fleet layer, ttl
// and rev are the ttl it was set for and the revision that wrote it.
type layer struct {
	ovr   Override
	index int
	ends  time.Time
	ttl   time.Duration
	rev   int64
}

// Entry is one history entry a machine input made: the audit log's line,
// numbered and dated by the caller.
type Entry struct {
	From, To       string
	Source, Reason string
	Actor          string
}

// Output is what one input did.
type Output struct {
	// Entries are the history entries, in order: each is one sequence
	// step.
	Entries []Entry
	// Admission says the published partial admission changed without a
	// history entry: one sequence step of its own when Entries is empty.
	Admission bool
}

// Changed reports whether the published state document changed: whether
// the input costs a sequence step.
func (o Output) Changed() bool { return len(o.Entries) > 0 || o.Admission }

// NewMachine returns a machine at Normal, entered at now, every blind
// clock started at now, with no override.
func NewMachine(c Config, now time.Time) Machine {
	m := Machine{cfg: c, since: now, reason: "started"}
	m.auto = Auto{Since: now, Seen: m.blindClocks(now)}
	return m
}

// blindClocks starts every signal's blind clock at now.
func (m *Machine) blindClocks(now time.Time) map[Signal]time.Time {
	seen := make(map[Signal]time.Time, len(m.cfg.Table.Signals()))
	for _, sig := range m.cfg.Table.Signals() {
		seen[sig] = now
	}
	return seen
}

// Config returns the configuration in force.
func (m *Machine) Config() Config { return m.cfg }

// Ready reports whether a health check has run.
func (m *Machine) Ready() bool { return m.ready }

// Published is what the state document shows of the machine.
type Published struct {
	// Index is the published level; Since when it was entered.
	Index int
	Since time.Time
	// Reason is the last history entry's reason.
	Reason string
	// Source is the layer that set Index: SourceAuto, SourceFleet or
	// SourceOverride.
	Source string
	// Recommended is the level the table rule asks for now.
	Recommended int
	// Override and Fleet are the local and fleet overrides; nil when none.
	Override *Override
	Fleet    *FleetOverride
	// Partial is the published partial admission; nil when none.
	Partial *Partial
	// EarliestRecoveryAt is the earliest moment the published level could
	// drop; nil at Normal and when only an override could lower it.
	EarliestRecoveryAt *time.Time
	// Shadow is the mode; Signals the last sample; Blind whether it was
	// blind (Sample.Blind); JitterR the automatic level's recovery draw.
	Shadow  bool
	Signals Sample
	Blind   bool
	JitterR float64
}

// Published returns the machine's part of the state document.
func (m *Machine) Published() Published {
	p := Published{Index: m.pub, Since: m.since, Reason: m.reason, Recommended: m.auto.Recommended,
		Shadow: m.cfg.Rules.Shadow, Signals: m.signals, Blind: m.signals.Blind(), JitterR: m.auto.JitterR}
	if m.local != nil {
		o := m.local.ovr
		p.Override = &o
	}
	if m.fleet != nil {
		p.Fleet = &FleetOverride{Override: m.fleet.ovr, TTL: m.fleet.ttl, ModRevision: m.fleet.rev}
	}
	index, by, decider := m.layered()
	p.Source = [...]string{SourceAuto, SourceFleet, SourceOverride}[by]
	if by == 0 {
		p.Partial = m.law.partial
	}
	// earliest_recovery_at: none at Normal; the deciding override's expiry
	// (or the end of the dwell, if later, when the automatic level is the
	// same); none when only an override could lower the level; otherwise
	// the end of the dwell.
	switch {
	case m.pub == 0:
	case decider != nil:
		at := decider.ovr.ExpiresAt.UTC()
		if dwell := m.recoveryAt().UTC(); index == m.auto.Level && !m.cfg.Rules.ManualOnly && dwell.After(at) {
			at = dwell
		}
		p.EarliestRecoveryAt = &at
	case m.cfg.Rules.ManualOnly:
	default:
		at := m.recoveryAt().UTC()
		p.EarliestRecoveryAt = &at
	}
	return p
}

// layered returns the level the layers give, auto -> fleet -> local
// (DESIGN.md "Overrides in layers"), which layer set it (0 auto, 1 fleet,
// 2 local) and that layer.
func (m *Machine) layered() (index, by int, decider *layer) {
	var fleet, local *Layer
	if m.fleet != nil {
		fleet = &Layer{Index: m.fleet.index, Pin: m.fleet.ovr.Mode == ModePin}
	}
	if m.local != nil {
		local = &Layer{Index: m.local.index, Pin: m.local.ovr.Mode == ModePin}
	}
	index, by = Layered(m.auto.Level, fleet, local)
	switch by {
	case 1:
		decider = m.fleet
	case 2:
		decider = m.local
	}
	return index, by, decider
}

// dwellStart is when the automatic level's dwell began. While the
// automatic level is the published one, it is never before the published
// level's since: no step down comes before the earliest_recovery_at that
// the state published, whatever overrides came and went.
func (m *Machine) dwellStart() time.Time {
	if m.pub == m.auto.Level && m.since.After(m.auto.Since) {
		return m.since
	}
	return m.auto.Since
}

// recoveryAt is the earliest automatic step down: the jittered dwell from
// dwellStart, and not before the automatic level's NotBefore.
func (m *Machine) recoveryAt() time.Time {
	a := m.auto
	a.Since = m.dwellStart()
	return a.RecoveryAt(m.cfg.Rules)
}

// jitter clamps an input's draw to [0, RecoveryJitter).
func (m *Machine) jitter(r float64) float64 {
	if m.cfg.Rules.RecoveryJitter <= 0 || !(r > 0) {
		return 0
	}
	return min(r, m.cfg.Rules.RecoveryJitter*(1-1e-12))
}

// commit publishes the level the layers give. It makes one history entry
// when the published level changed or force is set, and returns it.
func (m *Machine) commit(now time.Time, source, reason, actor string, force bool) []Entry {
	next, _, _ := m.layered()
	if next == m.pub && !force {
		return nil
	}
	from := m.cfg.Table.Level(m.pub).Name
	if next != m.pub {
		m.pub, m.since = next, now
	}
	m.reason = reason
	return []Entry{{From: from, To: m.cfg.Table.Level(m.pub).Name, Source: source, Reason: reason, Actor: actor}}
}

// entry records a history entry that does not move the published level.
func (m *Machine) entry(source, reason, actor string) Entry {
	m.reason = reason
	name := m.cfg.Table.Level(m.pub).Name
	return Entry{From: name, To: name, Source: source, Reason: reason, Actor: actor}
}

// docKey is what the published document shows besides the signals, the
// recommendation and the partial admission: a change of it is a sequence
// step and, when no entry accounts for it, one history entry.
type docKey struct {
	index, threshold   int
	name, source       string
	features           string
	override, fleet    Override
	hasLocal, hasFleet bool
	recovery           time.Time
	shadow             bool
}

func (m *Machine) key() docKey {
	p := m.Published()
	l := m.cfg.Table.Level(p.Index)
	k := docKey{index: p.Index, threshold: l.PriorityThreshold, name: l.Name, source: p.Source, shadow: p.Shadow,
		features: strings.Join(m.cfg.Table.DisabledFeatures(p.Index), "\x00")}
	if p.EarliestRecoveryAt != nil {
		k.recovery = *p.EarliestRecoveryAt
	}
	if p.Override != nil {
		k.override, k.hasLocal = *p.Override, true
	}
	if p.Fleet != nil {
		k.fleet, k.hasFleet = p.Fleet.Override, true
	}
	return k
}
