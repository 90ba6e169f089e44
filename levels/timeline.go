package levels

import (
	"time"
)

// LineVersion is the "v" of the timeline lines this package writes.
const LineVersion = 1

// The triggers of a timeline line: what made the controller evaluate.
const (
	// TriggerStart: the first health check of a daemon's run.
	TriggerStart = "start"
	// TriggerTick: a periodic health check.
	TriggerTick = "tick"
	// TriggerEvent: an event-driven evaluation after an outcome report or
	// a pushed value (see [Event]).
	TriggerEvent = "event"
	// TriggerReload: a config reload, which is not a tick.
	TriggerReload = "reload"
)

// Line is one line of the recorded timeline (DESIGN.md "Timeline and
// replay"): what one evaluation saw and published. The controller builds
// it; the recorder writes it as one JSON line; `degraded replay` reads it
// back and runs [Next] or [Event] over [Line.Sample]. It lives here, in the
// domain root, so that all three share it without importing each other.
type Line struct {
	// V is the schema version, [LineVersion].
	V int `json:"v"`
	// At is when the evaluation ran.
	At time.Time `json:"at"`
	// Trigger is one of TriggerStart, TriggerTick, TriggerEvent,
	// TriggerReload.
	Trigger string `json:"trigger"`
	// Signals holds every signal the sample mentions, by name.
	Signals map[Signal]LineSignal `json:"signals"`
	// Window holds the error window's counts.
	Window LineWindow `json:"window"`
	// Published and Recommended are level names; Source is the state
	// document's source (auto, override, fleet).
	Published   string `json:"published"`
	Recommended string `json:"recommended"`
	Source      string `json:"source"`
	// Override is the local override in force, FleetOverride the fleet's;
	// nil without one.
	Override      *LineOverride `json:"override"`
	FleetOverride *LineOverride `json:"fleet_override"`
	// JitterR is the random draw the rules used at this evaluation.
	JitterR float64 `json:"jitter_r"`
}

// LineSignal is one signal in a [Line]: its value (nil without one), its
// state's name, and its recovery value (PSI's avg60; nil without one).
type LineSignal struct {
	Value *float64 `json:"value"`
	State string   `json:"state"`
	Avg60 *float64 `json:"avg60"`
}

// LineWindow is the error window's counts in a [Line]. LatencyCounts has
// one count per latency bucket (errwindow.LatencyBounds), nil when the
// window keeps no latencies.
type LineWindow struct {
	Attempts      int64   `json:"attempts"`
	Failures      int64   `json:"failures"`
	LatencyCounts []int64 `json:"latency_counts"`
}

// LineOverride is an override in a [Line].
type LineOverride struct {
	Level     string    `json:"level"`
	Mode      string    `json:"mode"`
	Reason    string    `json:"reason"`
	SetAt     time.Time `json:"set_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// NewLine returns the line of an evaluation at `at` of sample s: its
// signals and window counts, version and trigger set. The caller fills in
// the latency counts, the levels, the source and the overrides.
func NewLine(at time.Time, trigger string, s Sample) Line {
	l := Line{V: LineVersion, At: at.UTC(), Trigger: trigger, Signals: make(map[Signal]LineSignal, len(s.States)),
		Window: LineWindow{Attempts: s.WindowAttempts, Failures: s.WindowFailures}}
	for sig, st := range s.States {
		ls := LineSignal{State: st.String()}
		if v, ok := s.Values[sig]; ok {
			ls.Value = &v
		}
		if r, ok := s.Recovery[sig]; ok {
			ls.Avg60 = &r
		}
		l.Signals[sig] = ls
	}
	return l
}

// Sample returns the sample the line records: what [NewLine] read from.
// A state name it does not know reads as Off.
func (l Line) Sample() Sample {
	s := Sample{Values: make(map[Signal]float64, len(l.Signals)), States: make(map[Signal]SignalState, len(l.Signals)),
		WindowAttempts: l.Window.Attempts, WindowFailures: l.Window.Failures, SampledAt: l.At}
	for sig, ls := range l.Signals {
		s.States[sig], _ = stateByName(ls.State) // unknown: Off
		if ls.Value != nil {
			s.Values[sig] = *ls.Value
		}
		if ls.Avg60 != nil {
			if s.Recovery == nil {
				s.Recovery = map[Signal]float64{}
			}
			s.Recovery[sig] = *ls.Avg60
		}
	}
	for _, n := range l.Window.LatencyCounts {
		s.LatencyObservations += n
	}
	return s
}

// Event applies an event-driven evaluation's sample at now to the
// automatic level: upward only, only when EscalateAfter is 1 and a.Level
// has been held EscalationDelay, and then straight to the level the sample
// asks for. It is not a tick: it counts nothing towards EscalateAfter, never
// steps down and leaves the blind clocks alone. Like [Next] it is pure; the
// controller and `degraded replay` run exactly this code.
func Event(a Auto, t *Table, s Sample, now time.Time, r Rules) (Auto, Move) {
	rec, why, _ := t.Recommend(s, 1)
	a.Recommended = rec
	m := Move{From: a.Level, To: a.Level}
	if !r.ManualOnly && max(r.EscalateAfter, 1) == 1 && rec > a.Level && now.Sub(a.Since) >= r.EscalationDelay {
		a.Level, a.Since = rec, now
		m.To, m.Reason = rec, why.String()
	}
	return a, m
}
