package levels

import (
	"time"
)

// Input is one evaluation of the signals: a health check (Trigger
// TriggerStart for a daemon's first, then TriggerTick) or an event
// (TriggerEvent: reports or pushed values between health checks).
type Input struct {
	// At is when the evaluation runs.
	At time.Time
	// Trigger is TriggerStart, TriggerTick or TriggerEvent.
	Trigger string
	// Sample is what the signals read.
	Sample Sample
	// Reports are the outcome reports that arrived since the previous
	// evaluation, oldest first: what the admission law learns from.
	Reports []Report
	// Jitter is the recovery draw r this evaluation uses if it enters a
	// level or ends an override: uniform in [0, recovery_jitter), drawn by
	// the caller (the machine never draws).
	Jitter float64
}

// Evaluate applies one evaluation. At a health check an override whose
// expires_at has passed ends first (local, then fleet), and automatic
// control resumes from the level that was published. Then the automatic
// level moves by the rules of [Next] (a health check) or [Event] (an
// event: upward only), and in graduated mode the admission law sizes each
// step up, holds each step down until the band is admitted in full, and
// sets the partial admission (law.go). The published level follows the
// automatic one unless an override decides.
func (m *Machine) Evaluate(in Input) Output {
	before, beforePartial := m.key(), m.publishedPartial()
	var out Output
	tick := in.Trigger != TriggerEvent
	if in.Trigger == TriggerStart {
		m.auto.Seen = m.blindClocks(in.At) // a new run: every blind clock starts again
	}
	if tick {
		out.Entries = append(out.Entries, m.expire(in.At, in.Jitter)...)
		m.ready = true
	}
	m.signals = in.Sample
	ev := m.law.observe(m.cfg, in)
	m.law.decide(ev, in.At)
	if m.ready {
		out.Entries = append(out.Entries, m.moveAuto(in, tick, ev)...)
	}
	if ev.fresh || m.auto.Level != m.law.level {
		m.admit(in.At) // a new decision of the law, or a new band
	}
	return m.finish(out, before, beforePartial)
}

// expire ends the overrides whose expires_at has passed by now.
func (m *Machine) expire(now time.Time, jitter float64) []Entry {
	var entries []Entry
	if m.local != nil && !now.Before(m.local.ends) {
		entries = append(entries, m.endLocal(now, "override expired: "+m.local.ovr.Reason, ActorDaemon, jitter)...)
	}
	if m.fleet != nil && !now.Before(m.fleet.ends) {
		entries = append(entries, m.endFleet(now, "fleet override expired: "+m.fleet.ovr.Reason, ActorDaemon, jitter)...)
	}
	return entries
}

// moveAuto moves the automatic level one evaluation, its dwell starting
// at dwellStart. A new automatic level draws its recovery jitter, and the
// published level follows it unless an override decides. In graduated
// mode a health check whose window holds the level up on latency alone
// may step it down on the latency of fresh reports (law.recoverOnFresh),
// and the latency it overruled is not read again while no fresh reports
// come (law.ruleSample).
func (m *Machine) moveAuto(in Input, tick bool, ev evidence) []Entry {
	m.auto.Since = m.dwellStart()
	rule := Event
	if tick {
		rule = Next
	}
	law := m.cfg.graduated() && !m.cfg.Rules.Shadow
	s := in.Sample
	if law {
		s = m.law.ruleSample(m.cfg.Table, in.Sample, in.At)
	}
	a, mv := rule(m.auto, m.cfg.Table, s, in.At, m.cfg.Rules)
	if law {
		if mv.Moved() {
			a, mv = m.law.limit(m.cfg.Table, m.auto, a, mv, in.Sample, ev, in.At)
		}
		if tick && !mv.Moved() {
			if down, dm, ok := m.law.recoverOnFresh(m.auto, m.cfg, in); ok {
				down.Recommended = a.Recommended // the table's, from the window
				a, mv = m.law.limit(m.cfg.Table, m.auto, down, dm, in.Sample, ev, in.At)
				m.law.overruled = m.law.overruled || mv.Moved()
			}
		}
	}
	m.auto = a
	if !mv.Moved() {
		return nil
	}
	m.auto.JitterR, m.auto.NotBefore = m.jitter(in.Jitter), time.Time{}
	m.law.changedAt = in.At
	return m.commit(in.At, SourceAuto, mv.Reason, ActorDaemon, false)
}

// admit sets the automatic level's partial admission: the law's in
// graduated mode (its open-loop estimate in shadow mode), none otherwise.
// Evaluate calls it when the law decided on fresh evidence or the level
// moved: between decisions the noise of the offered load does not move
// the fraction.
func (m *Machine) admit(now time.Time) {
	var p *Partial
	if m.cfg.graduated() && !m.cfg.Rules.ManualOnly {
		p = m.law.partialFor(m.cfg.Table, m.auto.Level)
	}
	m.law.setPartial(p, m.auto.Level, now)
}

// finish completes an input's output: a change of the published document
// that no entry accounts for (the automatic level moving under a floor,
// which moves earliest_recovery_at) becomes one entry, and a change of the
// published partial admission is flagged.
func (m *Machine) finish(out Output, before docKey, beforePartial *Partial) Output {
	if len(out.Entries) == 0 && m.key() != before {
		out.Entries = append(out.Entries, m.entry(SourceAuto, "automatic level now "+m.cfg.Table.Level(m.auto.Level).Name, ActorDaemon))
	}
	out.Admission = !samePartial(beforePartial, m.publishedPartial())
	return out
}

// WouldEscalate reports whether an event with sample s at now would move
// the automatic level up: the controller evaluates such a report at once
// rather than folding it into the next of at most four evaluations a
// second, so an error burst is shed within milliseconds.
func (m *Machine) WouldEscalate(s Sample, now time.Time) bool {
	r := m.cfg.Rules
	if !m.ready || r.ManualOnly || max(r.EscalateAfter, 1) != 1 || now.Sub(m.dwellStart()) < r.EscalationDelay {
		return false
	}
	rec, _, _ := m.cfg.Table.Recommend(s, 1)
	return rec > m.auto.Level
}

// publishedPartial is the partial admission the document shows: the
// automatic level's, when no override decides.
func (m *Machine) publishedPartial() *Partial {
	if _, by, _ := m.layered(); by != 0 {
		return nil
	}
	return m.law.partial
}

// samePartial reports whether a and b admit alike.
func samePartial(a, b *Partial) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
