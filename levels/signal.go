package levels

import (
	"errors"
	"fmt"
	"math"
	"regexp"
)

// Signal names one input of the recommendation: a built-in signal below,
// or a custom one (pushed, or queried from Prometheus) named in the config.
// The built-in set is the list below: adding one is one entry there (its
// names and its unit) plus a sampler that produces its value.
type Signal string

// The built-in signals, in the order a reason names them when several
// trigger the same level (custom signals follow, in config order).
const (
	ErrorRate      Signal = "error_rate"
	Latency        Signal = "latency"
	CPU            Signal = "cpu"
	Memory         Signal = "memory"
	CPUPressure    Signal = "cpu_pressure"
	MemoryPressure Signal = "memory_pressure"
	IOPressure     Signal = "io_pressure"
)

// spec is everything the rest of the program knows about a built-in signal.
type spec struct {
	// key names the signal's value in the state document's signals object
	// and its threshold in levels[] (config and GET /v1/levels).
	key string
	// unit is printed after values and thresholds in reasons ("%", "ms").
	unit string
	// recoveryKey, if set, names a second value published beside key that
	// recovery also needs below its threshold (PSI's avg60).
	recoveryKey string
}

var specs = map[Signal]spec{
	ErrorRate:      {key: "error_rate_percent", unit: "%"},
	Latency:        {key: "latency_ms", unit: "ms"},
	CPU:            {key: "cpu_percent", unit: "%"},
	Memory:         {key: "memory_percent", unit: "%"},
	CPUPressure:    {key: "cpu_pressure_percent", unit: "%", recoveryKey: "cpu_pressure_avg60_percent"},
	MemoryPressure: {key: "memory_pressure_percent", unit: "%", recoveryKey: "memory_pressure_avg60_percent"},
	IOPressure:     {key: "io_pressure_percent", unit: "%", recoveryKey: "io_pressure_avg60_percent"},
}

// AllSignals lists the built-in signals in order.
var AllSignals = []Signal{ErrorRate, Latency, CPU, Memory, CPUPressure, MemoryPressure, IOPressure}

// Builtin reports whether s is a built-in signal.
func (s Signal) Builtin() bool {
	_, ok := specs[s]
	return ok
}

// String returns the signal's name, used in reasons, in signals.status and
// in metric labels.
func (s Signal) String() string { return string(s) }

// Key returns the name of the signal's value in the state document and of
// its threshold in a level: error_rate_percent, latency_ms, cpu_percent...;
// a custom signal's key is its name (under "custom").
func (s Signal) Key() string {
	if sp, ok := specs[s]; ok {
		return sp.key
	}
	return string(s)
}

// RecoveryKey returns the name of the signal's second value (PSI avg60),
// or "" for a signal without one.
func (s Signal) RecoveryKey() string { return specs[s].recoveryKey }

// customName is the rule for custom signal names (DESIGN "Signals").
var customName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// CustomNameProblem says what is wrong with name as a custom signal's
// name, or "" if nothing is: the one home of the rule.
func CustomNameProblem(name string) string {
	switch {
	case !customName.MatchString(name):
		return "must match ^[a-z][a-z0-9_]{0,62}$"
	case Signal(name).Builtin():
		return "is the name of a built-in signal"
	}
	return ""
}

// Thresholds maps a signal to the value it must strictly exceed to ask for
// a level. A signal without an entry never triggers that level.
type Thresholds map[Signal]float64

// Trigger says why a level was recommended: the signal, its value, the
// threshold it exceeded (after scaling) and the level.
type Trigger struct {
	Signal    Signal
	Value     float64
	Threshold float64
	Level     string
	// Label names the signal in the reason; "" is the signal's name. The
	// latency's is its quantile: "latency p99".
	Label string
	// Note is appended to the reason: where the value came from
	// (" over 7 instances" for the fleet's error rate).
	Note string
}

// String renders the trigger as a reason, e.g.
// "error_rate 6.10% > 5% (Moderate)", "latency p99 812ms > 500ms (Major)",
// "queue_depth 1234 > 1000 (Major)".
func (t Trigger) String() string {
	label := t.Label
	if label == "" {
		label = string(t.Signal)
	}
	sp, ok := specs[t.Signal]
	switch {
	case !ok:
		return fmt.Sprintf("%s %g > %g (%s)%s", label, t.Value, t.Threshold, t.Level, t.Note)
	case sp.unit == "ms":
		return fmt.Sprintf("%s %.0fms > %sms (%s)%s", label, t.Value, formatNumber(t.Threshold), t.Level, t.Note)
	}
	return fmt.Sprintf("%s %.2f%s > %s%s (%s)%s", label, t.Value, sp.unit, formatNumber(t.Threshold), sp.unit, t.Level, t.Note)
}

// formatNumber prints a threshold without trailing zeros: 5, 4.5, 0.25.
func formatNumber(v float64) string {
	return fmt.Sprintf("%.4g", math.Round(v*1e4)/1e4)
}

// QuantileLabel names a quantile in reasons: 0.99 is "p99", 0.999 "p99.9",
// 0.5 "p50".
func QuantileLabel(q float64) string {
	return "p" + fmt.Sprintf("%g", math.Round(q*1e6)/1e4)
}

// ErrWarmingUp is returned by a sampler that needs a second sample before it
// can compute a value, such as a CPU delta. The signal is warming for that
// health check, which is not a failure.
var ErrWarmingUp = errors.New("warming up: no previous sample")
