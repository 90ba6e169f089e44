package levels

import (
	"time"
)

// LineVersion is the "v" of the timeline lines this package writes.
const LineVersion = 1

// The triggers of a timeline line: which input of the machine it records.
const (
	// TriggerStart: the first health check of a daemon's run.
	TriggerStart = "start"
	// TriggerTick: a periodic health check.
	TriggerTick = "tick"
	// TriggerEvent: an event-driven evaluation of reports or pushed
	// values between health checks.
	TriggerEvent = "event"
	// TriggerReload: a config reload, which is not a tick.
	TriggerReload = "reload"
	// TriggerOverride: a local override set or cleared.
	TriggerOverride = "override"
	// TriggerFleet: a fleet override update.
	TriggerFleet = "fleet"
)

// Line is one line of the recorded timeline (DESIGN.md "Timeline and
// replay"): one input of the machine, what it saw and what was published
// after it. Every input is a line, so a recording holds all the machine
// saw and `degraded replay` can feed the same inputs to the same machine.
// It lives here, in the domain root, so that the controller, the recorder
// and replay share it without importing each other.
type Line struct {
	// V is the schema version, [LineVersion].
	V int `json:"v"`
	// At is when the input was applied.
	At time.Time `json:"at"`
	// Trigger is one of the Trigger constants.
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
	// JitterR is the automatic level's recovery draw after the input (the
	// one it drew, when it entered a level or ended an override).
	JitterR float64 `json:"jitter_r"`
	// Partial is the published partial admission; nil without one.
	Partial *Partial `json:"partial"`
	// Reports are the outcome reports an evaluation took (the admission
	// law's input), merged per reporter and sequence (MergeReports).
	Reports []LineReport `json:"reports,omitempty"`
	// Request is an override line's request: set or clear, by whom.
	Request *LineRequest `json:"request,omitempty"`
	// Fleet is a fleet line's update as etcd held it.
	Fleet *LineFleet `json:"fleet,omitempty"`
	// ConfigDigest identifies the machine's config in force (Config.Digest).
	ConfigDigest string `json:"config_digest,omitempty"`
	// Config is the machine's config on start and reload lines: the level
	// table and the rules, enough to rebuild it.
	Config *LineConfig `json:"config,omitempty"`
	// Renewed, on a reload line, lists the signals whose samplers were
	// re-created (their blind clocks started again).
	Renewed []Signal `json:"renewed,omitempty"`
	// Actor names who made an override, fleet or reload line's change.
	Actor string `json:"actor,omitempty"`
}

// LineSignal is one signal in a [Line]: its value (nil without one), its
// state's name, and its recovery value (PSI's avg60; nil without one).
type LineSignal struct {
	Value *float64 `json:"value"`
	State string   `json:"state"`
	Avg60 *float64 `json:"avg60"`
}

// LineWindow is the error window's counts in a [Line]. LatencyCounts has
// one count per latency bucket (LatencyBounds), nil when the window keeps
// no latencies. Fleet holds the fleet's summed window when the error rate
// was the fleet's (error_rate_scope: fleet); nil otherwise.
type LineWindow struct {
	Attempts      int64            `json:"attempts"`
	Failures      int64            `json:"failures"`
	LatencyCounts []int64          `json:"latency_counts"`
	Fleet         *LineFleetWindow `json:"fleet,omitempty"`
}

// LineFleetWindow is the fleet's window an error rate used.
type LineFleetWindow struct {
	Attempts  int64 `json:"attempts"`
	Failures  int64 `json:"failures"`
	Instances int   `json:"instances"`
}

// LineOverride is an override in a [Line].
type LineOverride struct {
	Level     string    `json:"level"`
	Mode      string    `json:"mode"`
	Reason    string    `json:"reason"`
	SetAt     time.Time `json:"set_at"`
	ExpiresAt time.Time `json:"expires_at"`
	Actor     string    `json:"actor,omitempty"`
}

