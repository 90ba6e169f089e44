package client

import (
	"maps"
	"math"
	"sync/atomic"
	"time"
)

// PriorityCritical is the priority admitted at every level, and the only
// one admitted when FailClosed decides.
const PriorityCritical = math.MaxInt32

// Sources of [State.Source]: the layer that set the published level,
// auto -> fleet -> override (a local override).
const (
	SourceAuto     = "auto"
	SourceFleet    = "fleet"
	SourceOverride = "override"
)

// State is the daemon's state document (GET /v1/level and every SSE
// event) with Go names; its JSON form is the wire form. The zero value
// (Level == "") means no state has arrived yet. A State returned by the
// client is a copy the caller may keep and modify.
type State struct {
	// Level is the published level's name; "Normal" is level 0.
	Level string `json:"level"`
	// Index is the level's position in the table; higher is more severe.
	Index int `json:"index"`
	// PriorityThreshold is the lowest priority admitted at Level.
	PriorityThreshold int `json:"priority_threshold"`
	// DisabledFeatures are the features turned off at Level.
	DisabledFeatures []string `json:"disabled_features"`
	// Source is SourceAuto, SourceFleet or SourceOverride: what decided
	// Level.
	Source string `json:"source"`
	// Recommended is the level the signals ask for now.
	Recommended string `json:"recommended"`
	// Reason says why the level last changed.
	Reason string `json:"reason"`
	// Since is when Level was published.
	Since time.Time `json:"since"`
	// EarliestRecoveryAt is the earliest moment the level could drop; nil
	// at Normal.
	EarliestRecoveryAt *time.Time `json:"earliest_recovery_at"`
	// Sequence grows by one on every change of the level or override.
	Sequence uint64 `json:"sequence"`
	// Override is the operator's pin or floor; nil when none is active.
	Override *Override `json:"override"`
	// Partial is the graduated admission of the band just below
	// PriorityThreshold; nil when none is published (see Partial).
	Partial *Partial `json:"partial"`
	// Shadow is true when the daemon runs in shadow mode: the level is
	// published as usual, but Allow and Middleware admit everything and
	// count what they would have shed, for the daemon's
	// degraded_shadow_would_shed_total.
	Shadow bool `json:"shadow"`
	// Signals is what the last health check measured.
	Signals Signals `json:"signals"`
	// Fleet is fleet mode's object (client/fleet.go); nil when it is off.
	Fleet *FleetState `json:"fleet,omitempty"`
}

// Override is an operator's pin or floor of the level.
type Override struct {
	// Level is the level pinned or floored to.
	Level string `json:"level"`
	// Mode is "pin" or "floor".
	Mode string `json:"mode"`
	// Reason is the operator's reason, e.g. an incident number.
	Reason string `json:"reason"`
	// SetAt is when the override was set.
	SetAt time.Time `json:"set_at"`
	// ExpiresAt is when the override ends unless cleared before.
	ExpiresAt time.Time `json:"expires_at"`
	// Actor names who set it: an operator's name, "admin" or "anonymous".
	Actor string `json:"actor"`
}

// Partial is the daemon's graduated admission of the band below the
// level's threshold (admission.mode: graduated): a request whose priority
// p is at least From and below the threshold is admitted with probability
// Fraction.
type Partial struct {
	// From is the bottom of the band: the previous level's threshold.
	From int `json:"from"`
	// Fraction is the share of the band admitted, in (0, 1).
	Fraction float64 `json:"fraction"`
}

// Signals are the measurements of the last health check. A nil value is
// a signal without one (Status says why); SampledAt is nil before the
// first check.
type Signals struct {
	CPUPercent       *float64 `json:"cpu_percent"`
	MemoryPercent    *float64 `json:"memory_percent"`
	ErrorRatePercent *float64 `json:"error_rate_percent"`
	// LatencyMS is the daemon's latency quantile over the window.
	LatencyMS *float64 `json:"latency_ms"`
	// CPUPressurePercent and the others are PSI "some avg10"; the Avg60
	// fields are "some avg60", which recovery also needs below a threshold.
	CPUPressurePercent         *float64 `json:"cpu_pressure_percent"`
	MemoryPressurePercent      *float64 `json:"memory_pressure_percent"`
	IOPressurePercent          *float64 `json:"io_pressure_percent"`
	CPUPressureAvg60Percent    *float64 `json:"cpu_pressure_avg60_percent"`
	MemoryPressureAvg60Percent *float64 `json:"memory_pressure_avg60_percent"`
	IOPressureAvg60Percent     *float64 `json:"io_pressure_avg60_percent"`
	// Custom holds each custom signal's value (nil without one).
	Custom              map[string]*float64 `json:"custom"`
	WindowAttempts      int64               `json:"window_attempts"`
	WindowFailures      int64               `json:"window_failures"`
	LatencyObservations int64               `json:"latency_observations"`
	SampledAt           *time.Time          `json:"sampled_at"`
	// Status is each signal's state by name ("cpu", "latency", a custom
	// name...): "available", "warming", "failed", "absent" or "off". Nil
	// before the first health check.
	Status map[string]string `json:"status"`
}

