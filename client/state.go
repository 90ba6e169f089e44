package client

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
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

// maxLevels is the most levels a daemon's table has (DESIGN.md: 1..64),
// so the highest index a state document may name is maxLevels - 1.
const maxLevels = 64

// check refuses a state document the daemon cannot have published: one
// the client would otherwise adopt and admit by. A level name outside
// DESIGN.md's `^[A-Za-z][A-Za-z0-9_-]{0,31}$` (it goes into every shed
// answer's X-Degraded-Level), an index outside the table, a threshold
// outside 0..PriorityCritical (above it, even PriorityCritical would be
// shed), or a partial admission that is not a share in (0, 1) of a band
// below the threshold. The client keeps its last good state instead.
func (s *State) check() error {
	if s.Level == "" {
		return fmt.Errorf("no level")
	}
	if !validLevelName(s.Level) {
		return fmt.Errorf("level %.40q is not a level name (a letter, then at most 31 letters, digits, _ or -)", s.Level)
	}
	if s.Index < 0 || s.Index >= maxLevels {
		return fmt.Errorf("index %d is outside 0..%d", s.Index, maxLevels-1)
	}
	if s.PriorityThreshold < 0 || s.PriorityThreshold > PriorityCritical {
		return fmt.Errorf("priority_threshold %d is outside 0..%d", s.PriorityThreshold, PriorityCritical)
	}
	if p := s.Partial; p != nil {
		switch {
		case s.Index == 0:
			return fmt.Errorf("partial at level index 0: Normal has no band below it")
		case !(p.Fraction > 0 && p.Fraction < 1):
			return fmt.Errorf("partial.fraction %g is not in (0, 1)", p.Fraction)
		case p.From < 0 || p.From >= s.PriorityThreshold:
			return fmt.Errorf("partial.from %d is not in 0..priority_threshold %d", p.From, s.PriorityThreshold)
		}
	}
	return nil
}

// validLevelName reports whether name matches DESIGN.md's level names,
// `^[A-Za-z][A-Za-z0-9_-]{0,31}$`.
func validLevelName(name string) bool {
	if len(name) == 0 || len(name) > 32 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || !('0' <= c && c <= '9' || c == '_' || c == '-')) {
			return false
		}
	}
	return true
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
// decision already folded with the fail mode, staleness and shadow mode.
type view struct {
	// threshold is the lowest priority admitted without a draw; from is
	// the bottom of the partial band (== threshold without one), and a
	// request of the band is admitted when a draw from math/rand/v2 is
	// below cut (Partial.Fraction x 2^64). In shadow mode they are what
	// enforcement would apply.
	threshold, from int
	cut             uint64
	disabled        []string // features off; ignored when allDisabled
	allDisabled     bool     // FailClosed without a usable state
	level           string   // for X-Degraded-Level; "unknown" without a state
	index           int      // -1 when the fail mode decides without a state
	recoveryAt      *time.Time
	stale           bool
	state           *State // last known state, nil before the first
	// shadow: everything is served; a request enforcement would shed
	// counts in wouldShed, and a feature it would disable in
	// wouldDisable (parallel to disabled).
	shadow       bool
	wouldShed    *atomic.Int64
	wouldDisable []*atomic.Int64
	// tally counts the decisions of Admit, Middleware and Do in the
	// current interval, for the admission report (tally.go). Never nil.
	tally *tally
}

// admit reports whether a request of priority p (>= 0) is served: one
// compare on the fast paths (p >= threshold, and below the band outside
// shadow mode), one draw in the band. It counts a would-shed in shadow
// mode, nothing else.
func (v *view) admit(p int) bool {
	if p >= v.threshold {
		return true
	}
	if p < v.from && !v.shadow {
		return false // below the band: no draw, nothing to count
	}
	return v.admitBelow(p)
}

// admitBelow is admit under the threshold, out of line so that admit
// inlines into Allow.
func (v *view) admitBelow(p int) bool {
	return v.below(p) == admitted || v.shedInShadow()
}

// decide is admit, counted in the interval's tally: what Admit, the
// middleware and Do call.
func (v *view) decide(p int) bool {
	if p >= v.threshold {
		v.tally.count(p, admitted)
		return true
	}
	return v.decideBelow(p)
}

// decideBelow is decide under the threshold.
func (v *view) decideBelow(p int) bool {
	d := v.below(p)
	v.tally.count(p, d)
	return d == admitted || v.shedInShadow()
}

// below judges a request under the threshold: shed below the band, else
// one draw.
func (v *view) below(p int) decision {
	if p < v.from {
		return shedBelow
	}
	if rand.Uint64() < v.cut {
		return admitted
	}
	return shedPartial
}

// shedInShadow is what happens to a request enforcement sheds: in shadow
// mode it is counted and served (true), else it is shed (false).
func (v *view) shedInShadow() bool {
	if !v.shadow {
		return false
	}
	v.wouldShed.Add(1)
	return true
}

// decision is how a request was judged, and the index of its count in a
// tally slot.
type decision uint8

const (
	admitted    decision = iota
	shedPartial          // in the band, and the draw was at or above the fraction
	shedBelow            // below the band, or below the threshold without one
	numDecisions
)

// newView folds the last known state, staleness and fail mode into what
// Allow and Feature read, counting into t. When the last state says
// shadow, it admits everything whatever the fail mode, and counts in
// shadow what it would have shed under the level it would have shed at
// ("unknown" when the fail mode decides) and the features it would have
// disabled.
func newView(st *State, stale bool, mode FailMode, shadow *shadowCounts, t *tally) *view {
	v := &view{stale: stale, state: st, index: -1, level: "unknown", tally: t}
	switch {
	case st != nil && (!stale || mode == FailLastKnown):
		v.threshold, v.disabled, v.level, v.index, v.recoveryAt = st.PriorityThreshold, st.DisabledFeatures, st.Level, st.Index, st.EarliestRecoveryAt
		v.from, v.cut = band(st.Partial, v.threshold)
		if v.cut == math.MaxUint64 { // the whole band: the previous level
			v.threshold, v.cut = v.from, 0
		}
	case mode == FailClosed:
		v.threshold, v.from, v.allDisabled = PriorityCritical, PriorityCritical, true
	default: // FailOpen, and FailLastKnown before any state
		v.threshold, v.from = 0, 0
	}
	if st != nil && st.Shadow {
		v.shadow = true
		v.wouldShed = shadow.counter(v.level)
		v.wouldDisable = make([]*atomic.Int64, len(v.disabled))
		for i, f := range v.disabled {
			v.wouldDisable[i] = shadow.feature(f)
		}
	}
	return v
}

// band returns the bottom of the partial band below threshold and the cut
// its draw must fall under, or (threshold, 0) when there is none. A
// fraction of 1 or more admits the whole band; one of 0 or less, NaN, or
// a band that starts at or above the threshold is none. A cut of
// math.MaxUint64 means the whole band.
func band(p *Partial, threshold int) (from int, cut uint64) {
	if p == nil || !(p.Fraction > 0) || p.From >= threshold {
		return threshold, 0
	}
	from = max(p.From, 0)
	if f := math.Ldexp(p.Fraction, 64); f < math.Ldexp(1, 64) {
		return from, uint64(f)
	}
	return from, math.MaxUint64
}
