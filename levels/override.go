package levels

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Sources: the layer that set the published level (auto, fleet,
// override), and the other causes a history entry can have.
const (
	// SourceAuto: the signals decided.
	SourceAuto = "auto"
	// SourceFleet: the fleet override decided (fleet mode).
	SourceFleet = "fleet"
	// SourceOverride: a local operator override decided.
	SourceOverride = "override"
	// SourceConfig: a reload, or a start with a changed table, changed the
	// state (history entries only).
	SourceConfig = "config"
	// SourceRestart: the state was republished after an unclean shutdown
	// (history entries only).
	SourceRestart = "restart"
)

// Actors of history entries that no request made; a request's actor is
// an operator's name, "admin" or ActorAnonymous.
const (
	// ActorDaemon: the daemon's own transitions (signals, expiry, config
	// at start, restart).
	ActorDaemon = "degraded"
	// ActorSignal: a reload by SIGHUP.
	ActorSignal = "signal"
	// ActorAnonymous: a request where no token is configured.
	ActorAnonymous = "anonymous"
)

// Mode says how an override combines with the level below it.
type Mode string

// The override modes.
const (
	// ModePin publishes exactly the override's level.
	ModePin Mode = "pin"
	// ModeFloor publishes max(level below, override level).
	ModeFloor Mode = "floor"
)

// Override is an operator's pin or floor, as the state document shows it.
// It ends at ExpiresAt, applied on the first health check at or after that
// moment, or when cleared.
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

// FleetOverride is the fleet layer's override: an Override with the ttl
// it was set for and the etcd mod_revision that wrote it.
type FleetOverride struct {
	Override
	TTL         time.Duration `json:"-"`
	ModRevision int64         `json:"mod_revision"`
}

// MaxReasonLength is the longest override reason accepted, in characters.
const MaxReasonLength = 500

// ErrInvalidOverride is wrapped by every error about an override that
// cannot be applied; the message names what was wrong.
var ErrInvalidOverride = errors.New("invalid override")

// OverrideRequest is what an operator asks for.
type OverrideRequest struct {
	Level  string
	Mode   Mode
	TTL    time.Duration
	Reason string
	// Actor names who asks; "" is recorded as ActorAnonymous.
	Actor string
}

// check validates r against the table and the longest ttl, and returns
// its level's index. Errors wrap ErrInvalidOverride.
func (r OverrideRequest) check(t *Table, maxTTL time.Duration) (int, error) {
	idx, err := t.Index(r.Level)
	switch {
	case err != nil:
		err = fmt.Errorf("%w: level: %w", ErrInvalidOverride, err)
	case r.Mode != ModePin && r.Mode != ModeFloor:
		err = fmt.Errorf("%w: mode must be pin or floor (was %q)", ErrInvalidOverride, r.Mode)
	case r.TTL < time.Second || r.TTL > maxTTL:
		err = fmt.Errorf("%w: ttl must be between 1s and %s (was %s)", ErrInvalidOverride, maxTTL, r.TTL)
	case r.Reason == "" || utf8.RuneCountInString(r.Reason) > MaxReasonLength:
		err = fmt.Errorf("%w: reason must be 1 to %d characters (was %d)", ErrInvalidOverride, MaxReasonLength, utf8.RuneCountInString(r.Reason))
	case strings.TrimSpace(r.Reason) == "":
		err = fmt.Errorf("%w: reason must say why (was only spaces)", ErrInvalidOverride)
	case strings.ContainsFunc(r.Reason, unicode.IsControl):
		// The reason is printed as it is by status, history and watch:
		// a newline would forge a line of the audit there, a terminal
		// escape rewrite the operator's screen.
		err = fmt.Errorf("%w: reason must be one line of text (was %q)", ErrInvalidOverride, r.Reason)
	}
	return idx, err
}

// actorOr returns actor, or ActorAnonymous for "".
func actorOr(actor string) string {
	if actor == "" {
		return ActorAnonymous
	}
	return actor
}

// FleetUpdate is one change of the fleet override as etcd holds it at
// Revision: Override nil means none. Expired says the key went away by its
// lease rather than by a DELETE. Reset says etcd's revision went back (a
// restored or new cluster): the remembered revision is forgotten and this
// update is the truth.
type FleetUpdate struct {
	Override *Override
	TTL      time.Duration
	Revision int64
	Expired  bool
	Reset    bool
	// Actor names who cleared the fleet override, when known (an update
	// with Override nil); "" records the daemon.
	Actor string
}
