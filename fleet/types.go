package fleet

import (
	"encoding/json"
	"fmt"
	"time"
)

// Override is a fleet override as stored in etcd under <prefix><name>/override.
type Override struct {
	Level  string        `json:"level"`
	Mode   string        `json:"mode"`
	TTL    time.Duration `json:"-"`
	Reason string        `json:"reason"`
	// Instance is the instance that wrote it, Actor who asked it to (an
	// operator's name, "admin", "anonymous"): every instance records the
	// actor in its history.
	Instance  string    `json:"instance"`
	Actor     string    `json:"actor"`
	SetAt     time.Time `json:"set_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// overrideJSON is Override without its methods, with TTL as a string.
type overrideJSON struct {
	plainOverride
	TTL string `json:"ttl"`
}

type plainOverride Override

// MarshalJSON writes TTL as a Go duration string.
func (o Override) MarshalJSON() ([]byte, error) {
	return json.Marshal(overrideJSON{plainOverride: plainOverride(o), TTL: o.TTL.String()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (o *Override) UnmarshalJSON(b []byte) error {
	var v overrideJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*o = Override(v.plainOverride)
	if v.TTL != "" {
		d, err := time.ParseDuration(v.TTL)
		if err != nil {
			return fmt.Errorf("ttl: %w", err)
		}
		o.TTL = d
	}
	return nil
}

// OverrideUpdate is the fleet override as etcd holds it at Revision.
// Override is nil when there is none, or when Refused is set.
type OverrideUpdate struct {
	Override *Override
	// Revision is the override key's mod_revision, or the revision read
	// when there is no override key.
	Revision int64
	// Expired is set when the key went away by its lease rather than by
	// a DELETE; Actor then is empty, else it names who cleared it when
	// the DELETE's audit entry could be read.
	Expired bool
	Actor   string
	// Refused, when set, says why the value etcd holds at Revision is
	// not an override any instance can apply (not JSON, a bad mode, ttl
	// or reason): the instance follows no fleet override then. It is
	// never half-applied.
	Refused error
	// Epoch counts the revision rollbacks the Fleet has detected (a
	// lower revision than one seen, another cluster ID). When it changes,
	// the consumer forgets the revisions it remembers: this update is the
	// truth, whatever its Revision.
	Epoch int
}

// Report is what an instance publishes each tick under its lease, at
// <prefix><name>/instances/<instance>.
type Report struct {
	Level          string          `json:"level"`
	Index          int             `json:"index"`
	Source         string          `json:"source"`
	Recommended    string          `json:"recommended"`
	Signals        json.RawMessage `json:"signals,omitempty"`
	WindowAttempts int64           `json:"window_attempts"`
	WindowFailures int64           `json:"window_failures"`
	Sequence       uint64          `json:"sequence"`
	At             time.Time       `json:"at"`
	// InstanceID is set by the Fleet: one per process, so that two
	// processes under one instance name are noticed.
	InstanceID string `json:"instance_id"`
}

// Aggregate is what the aggregator writes once per tick at
// <prefix><name>/aggregate: the sums over the valid reports of one round.
type Aggregate struct {
	Attempts  int64          `json:"attempts"`
	Failures  int64          `json:"failures"`
	Instances int            `json:"instances"`
	Levels    map[string]int `json:"levels"`
	// Leader is the aggregator's instance name and Term its election
	// key's create revision: a later aggregator has a higher term.
	Leader string    `json:"leader"`
	Term   int64     `json:"term"`
	At     time.Time `json:"at"`
}

// AuditKeep is how many audit entries are kept: each write deletes the
// entry AuditKeep back.
const AuditKeep = 1000

// Audit actions.
const (
	ActionSet   = "set"
	ActionClear = "clear"
)

// AuditEntry is one fleet override change, as stored under audit/.
type AuditEntry struct {
	Seq       int64      `json:"seq"`
	Action    string     `json:"action"`
	Level     string     `json:"level,omitempty"`
	Mode      string     `json:"mode,omitempty"`
	TTL       string     `json:"ttl,omitempty"`
	Reason    string     `json:"reason"`
	Instance  string     `json:"instance"`
	Actor     string     `json:"actor"`
	At        time.Time  `json:"at"`
	ExpiresAt *time.Time `json:"expires_at"`
}
