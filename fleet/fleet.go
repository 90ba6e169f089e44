package fleet

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrUnavailable is wrapped by the error of an etcd operation that failed
// or took longer than the dial timeout: etcd cannot be reached. The API
// answers it with 503.
var ErrUnavailable = errors.New("etcd unavailable")

// Options configures a [Fleet]. Zero fields take the documented defaults.
type Options struct {
	// Endpoints are the etcd members' URLs; required.
	Endpoints []string
	// Username and Password authenticate to etcd when Username is set.
	Username, Password string
	// TLS, when set, is the client's TLS configuration.
	TLS *tls.Config
	// DialTimeout bounds a connection attempt and every etcd operation;
	// default 5s.
	DialTimeout time.Duration
	// Prefix and Name place the keys under Prefix+Name+"/"; Name is
	// required, Prefix defaults to "/degraded/".
	Prefix, Name string
	// Instance names this instance; required.
	Instance string
	// InstanceTTL is the lease of this instance's report; default 10s,
	// rounded up to whole seconds.
	InstanceTTL time.Duration
	// Logger receives connection changes and conflicts; default slog.Default().
	Logger *slog.Logger
}

// Override is a fleet override as stored in etcd.
type Override struct {
	Level     string        `json:"level"`
	Mode      string        `json:"mode"`
	TTL       time.Duration `json:"-"`
	Reason    string        `json:"reason"`
	Instance  string        `json:"instance"`
	SetAt     time.Time     `json:"set_at"`
	ExpiresAt time.Time     `json:"expires_at"`
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

// OverrideUpdate is the fleet override as of Revision: Override is nil
// when there is none. Expired is set when the key went away by its lease
// rather than by a DELETE. Updates with a lower Revision than one already
// applied are stale.
type OverrideUpdate struct {
	Override *Override
	Revision int64
	Expired  bool
}

// Report is what an instance publishes each tick under its lease.
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

// Fleet is one instance's membership in a fleet. Build it with [New] and
// run it with [Fleet.Run]; its methods are safe for concurrent use.
type Fleet struct {
	o    Options
	log  *slog.Logger
	keys keys
	id   string

	connected atomic.Bool
	conflict  atomic.Bool

	mu        sync.Mutex
	cli       *clientv3.Client // nil until the first successful dial
	instances map[string]instance
	ovr       OverrideUpdate
	report    *Report
	ovrCh     chan struct{} // closed and replaced on each override update
	reportCh  chan struct{} // a new report is waiting; buffered 1
}

type instance struct {
	Report
	seen time.Time
}

type keys struct{ root string }

func (k keys) override() string         { return k.root + "override" }
func (k keys) auditSeq() string         { return k.root + "audit_seq" }
func (k keys) auditDir() string         { return k.root + "audit/" }
func (k keys) audit(n int64) string     { return fmt.Sprintf("%s%020d", k.auditDir(), n) }
func (k keys) instances() string        { return k.root + "instances/" }
func (k keys) instance(n string) string { return k.instances() + n }

// New checks o and returns a Fleet; it does not connect (see Run).
func New(o Options) (*Fleet, error) {
	switch {
	case len(o.Endpoints) == 0:
		return nil, errors.New("fleet: no etcd endpoints")
	case o.Name == "":
		return nil, errors.New("fleet: no fleet name")
	case o.Instance == "":
		return nil, errors.New("fleet: no instance name")
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.Prefix == "" {
		o.Prefix = "/degraded/"
	}
	if o.InstanceTTL <= 0 {
		o.InstanceTTL = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Fleet{
		o: o, log: o.Logger.With("fleet", o.Name, "instance", o.Instance),
		keys:      keys{root: o.Prefix + o.Name + "/"},
		id:        newID(),
		instances: map[string]instance{},
		ovrCh:     make(chan struct{}),
		reportCh:  make(chan struct{}, 1),
	}, nil
}

// Name is the fleet's name and Instance this instance's.
func (f *Fleet) Name() string { return f.o.Name }

// Instance is this instance's name in the fleet.
func (f *Fleet) Instance() string { return f.o.Instance }

// Connected reports whether etcd answered within the dial timeout lately:
// it turns false within DialTimeout + 2s of etcd becoming unreachable.
func (f *Fleet) Connected() bool { return f.connected.Load() }

// Conflict reports whether another process reported under this instance's
// name (another instance_id on its key).
func (f *Fleet) Conflict() bool { return f.conflict.Load() }

// Override returns the last fleet override update seen, and a channel
// closed when a newer one arrives.
func (f *Fleet) Override() (OverrideUpdate, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ovr, f.ovrCh
}

// Report hands the fleet this tick's report; Run writes the latest one
// under the instance lease. It never blocks.
func (f *Fleet) Report(r Report) {
	r.InstanceID = f.id
	f.mu.Lock()
	f.report = &r
	f.mu.Unlock()
	select {
	case f.reportCh <- struct{}{}:
	default:
	}
}

// deliver records u as the latest override update unless it is older than
// the one held, and wakes the watchers.
func (f *Fleet) deliver(u OverrideUpdate) {
	f.mu.Lock()
	if u.Revision < f.ovr.Revision {
		f.mu.Unlock()
		return
	}
	f.ovr = u
	ch := f.ovrCh
	f.ovrCh = make(chan struct{})
	f.mu.Unlock()
	close(ch)
}