// Level is one row of the daemon's level table (GET /v1/levels). A nil
// threshold means the signal never triggers the level.
type Level struct {
	Name              string   `json:"name"`
	Index             int      `json:"index"`
	PriorityThreshold int      `json:"priority_threshold"`
	ErrorRatePercent  *float64 `json:"error_rate_percent"`
	CPUPercent        *float64 `json:"cpu_percent"`
	MemoryPercent     *float64 `json:"memory_percent"`
	LatencyMS         *float64 `json:"latency_ms"`
	// CPUPressurePercent and the others are PSI "some avg10" thresholds.
	CPUPressurePercent    *float64 `json:"cpu_pressure_percent"`
	MemoryPressurePercent *float64 `json:"memory_pressure_percent"`
	IOPressurePercent     *float64 `json:"io_pressure_percent"`
	// Custom holds the level's threshold for each custom signal.
	Custom  map[string]*float64 `json:"custom"`
	Disable []string            `json:"disable"`
}

// clone returns a deep copy, so callers can never alter a shared snapshot.
func (s State) clone() State {
	if s.DisabledFeatures != nil {
		s.DisabledFeatures = append([]string{}, s.DisabledFeatures...)
	}
	if s.EarliestRecoveryAt != nil {
		t := *s.EarliestRecoveryAt
		s.EarliestRecoveryAt = &t
	}
	s.Override = clonePtr(s.Override)
	s.Partial = clonePtr(s.Partial)
	if s.Fleet != nil {
		s.Fleet = clonePtr(s.Fleet)
		s.Fleet.Override = clonePtr(s.Fleet.Override)
	}
	for _, p := range []**float64{&s.Signals.CPUPercent, &s.Signals.MemoryPercent, &s.Signals.ErrorRatePercent, &s.Signals.LatencyMS,
		&s.Signals.CPUPressurePercent, &s.Signals.MemoryPressurePercent, &s.Signals.IOPressurePercent,
		&s.Signals.CPUPressureAvg60Percent, &s.Signals.MemoryPressureAvg60Percent, &s.Signals.IOPressureAvg60Percent} {
		*p = clonePtr(*p)
	}
	if s.Signals.Custom != nil {
		custom := make(map[string]*float64, len(s.Signals.Custom))
		for k, v := range s.Signals.Custom {
			custom[k] = clonePtr(v)
		}
		s.Signals.Custom = custom
	}
	s.Signals.SampledAt = clonePtr(s.Signals.SampledAt)
	s.Signals.Status = maps.Clone(s.Signals.Status)
	return s
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// view is the immutable snapshot the hot path reads: the admission
// decision already folded with the fail mode and staleness.
type view struct {
	threshold   int      // lowest priority admitted
	disabled    []string // features off; ignored when allDisabled
	allDisabled bool     // FailClosed without a usable state
	level       string   // for X-Degraded-Level; "unknown" without a state
	index       int      // -1 when the fail mode decides without a state
	recoveryAt  *time.Time
	stale       bool
	state       *State // last known state, nil before the first
	// In shadow mode threshold is 0, wouldShedBelow is what enforcement
	// would admit from, and wouldShed counts what it would have shed.
	// Otherwise wouldShedBelow is 0 and nothing is counted.
	wouldShedBelow int
	wouldShed      *atomic.Int64
}

// admit reports whether a request of priority p (>= 0) is served, and
// counts it if shadow mode serves what enforcement would shed. It is a
// compare, and in shadow mode one atomic add.
func (v *view) admit(p int) bool {
	if p < v.wouldShedBelow {
		v.wouldShed.Add(1)
	}
	return p >= v.threshold
}

// newView folds the last known state, staleness and fail mode into what
// Allow and Feature read. When the last state says shadow, it admits
// everything whatever the fail mode, and counts in shadow what it would
// have shed under the level it would have shed at ("unknown" when the
// fail mode decides).
func newView(st *State, stale bool, mode FailMode, shadow *shadowCounts) *view {
	v := &view{stale: stale, state: st, index: -1, level: "unknown"}
	switch {
	case st != nil && (!stale || mode == FailLastKnown):
		v.threshold, v.disabled, v.level, v.index, v.recoveryAt = st.PriorityThreshold, st.DisabledFeatures, st.Level, st.Index, st.EarliestRecoveryAt
	case mode == FailClosed:
		v.threshold, v.allDisabled = PriorityCritical, true
	default: // FailOpen, and FailLastKnown before any state
		v.threshold = 0
	}
	if st != nil && st.Shadow && v.threshold > 0 {
		v.wouldShedBelow, v.threshold = v.threshold, 0
		v.wouldShed = shadow.counter(v.level)
	}
	return v
}
