package controller

import (
	"time"

	"github.com/degraded/degraded/levels"
)

// Source values of [State.Source] and [Transition.Source].
const (
	// SourceAuto: the signals decided.
	SourceAuto = "auto"
	// SourceOverride: a local operator override decided.
	SourceOverride = "override"
	// SourceConfig: a reload, or a start with a changed table, changed the
	// state (history entries only).
	SourceConfig = "config"
	// SourceRestart: the state was republished after an unclean shutdown
	// (history entries only).
	SourceRestart = "restart"
)

// Mode says how an override combines with the automatic level.
type Mode string

// The override modes.
const (
	// ModePin publishes exactly the override's level.
	ModePin Mode = "pin"
	// ModeFloor publishes max(automatic level, override level).
	ModeFloor Mode = "floor"
)

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
	// Signals is what the last health check measured: each signal's value
	// (null without one) and state, as levels.Sample writes them.
	Signals levels.Sample `json:"signals"`
	// Blind is true when no signal had a value at the last health check
	// while some were warming or failed: the controller cannot see, so it
	// will not step down by itself (metric degraded_blind).
	Blind bool `json:"-"`
	// JitterR is the automatic level's recovery jitter draw, for the
	// timeline (not published).
	JitterR float64 `json:"-"`
}

// Override is an operator's pin or floor. It ends at ExpiresAt, applied on
// the first health check at or after that moment, or when cleared.
type Override struct {
	Level     string    `json:"level"`
	Mode      Mode      `json:"mode"`
	Reason    string    `json:"reason"`
	SetAt     time.Time `json:"set_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// Actor names who set it: an operator's name, "admin" for auth.token,
	// "anonymous" where no token is configured.
	Actor string `json:"actor"`
}

// Actors of history entries that no request made.
const (
	// ActorDaemon: the daemon's own transitions (signals, expiry, config
	// at start, restart).
	ActorDaemon = "degraded"
	// ActorSignal: a reload by SIGHUP.
	ActorSignal = "signal"
	// ActorAnonymous: a request where no token is configured.
	ActorAnonymous = "anonymous"
)

// Transition is one entry of the history, the audit log: a change of the
// published level, or an override being set, cleared or expiring.
type Transition struct {
	Sequence uint64 `json:"sequence"`
	From     string `json:"from"`
	To       string `json:"to"`
	Source   string `json:"source"`
	Reason   string `json:"reason"`
	// Actor names who made the change: see Override.Actor, ActorDaemon
	// and ActorSignal.
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
