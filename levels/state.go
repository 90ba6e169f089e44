package levels

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// SignalState says how far a signal can be trusted at one health check.
// Only an Available signal is evidence that a level may be left; see
// DESIGN.md "Unknown is not healthy".
type SignalState int

// The five signal states.
const (
	// Off: not configured (source off, or no level has a threshold for it).
	Off SignalState = iota
	// Available: the signal has a trusted value.
	Available
	// Warming: the signal has not been observed for long enough since the
	// start or since its sampler was (re)created. A warming error window
	// that already holds min_throughput observations has a value.
	Warming
	// Failed: the sampler returned an error, or a value went stale.
	Failed
	// Absent: too little traffic after warming. Low traffic is not an
	// incident, so an absent signal never holds recovery.
	Absent
)

// SignalStates lists every state, for exporting one series per state.
var SignalStates = []SignalState{Available, Warming, Failed, Absent, Off}

var stateNames = [...]string{Off: "off", Available: "available", Warming: "warming", Failed: "failed", Absent: "absent"}

// String returns the state's name as published in signals.status.
func (s SignalState) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return fmt.Sprintf("state(%d)", int(s))
	}
	return stateNames[s]
}

// stateByName is the state whose String is name, and whether there is
// one: how a state document or a timeline line is read back.
func stateByName(name string) (SignalState, bool) {
	for _, st := range SignalStates {
		if st.String() == name {
			return st, true
		}
	}
	return Off, false
}

// Blind reports whether the signal is warming or failed: it cannot say
// whether a level may be left, so it holds recovery (see [BlindHolds]).
func (s SignalState) Blind() bool { return s == Warming || s == Failed }

// Uses reports whether any level has a threshold for sig.
func (t *Table) Uses(sig Signal) bool { return t.ThresholdFrom(sig, 1) }

// ThresholdFrom reports whether sig has a threshold at level index or at a
// more severe level: whether it has a say in leaving that level.
func (t *Table) ThresholdFrom(sig Signal, index int) bool {
	for i := max(index, 1); i < len(t.levels); i++ {
		if _, ok := t.levels[i].Threshold(sig); ok {
			return true
		}
	}
	return false
}

// Map finds a level of this table for a level that another table (an
// older config, or a state file) called name, with the given priority
// threshold. A level of the same name (case-insensitively) is itself;
// otherwise it is the least severe level whose priority threshold is at
// least priority, else the most severe level. found is false when the name
// is not in the table. Pass math.MaxInt as priority when it is unknown.
func (t *Table) Map(name string, priority int) (index int, found bool) {
	if i, err := t.Index(name); err == nil {
		return i, true
	}
	for i := 1; i < len(t.levels); i++ {
		if t.levels[i].PriorityThreshold >= priority {
			return i, false
		}
	}
	return len(t.levels) - 1, false
}

// BlindSignal is a signal that was ignored in a recovery decision because
// it had been blind for longer than blind_hold while another signal could
// see.
type BlindSignal struct {
	Signal Signal
	State  SignalState
	For    time.Duration
}

// String renders the signal for a reason, e.g. "cpu failed for 5m3s".
func (b BlindSignal) String() string {
	return fmt.Sprintf("%s %s for %s", b.Signal, b.State, FormatDuration(b.For))
}

// FormatDuration renders d rounded to whole seconds with zero units left
// out: 5m3s, 6m, 1h5s, 0s.
func FormatDuration(d time.Duration) string {
	s := int64(math.Round(d.Seconds()))
	if s <= 0 {
		return "0s"
	}
	var b strings.Builder
	for _, u := range []struct {
		n    int64
		unit string
	}{{s / 3600, "h"}, {s / 60 % 60, "m"}, {s % 60, "s"}} {
		if u.n > 0 {
			fmt.Fprintf(&b, "%d%s", u.n, u.unit)
		}
	}
	return b.String()
}

// Reading is what a source of signals says about one signal at a health
// check: its state and, when it has one, its value. Sources that measure
// several signals at once (PSI) return one Reading per signal.
type Reading struct {
	Signal Signal
	State  SignalState
	// Value is the signal's value; it counts only when HasValue is set
	// (Available readings always have one).
	Value    float64
	HasValue bool
	// Recovery, when set, is the second value recovery also needs below
	// the threshold (PSI's avg60).
	Recovery *float64
	// Err says why a Failed reading failed; the controller logs it.
	Err error
}

// ReadingOf turns a sampler's answer into a reading of sig: a value is
// available, ErrWarmingUp is warming, ErrAbsent is absent, any other error
// is failed. It is the one mapping of sampler errors to states, for the
// controller's samplers and the signals package's sources alike.
func ReadingOf(sig Signal, v float64, err error) Reading {
	switch {
	case err == nil:
		return Reading{Signal: sig, State: Available, Value: v, HasValue: true}
	case errors.Is(err, ErrWarmingUp):
		return Reading{Signal: sig, State: Warming}
	case errors.Is(err, ErrAbsent):
		return Reading{Signal: sig, State: Absent}
	}
	return Reading{Signal: sig, State: Failed, Err: err}
}

// ErrAbsent is returned by a sampler whose source answered with no data:
// the signal is absent (an empty query result), which is not a failure.
var ErrAbsent = errors.New("no data")

// ErrUnknownSignal is the error of a value pushed for a name that is not a
// configured custom signal.
var ErrUnknownSignal = errors.New("no such custom signal")

// ErrQueried is the error of a value pushed for a custom signal that a
// Prometheus query feeds: it cannot be pushed.
var ErrQueried = errors.New("the signal is fed by a Prometheus query, not pushed")

// lowestLevel is the least severe level with a threshold for sig, and
// lowestThreshold that threshold: where the admission law judges the
// signal (below it, the signal asks for nothing).
func (t *Table) lowestLevel(sig Signal) int {
	for i := 1; i < len(t.levels); i++ {
		if _, ok := t.levels[i].Threshold(sig); ok {
			return i
		}
	}
	return 0
}

// errorLevel is the most severe level whose error rate threshold a
// failure ratio of pct percent exceeds, 0 if none does.
func (t *Table) errorLevel(pct float64) int {
	for i := len(t.levels) - 1; i > 0; i-- {
		if th, ok := t.levels[i].Threshold(ErrorRate); ok && pct > th {
			return i
		}
	}
	return 0
}

func (t *Table) lowestThreshold(sig Signal) (float64, bool) {
	i := t.lowestLevel(sig)
	if i == 0 {
		return 0, false
	}
	return t.levels[i].Threshold(sig)
}
