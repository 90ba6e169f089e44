package levels

import (
	"encoding/json"
	"time"
)

// Sample is the snapshot of signals one health check produced: each
// signal's value (absent when it has none) and state. It is also the
// "signals" object of the state document; see [Sample.MarshalJSON].
// A Sample is a value: copy it with [Sample.Clone] before changing a map
// that others may read.
type Sample struct {
	// Values holds the signals that have a value: available ones, and
	// warming ones that already have enough observations.
	Values map[Signal]float64
	// States holds each signal's state; a missing signal is Off.
	States map[Signal]SignalState
	// WindowAttempts and WindowFailures are the error window's counts,
	// published even when the rate has no value.
	WindowAttempts int64
	WindowFailures int64
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

// Blind reports whether the sample sees nothing: no signal has a value,
// while some are warming or failed. A blind controller never steps down by
// itself.
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
	c.Values = make(map[Signal]float64, len(s.Values))
	for k, v := range s.Values {
		c.Values[k] = v
	}
	c.States = make(map[Signal]SignalState, len(s.States))
	for k, v := range s.States {
		c.States[k] = v
	}
	return c
}

// MarshalJSON writes the state document's "signals" object: every
// signal's value under its Key (null without a value), the window counts,
// sampled_at (null before the first health check) and status, each
// signal's state by name (null before the first health check).
func (s Sample) MarshalJSON() ([]byte, error) {
	doc := make(map[string]any, NumSignals+4)
	for _, sig := range AllSignals {
		if v, ok := s.Values[sig]; ok {
			doc[sig.Key()] = v
		} else {
			doc[sig.Key()] = nil
		}
	}
	doc["window_attempts"] = s.WindowAttempts
	doc["window_failures"] = s.WindowFailures
	doc["sampled_at"] = nil
	doc["status"] = nil
	if !s.SampledAt.IsZero() {
		doc["sampled_at"] = s.SampledAt.UTC()
		status := make(map[string]string, NumSignals)
		for _, sig := range AllSignals {
			status[sig.String()] = s.State(sig).String()
		}
		doc["status"] = status
	}
	return json.Marshal(doc)
}

// UnmarshalJSON reads what MarshalJSON writes. Unknown value keys and
// unknown state names are ignored, so a newer daemon's document still
// reads.
func (s *Sample) UnmarshalJSON(b []byte) error {
	var doc struct {
		WindowAttempts int64             `json:"window_attempts"`
		WindowFailures int64             `json:"window_failures"`
		SampledAt      *time.Time        `json:"sampled_at"`
		Status         map[string]string `json:"status"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	var values map[string]*float64
	if err := json.Unmarshal(b, &values); err != nil {
		// Non-numeric members (status, sampled_at) make the map fail as a
		// whole: read the value keys one by one instead.
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(b, &raw); err != nil {
			return err
		}
		values = make(map[string]*float64, len(raw))
		for _, sig := range AllSignals {
			var v *float64
			if m, ok := raw[sig.Key()]; ok && json.Unmarshal(m, &v) == nil {
				values[sig.Key()] = v
			}
		}
	}
	*s = Sample{WindowAttempts: doc.WindowAttempts, WindowFailures: doc.WindowFailures,
		Values: map[Signal]float64{}, States: map[Signal]SignalState{}}
	if doc.SampledAt != nil {
		s.SampledAt = *doc.SampledAt
	}
	for _, sig := range AllSignals {
		if v := values[sig.Key()]; v != nil {
			s.Values[sig] = *v
		}
		for _, st := range SignalStates {
			if doc.Status[sig.String()] == st.String() {
				s.States[sig] = st
			}
		}
	}
	return nil
}
