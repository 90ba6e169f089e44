package levels

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Signal names one input of the recommendation.
type Signal int

// The signals, in the order a reason names them when several trigger the
// same level.
const (
	ErrorRate Signal = iota
	CPU
	Memory
)

// NumSignals is the number of signals; they are numbered 0..NumSignals-1.
const NumSignals = int(Memory) + 1

// AllSignals lists the signals in order.
var AllSignals = []Signal{ErrorRate, CPU, Memory}

var signalNames = [...]string{ErrorRate: "error_rate", CPU: "cpu", Memory: "memory"}

// String returns the name used in reasons and metrics labels: error_rate,
// cpu or memory.
func (s Signal) String() string {
	if s < 0 || int(s) >= len(signalNames) {
		return fmt.Sprintf("signal(%d)", int(s))
	}
	return signalNames[s]
}

// Sample is the snapshot of signals one health check produced. A nil value
// means the signal is unavailable (off, failed to sample, or too little
// traffic) and triggers nothing.
type Sample struct {
	CPUPercent       *float64
	MemoryPercent    *float64
	ErrorRatePercent *float64
	// WindowAttempts and WindowFailures are the error window's counts,
	// published even when the rate is below min_throughput.
	WindowAttempts int64
	WindowFailures int64
	SampledAt      time.Time
}

// Value returns the sample's value for s, or nil.
func (s Sample) Value(sig Signal) *float64 {
	switch sig {
	case CPU:
		return s.CPUPercent
	case Memory:
		return s.MemoryPercent
	default:
		return s.ErrorRatePercent
	}
}

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
	return fmt.Sprintf("%s %.2f%% > %s%% (%s)", t.Signal, t.Value, formatPercent(t.Threshold), t.Level)
}

// formatPercent prints a threshold without trailing zeros: 5, 4.5, 0.25.
func formatPercent(v float64) string {
	return fmt.Sprintf("%.4g", math.Round(v*1e4)/1e4)
}

// Recommend returns the most severe level for which any available signal
// strictly exceeds that level's threshold multiplied by scale, and the
// trigger that decided it. It returns 0 (Normal) and ok == false when no
// signal exceeds any threshold.
//
// The controller calls it with scale 1 to decide escalation and with
// scale 1-hysteresis to decide recovery.
func (t *Table) Recommend(s Sample, scale float64) (index int, why Trigger, ok bool) {
	for i := len(t.levels) - 1; i >= 1; i-- {
		l := t.levels[i]
		for sig := ErrorRate; sig <= Memory; sig++ {
			th, v := l.threshold(sig), s.Value(sig)
			if th == nil || v == nil {
				continue
			}
			limit := *th * scale
			if *v > limit {
				return i, Trigger{Signal: sig, Value: *v, Threshold: limit, Level: l.Name}, true
			}
		}
	}
	return 0, Trigger{}, false
}

// RecoveryReason is the reason recorded when the level steps down from
// the named level, e.g. "recovered: all signals below Moderate thresholds
// less 10% hysteresis". Blind signals that were ignored because another
// signal could see are named after it: "recovered: all available signals
// below Major thresholds less 10% hysteresis; cpu failed for 5m3s".
func RecoveryReason(from string, hysteresis float64, ignored ...BlindSignal) string {
	if len(ignored) == 0 {
		return fmt.Sprintf("recovered: all signals below %s thresholds less %s%% hysteresis", from, formatPercent(hysteresis*100))
	}
	names := make([]string, len(ignored))
	for i, b := range ignored {
		names[i] = b.String()
	}
	return fmt.Sprintf("recovered: all available signals below %s thresholds less %s%% hysteresis; %s",
		from, formatPercent(hysteresis*100), strings.Join(names, ", "))
}

// ErrWarmingUp is returned by a sampler that needs a second sample before it
// can compute a value, such as a CPU delta. The signal is unavailable for
// that health check, but it is not a failure.
var ErrWarmingUp = errors.New("warming up: no previous sample")
