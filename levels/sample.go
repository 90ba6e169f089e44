package levels

import (
	"encoding/json"
	"maps"
	"slices"
	"time"
)

// Sample is the snapshot of signals one health check produced: each
// signal's value (absent when it has none) and state. It is also the
// "signals" object of the state document; see [Sample.MarshalJSON].
// Samples are shared once published: copy one with [Sample.Clone] before
// changing its maps.
type Sample struct {
	// Values holds the signals that have a value: available ones, and
	// warming ones that already have enough observations.
	Values map[Signal]float64
	// Recovery holds, for signals that have one, the second value recovery
	// also needs below its threshold (PSI's avg60 beside avg10).
	Recovery map[Signal]float64
	// States holds each signal's state; a missing signal is Off. Custom
	// signals appear here (and in the document) once configured.
	States map[Signal]SignalState
	// WindowAttempts and WindowFailures are the error window's counts,
	// published even when the rate has no value; LatencyObservations
	// counts the latencies in the window.
	WindowAttempts      int64
	WindowFailures      int64
	LatencyObservations int64
	// ErrorRateLabel names the error rate in a reason when it is not this
	// instance's window alone ("fleet error_rate"; "" is "error_rate"),
	// and ErrorRateNote is appended to such a reason (" over 7 instances",
	// " (local: fleet unreachable)"). Neither is published.
	ErrorRateLabel, ErrorRateNote string
	// SampledAt is when the health check ran; zero before the first.
	SampledAt time.Time
}

// Value returns the sample's value for sig, and whether it has one.
func (s Sample) Value(sig Signal) (float64, bool) {
	v, ok := s.Values[sig]
	return v, ok
}

// State returns sig's state (Off when the sample does not mention it).
func (s Sample) State(sig Signal) SignalState { return s.States[sig] }

// Blind reports whether no signal has a value while some are warming or
// failed. With Rules.BlindHold > 0 such a sample never steps the level
// down when one of those signals has a threshold at the level or above
// (see Next); with BlindHold 0 nothing blind holds. A sample whose signals
// are all absent or off is not blind: low traffic is not an incident.
func (s Sample) Blind() bool {
	if len(s.Values) > 0 {
		return false
	}
	for _, st := range s.States {
		if st.Blind() {
			return true
		}
	}
	return false
}

// Clone returns a copy that shares no maps with s.
func (s Sample) Clone() Sample {
	c := s
	c.Values = maps.Clone(s.Values)
	c.Recovery = maps.Clone(s.Recovery)
	c.States = maps.Clone(s.States)
	if c.Values == nil {
		c.Values = map[Signal]float64{}
	}
	if c.States == nil {
		c.States = map[Signal]SignalState{}
	}
	if c.Recovery == nil {
		c.Recovery = map[Signal]float64{}
	}
	return c
}

// forRecovery returns the sample recovery is judged on: each value raised
// to its recovery value (avg60) where that is higher, so that a short lull
// during a long stall is not a recovery.
func (s Sample) forRecovery() Sample {
	if len(s.Recovery) == 0 {
		return s
	}
	c := s
	c.Values = maps.Clone(s.Values)
	for sig, r := range s.Recovery {
		if v, ok := c.Values[sig]; ok && r > v {
			c.Values[sig] = r
		}
	}
	return c
}

// customs returns the custom signals the sample mentions, sorted.
func (s Sample) customs() []Signal {
	var out []Signal
	for sig := range s.States {
		if !sig.Builtin() {
			out = append(out, sig)
		}
	}
	slices.Sort(out)
	return out
}

// MarshalJSON writes the state document's "signals" object: every
// built-in signal's value under its Key (null without a value) and its
// recovery value under RecoveryKey, the custom signals' values under
// "custom", the window counts, sampled_at (null before the first health
// check) and status, each signal's state by name (null before the first
// health check).
func (s Sample) MarshalJSON() ([]byte, error) {
	doc := make(map[string]any, 2*len(AllSignals)+6)
	for _, sig := range AllSignals {
		doc[sig.Key()] = value(s.Values, sig)
		if k := sig.RecoveryKey(); k != "" {
			doc[k] = value(s.Recovery, sig)
		}
	}
	custom := map[string]any{}
	for _, sig := range s.customs() {
		custom[string(sig)] = value(s.Values, sig)
	}
	doc["custom"] = custom
	doc["window_attempts"] = s.WindowAttempts
	doc["window_failures"] = s.WindowFailures
	doc["latency_observations"] = s.LatencyObservations
	doc["sampled_at"] = nil
	doc["status"] = nil
	if !s.SampledAt.IsZero() {
		doc["sampled_at"] = s.SampledAt.UTC()
		status := make(map[string]string, len(AllSignals))
		for _, sig := range append(slices.Clone(AllSignals), s.customs()...) {
			status[string(sig)] = s.State(sig).String()
		}
		doc["status"] = status
	}
	return json.Marshal(doc)
}

// value is m[sig] for JSON: the number, or nil.
func value(m map[Signal]float64, sig Signal) any {
	if v, ok := m[sig]; ok {
		return v
	}
	return nil
}

// UnmarshalJSON reads what MarshalJSON writes. Unknown keys and unknown
// state names are ignored, so a newer daemon's document still reads.
func (s *Sample) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	var doc struct {
		WindowAttempts      int64               `json:"window_attempts"`
		WindowFailures      int64               `json:"window_failures"`
		LatencyObservations int64               `json:"latency_observations"`
		SampledAt           *time.Time          `json:"sampled_at"`
		Status              map[string]string   `json:"status"`
		Custom              map[string]*float64 `json:"custom"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	*s = Sample{WindowAttempts: doc.WindowAttempts, WindowFailures: doc.WindowFailures, LatencyObservations: doc.LatencyObservations,
		Values: map[Signal]float64{}, States: map[Signal]SignalState{}}
	if doc.SampledAt != nil {
		s.SampledAt = *doc.SampledAt
	}
	read := func(key string) (float64, bool) {
		var v *float64
		if m, ok := raw[key]; ok && json.Unmarshal(m, &v) == nil && v != nil {
			return *v, true
		}
		return 0, false
	}
	for _, sig := range AllSignals {
		if v, ok := read(sig.Key()); ok {
			s.Values[sig] = v
		}
		if k := sig.RecoveryKey(); k != "" {
			if v, ok := read(k); ok {
				if s.Recovery == nil {
					s.Recovery = map[Signal]float64{}
				}
				s.Recovery[sig] = v
			}
		}
	}
	for name, v := range doc.Custom {
		if v != nil {
			s.Values[Signal(name)] = *v
		}
	}
	for name, state := range doc.Status {
		if st, ok := stateByName(state); ok {
			s.States[Signal(name)] = st
		}
	}
	return nil
}