// LineOf is o as a line holds it; nil for nil.
func LineOf(o *Override) *LineOverride {
	if o == nil {
		return nil
	}
	return &LineOverride{Level: o.Level, Mode: string(o.Mode), Reason: o.Reason, SetAt: o.SetAt, ExpiresAt: o.ExpiresAt, Actor: o.Actor}
}

// Override is the override the line records.
func (o *LineOverride) Override() *Override {
	if o == nil {
		return nil
	}
	return &Override{Level: o.Level, Mode: Mode(o.Mode), Reason: o.Reason, SetAt: o.SetAt, ExpiresAt: o.ExpiresAt, Actor: o.Actor}
}

// LineRequest is an override line's request: Action "set" with the
// override asked for, or "clear".
type LineRequest struct {
	Action string `json:"action"`
	Level  string `json:"level,omitempty"`
	Mode   string `json:"mode,omitempty"`
	TTL    string `json:"ttl,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// LineFleet is a fleet line's update.
type LineFleet struct {
	Override *LineOverride `json:"override"`
	TTL      string        `json:"ttl,omitempty"`
	Revision int64         `json:"revision"`
	Expired  bool          `json:"expired,omitempty"`
	Reset    bool          `json:"reset,omitempty"`
}

// LineReport is one (merged) outcome report in a [Line].
type LineReport struct {
	At            time.Time      `json:"at"`
	Success       int64          `json:"success"`
	Failure       int64          `json:"failure"`
	LatencyCounts []int64        `json:"latency_counts,omitempty"`
	Admission     *LineAdmission `json:"admission,omitempty"`
}

// LineAdmission is a report's admission object in a [Line].
type LineAdmission struct {
	Sequence    uint64        `json:"sequence"`
	Admitted    int64         `json:"admitted"`
	ShedPartial int64         `json:"shed_partial"`
	ShedBelow   int64         `json:"shed_below"`
	Seconds     float64       `json:"seconds"`
	Arrival     float64       `json:"arrival_seconds,omitempty"`
	Reporter    string        `json:"reporter,omitempty"`
	Offered     map[int]int64 `json:"offered,omitempty"`
}

// NewLine returns the line of an input at `at` whose sample is s: its
// signals and window counts, version and trigger set. The caller fills in
// the rest.
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

// LineReports is rs as a line records them.
func LineReports(rs []Report) []LineReport {
	if len(rs) == 0 {
		return nil
	}
	out := make([]LineReport, len(rs))
	for i, r := range rs {
		out[i] = LineReport{At: r.At.UTC(), Success: r.Success, Failure: r.Failure, LatencyCounts: r.Latency}
		if a := r.Admission; a != nil {
			out[i].Admission = &LineAdmission{Sequence: a.Sequence, Admitted: a.Admitted, ShedPartial: a.ShedPartial, ShedBelow: a.ShedBelow,
				Seconds: a.Seconds, Arrival: a.Arrival, Reporter: a.Reporter, Offered: a.Offered}
		}
	}
	return out
}

// Inputs returns the reports the line records, as the machine took them.
func (l Line) Inputs() []Report {
	if len(l.Reports) == 0 {
		return nil
	}
	out := make([]Report, len(l.Reports))
	for i, r := range l.Reports {
		out[i] = Report{At: r.At, Success: r.Success, Failure: r.Failure, Latency: r.LatencyCounts}
		if a := r.Admission; a != nil {
			out[i].Admission = &Admission{Sequence: a.Sequence, Admitted: a.Admitted, ShedPartial: a.ShedPartial, ShedBelow: a.ShedBelow,
				Seconds: a.Seconds, Arrival: a.Arrival, Reporter: a.Reporter, Offered: a.Offered}
		}
	}
	return out
}

// Event applies an event-driven evaluation's sample at now to the
// automatic level: upward only, only when EscalateAfter is 1 and a.Level
// has been held EscalationDelay, and then straight to the level the sample
// asks for. It is not a tick: it counts nothing towards EscalateAfter, never
// steps down and leaves the blind clocks alone. Like [Next] it is pure.
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
