package timeline

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/degraded/degraded/levels"
)

// maxChanges bounds the changes a reload mark lists.
const maxChanges = 12

// marks adds the marks a line in range makes: its own (override, fleet,
// reload, start lines), and an override's or fleet override's end that a
// tick applied (expired), or that a recording from before override lines
// shows only as a change between lines.
func (b *Builder) marks(l *levels.Line, first bool) {
	base := Mark{At: l.At.UTC(), Actor: l.Actor, Published: l.Published}
	switch l.Trigger {
	case levels.TriggerStart:
		m := base
		m.Kind, m.Reason, m.Digest = MarkRestart, "daemon started", l.ConfigDigest
		if m.Actor == "" {
			m.Actor = levels.ActorDaemon
		}
		if l.Config != nil && b.table != nil && l.ConfigDigest != b.digest {
			m.Changes = changes(b.table, l.Config)
		}
		b.mark(m)
	case levels.TriggerReload:
		m := base
		m.Kind, m.Reason, m.Digest = MarkReload, "config reload", l.ConfigDigest
		if l.Config != nil && b.table != nil {
			m.Changes = changes(b.table, l.Config)
		}
		b.mark(m)
	case levels.TriggerOverride:
		if r := l.Request; r != nil {
			m := base
			m.Kind, m.Action = MarkOverride, r.Action
			if r.Action == "clear" {
				describe(&m, b.override)
				if r.Reason != "" {
					m.Reason = r.Reason
				}
			} else {
				m.Level, m.Mode, m.TTL, m.Reason = r.Level, r.Mode, r.TTL, r.Reason
			}
			b.mark(m)
			return
		}
	case levels.TriggerFleet:
		if f := l.Fleet; f != nil {
			m := base
			m.Kind = MarkFleet
			switch {
			case f.Override != nil:
				m.Action = "set"
				describe(&m, f.Override)
				m.TTL = f.TTL
			case f.Expired:
				m.Action = "expired"
				describe(&m, b.fleet)
			default:
				m.Action = "clear"
				describe(&m, b.fleet)
			}
			if m.Actor == "" && f.Override != nil {
				m.Actor = f.Override.Actor
			}
			b.mark(m)
			return
		}
	}
	if !b.primed || first && l.Trigger == levels.TriggerStart {
		return
	}
	// What changed between lines without a line of its own.
	if l.Trigger != levels.TriggerOverride {
		b.derived(base, MarkOverride, b.override, l.Override)
	}
	if l.Trigger != levels.TriggerFleet {
		b.derived(base, MarkFleet, b.fleet, l.FleetOverride)
	}
}

// derived marks the change from the override before (was) to the one of
// this line (now): an end is "expired", a new one "set".
func (b *Builder) derived(base Mark, kind string, was, now *levels.LineOverride) {
	switch {
	case same(was, now):
	case now == nil:
		m := base
		m.Kind, m.Action = kind, "expired"
		describe(&m, was)
		m.Actor = levels.ActorDaemon
		b.mark(m)
	default:
		m := base
		m.Kind, m.Action = kind, "set"
		describe(&m, now)
		m.TTL = now.ExpiresAt.Sub(now.SetAt).String()
		b.mark(m)
	}
}

// same reports whether two lines record the same override.
func same(a, b *levels.LineOverride) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Level == b.Level && a.Mode == b.Mode && a.SetAt.Equal(b.SetAt)
}

// describe fills a mark's override fields from o; its actor when the
// line names none.
func describe(m *Mark, o *levels.LineOverride) {
	if o == nil {
		return
	}
	m.Level, m.Mode, m.Reason = o.Level, o.Mode, o.Reason
	if m.Actor == "" {
		m.Actor = o.Actor
	}
}

func (b *Builder) mark(m Mark) {
	if len(b.s.Marks) >= maxMarks {
		b.s.MarksDropped++
		return
	}
	b.s.Marks = append(b.s.Marks, m)
}

// changes says in words how the config went from a to b: levels added and
// removed, priority thresholds and signal thresholds changed, and the
// rules whose value changed, at most maxChanges of them.
func changes(a, b *levels.LineConfig) []string {
	var out []string
	old := map[string]levels.LineLevel{}
	for _, lv := range a.Levels {
		old[lv.Name] = lv
	}
	seen := map[string]bool{}
	for _, lv := range b.Levels {
		seen[lv.Name] = true
		was, ok := old[lv.Name]
		if !ok {
			out = append(out, lv.Name+" added")
			continue
		}
		if was.PriorityThreshold != lv.PriorityThreshold {
			out = append(out, fmt.Sprintf("%s.priority_threshold %d -> %d", lv.Name, was.PriorityThreshold, lv.PriorityThreshold))
		}
		sigs := make([]levels.Signal, 0, len(lv.Thresholds)+len(was.Thresholds))
		for sig := range lv.Thresholds {
			sigs = append(sigs, sig)
		}
		for sig := range was.Thresholds {
			if _, ok := lv.Thresholds[sig]; !ok {
				sigs = append(sigs, sig)
			}
		}
		slices.SortFunc(sigs, signalOrder)
		for _, sig := range sigs {
			v, ok1 := was.Thresholds[sig]
			w, ok2 := lv.Thresholds[sig]
			if ok1 != ok2 || v != w {
				out = append(out, fmt.Sprintf("%s.%s %s -> %s", lv.Name, sig, number(v, ok1), number(w, ok2)))
			}
		}
	}
	for _, lv := range a.Levels {
		if !seen[lv.Name] {
			out = append(out, lv.Name+" removed")
		}
	}
	out = append(out, ruleChanges(a.Rules, b.Rules)...)
	if len(out) > maxChanges {
		out = append(out[:maxChanges], fmt.Sprintf("and %d more", len(out)-maxChanges))
	}
	return out
}

func number(v float64, ok bool) string {
	if !ok {
		return "none"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// ruleChanges lists the rules whose value differs, by their JSON names.
func ruleChanges(a, b levels.LineRules) []string {
	var ma, mb map[string]any
	ja, _ := json.Marshal(a) // plain values: they always encode
	jb, _ := json.Marshal(b)
	if json.Unmarshal(ja, &ma) != nil || json.Unmarshal(jb, &mb) != nil {
		return nil
	}
	keys := make([]string, 0, len(mb))
	for k := range mb {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		x, _ := json.Marshal(ma[k])
		y, _ := json.Marshal(mb[k])
		if string(x) != string(y) {
			out = append(out, fmt.Sprintf("%s %s -> %s", k, x, y))
		}
	}
	return out
}
