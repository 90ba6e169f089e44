package controller

import (
	"time"

	"github.com/degraded/degraded/levels"
)

// The level machine's names, as the controller's API shows them.
type (
	// Override is an operator's pin or floor (levels.Override).
	Override = levels.Override
	// Mode says how an override combines with the level below it.
	Mode = levels.Mode
	// OverrideRequest is what an operator asks for.
	OverrideRequest = levels.OverrideRequest
	// FleetOverride is the fleet layer's override.
	FleetOverride = levels.FleetOverride
	// FleetUpdate is one change of the fleet override as etcd holds it.
	FleetUpdate = levels.FleetUpdate
)

// The override modes.
const (
	ModePin   = levels.ModePin
	ModeFloor = levels.ModeFloor
)

// Sources of [State.Source] and [Transition.Source].
const (
	SourceAuto     = levels.SourceAuto
	SourceOverride = levels.SourceOverride
	SourceFleet    = levels.SourceFleet
	SourceConfig   = levels.SourceConfig
	SourceRestart  = levels.SourceRestart
)

// Actors of history entries that no request made (levels.ActorDaemon and
// the rest).
const (
	ActorDaemon    = levels.ActorDaemon
	ActorSignal    = levels.ActorSignal
	ActorAnonymous = levels.ActorAnonymous
)

// MaxReasonLength is the longest override reason accepted, in characters.
const MaxReasonLength = levels.MaxReasonLength

// ErrInvalidOverride is wrapped by every error about an override that
// cannot be applied; the message names what was wrong.
var ErrInvalidOverride = levels.ErrInvalidOverride

// State is the published state document: the body of GET /v1/level and of
// every SSE event. A State is immutable once published; readers share it.
type State struct {
	Level              string     `json:"level"`
	Index              int        `json:"index"`
	PriorityThreshold  int        `json:"priority_threshold"`
	DisabledFeatures   []string   `json:"disabled_features"`
	Source             string     `json:"source"`
	Recommended        string     `json:"recommended"`
	Reason             string     `json:"reason"`
	Since              time.Time  `json:"since"`
	EarliestRecoveryAt *time.Time `json:"earliest_recovery_at"`
	Sequence           uint64     `json:"sequence"`
	Override           *Override  `json:"override"`
	// Partial is the graduated admission of the band below the level's
	// threshold (admission.mode: graduated); nil when none.
	Partial *levels.Partial `json:"partial"`
	// Shadow is true in shadow mode (config mode: shadow): the level is
	// computed and published as usual, but readers admit everything and
	// only count what they would have shed.
	Shadow bool `json:"shadow"`
	// Fleet is fleet mode's object (fleet.go); absent when it is off.
	Fleet *FleetState `json:"fleet,omitempty"`
	// Signals is what the last evaluation measured: each signal's value
	// (null without one) and state, as levels.Sample writes them.
	Signals levels.Sample `json:"signals"`
	// Blind is true when no signal had a value at the last health check
	// while some were warming or failed (levels.Sample.Blind; metric
	// degraded_blind): with blind_hold > 0, those with a threshold at the
	// level or above then hold it.
	Blind bool `json:"-"`
	// JitterR is the automatic level's recovery jitter draw, for the
	// timeline (not published).
	JitterR float64 `json:"-"`

	ready    bool           // a health check has run
	fleetOvr *FleetOverride // the fleet override in force, also when fleet mode is off
}

// Transition is one entry of the history, the audit log: a change of the
// published level, or an override being set, cleared or expiring, or a
// config change.
type Transition struct {
	Sequence uint64 `json:"sequence"`
	From     string `json:"from"`
	To       string `json:"to"`
	Source   string `json:"source"`
	Reason   string `json:"reason"`
	// Actor names who made the change: an operator's name, "admin",
	// "anonymous", ActorDaemon or ActorSignal.
	Actor string    `json:"actor"`
	At    time.Time `json:"at"`
}

// HistoryLimit is the number of transitions kept in memory and in the
// state file.
const HistoryLimit = 1000

// SamplesSpan is how far back [Controller.Samples] reaches, and
// SamplesLimit the most samples it keeps however short the interval.
const (
	SamplesSpan  = 10 * time.Minute
	SamplesLimit = 1200
)
