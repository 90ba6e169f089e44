package levels

import (
	"errors"
	"fmt"
	"math"
)

// Signal names one input of the recommendation. The set of signals is the
// list below: adding one is one entry there (its names and its unit) plus
// a sampler that produces its value.
type Signal int

// The signals, in the order a reason names them when several trigger the
// same level.
const (
	ErrorRate Signal = iota
	CPU
	Memory
)

// spec is everything the rest of the program knows about a signal.
type spec struct {
	// name is the signal's name: reasons, signals.status keys, metric
	// labels.
	name string
	// key names the signal's value in the state document's signals object
	// and its threshold in levels[] (config and GET /v1/levels).
	key string
	// unit is printed after values and thresholds in reasons ("%").
	unit string
}

var specs = [...]spec{
	ErrorRate: {name: "error_rate", key: "error_rate_percent", unit: "%"},
	CPU:       {name: "cpu", key: "cpu_percent", unit: "%"},
	Memory:    {name: "memory", key: "memory_percent", unit: "%"},
}

// NumSignals is the number of signals; they are numbered 0..NumSignals-1.
const NumSignals = len(specs)

// AllSignals lists the signals in order.
var AllSignals = func() []Signal {
	all := make([]Signal, NumSignals)
	for i := range all {
		all[i] = Signal(i)
	}
	return all
}()

func (s Signal) valid() bool { return s >= 0 && int(s) < NumSignals }

// String returns the signal's name, used in reasons, in signals.status and
// in metric labels: error_rate, cpu, memory.
func (s Signal) String() string {
	if !s.valid() {
		return fmt.Sprintf("signal(%d)", int(s))
	}
	return specs[s].name
}

// Key returns the name of the signal's value in the state document and of
// its threshold in a level: error_rate_percent, cpu_percent, memory_percent.
func (s Signal) Key() string {
	if !s.valid() {
		return s.String()
	}
	return specs[s].key
}

// SignalByName returns the signal named name (its String), and whether
// there is one.
func SignalByName(name string) (Signal, bool) {
	for _, s := range AllSignals {
		if specs[s].name == name {
			return s, true
		}
	}
	return 0, false
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
}

// String renders the trigger as a reason, e.g.
// "error_rate 6.10% > 5% (Moderate)".
func (t Trigger) String() string {
	unit := ""
	if t.Signal.valid() {
		unit = specs[t.Signal].unit
	}
	return fmt.Sprintf("%s %.2f%s > %s%s (%s)", t.Signal, t.Value, unit, formatNumber(t.Threshold), unit, t.Level)
}

// formatNumber prints a threshold without trailing zeros: 5, 4.5, 0.25.
func formatNumber(v float64) string {
	return fmt.Sprintf("%.4g", math.Round(v*1e4)/1e4)
}

// ErrWarmingUp is returned by a sampler that needs a second sample before it
// can compute a value, such as a CPU delta. The signal is warming for that
// health check, which is not a failure.
var ErrWarmingUp = errors.New("warming up: no previous sample")
