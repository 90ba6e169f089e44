package fleet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Options configures a [Fleet]. Zero fields take the documented defaults.
type Options struct {
	// Endpoints are the etcd members' URLs; required. A session talks to
	// one member at a time (spread over the members by instance name)
	// and moves to the next when that one fails or hangs.
	Endpoints []string
	// Username and Password authenticate to etcd when Username is set.
	Username, Password string
	// TLS, when set, is the client's TLS configuration as is.
	TLS *tls.Config
	// TLSFiles, when set (and TLS is nil), names the CA, certificate and
	// key files, re-read whenever they change: a rotated certificate is
	// used from the next handshake on, with no restart.
	TLSFiles *TLSFiles
	// DialTimeout bounds a connection attempt and every etcd operation;
	// default 5s. One try on one member is bounded by half of it (at
	// least 200ms, at most 2s), so that an operation can move on from a
	// hung member and still finish within DialTimeout.
	DialTimeout time.Duration
	// Prefix and Name place the keys under Prefix+Name+"/"; Name is
	// required, Prefix defaults to "/degraded/".
	Prefix, Name string
	// Instance names this instance; required.
	Instance string
	// InstanceTTL is the lease of this instance's report and election
	// key; default 10s, rounded up to whole seconds.
	InstanceTTL time.Duration
	// Tick is how often reports are written and the aggregate published
	// (the health check interval); default 1s.
	Tick time.Duration
	// Dial, when set, opens the connections to etcd (tests and
	// benchmarks cut a member off with it); default a net.Dialer.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Logger receives connection changes, conflicts, refused values and
	// the etcd client's own warnings; default slog.Default().
	Logger *slog.Logger
	// MaxRecvBytes bounds one answer from etcd; default 64 MiB, the
	// reports of some 100,000 instances. The aggregator reads every
	// report each tick, so without a bound the keys under the fleet's
	// prefix set its memory: 400 keys of 1 MB written by hand took it
	// past 3.6 GB in 10 s, and each instance elected after it would read
	// the same. An answer over it is refused (gRPC's ResourceExhausted)
	// and named in the log.
	MaxRecvBytes int
}

// DefaultMaxRecvBytes is Options.MaxRecvBytes's default.
const DefaultMaxRecvBytes = 64 << 20

// Fleet is one instance's membership in a fleet. Build it with [New] and
// run it with [Fleet.Run]; its methods are safe for concurrent use.
type Fleet struct {
	o       Options
	log     *slog.Logger
	zap     *zap.Logger
	keys    keys
	id      string
	attempt time.Duration
	first   int // the endpoint the first session tries

	up          atomic.Bool  // a session is established
	lastOK      atomic.Int64 // when etcd last answered, Unix nanoseconds
	conflict    atomic.Bool
	aggregating atomic.Int64 // the term while this instance aggregates, else 0

	mu         sync.Mutex
	cli        *clientv3.Client // the session's client; nil between sessions
	gen        uint64           // counts sessions
	genCh      chan struct{}    // closed and replaced when cli changes
	endOf      func(error)      // ends the current session
	lastErr    error            // why the last session or try failed
	ovr        OverrideUpdate   // the last override update queued
	queue      []OverrideUpdate // queued for Next, oldest first
	queueCh    chan struct{}    // closed and replaced when queue grows
	agg        *Aggregate       // the newest aggregate accepted
	aggAt      time.Time        // when it was received, by the local clock
	maxTerm    int64
	proven     termCheck // the last aggregate term and lease elected proved
	disproven  termCheck // the last it refused
	maxRev     int64     // the highest revision seen
	sessionRev int64     // the revision of the session's first read
	auditRev   int64     // the audit counter's mod_revision, as a session last read it
	ovrRev     int64     // the mod_revision of the last override value delivered
	clusterID  uint64
	epoch      int
	watched    int64 // the override watch has delivered everything up to here
	report     *Report
	// loggedAt is when each problem logged through every was last logged.
	loggedAt map[string]time.Time
	lease    clientv3.LeaseID
	puts     putState
	view     View              // the last fleet view read
	bad      map[string]string // aggregator: keys left out, with the problem logged
	logged   errorLog
	conn     connNote      // the last failed connection attempt
	audit    auditState    // what this Fleet last wrote of the audit
	reportCh chan struct{} // a new report is waiting; buffered 1
}

type keys struct{ root string }

func (k keys) override() string         { return k.root + "override" }
func (k keys) aggregate() string        { return k.root + "aggregate" }
func (k keys) leader() string           { return k.root + "leader" }
func (k keys) auditSeq() string         { return k.root + "audit_seq" }
func (k keys) auditDir() string         { return k.root + "audit/" }
func (k keys) audit(n int64) string     { return fmt.Sprintf("%s%020d", k.auditDir(), n) }
func (k keys) instances() string        { return k.root + "instances/" }
func (k keys) instance(n string) string { return k.instances() + n }

// New checks o and returns a Fleet; it does not connect (see Run). It
// warns, on o.Logger, about TLS settings that http:// endpoints ignore.
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
	o.InstanceTTL = (o.InstanceTTL + time.Second - 1).Truncate(time.Second)
	if o.Tick <= 0 {
		o.Tick = time.Second
	}
	if o.MaxRecvBytes <= 0 {
		o.MaxRecvBytes = DefaultMaxRecvBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	log := o.Logger.With("fleet", o.Name, "instance", o.Instance)
	h := fnv.New32a()
	_, _ = h.Write([]byte(o.Instance))
	f := &Fleet{
		o: o, log: log, zap: zapLogger(log),
		keys:     keys{root: o.Prefix + o.Name + "/"},
		id:       newID(),
		attempt:  min(max(o.DialTimeout/2, 200*time.Millisecond), 2*time.Second),
		first:    int(h.Sum32() % uint32(len(o.Endpoints))),
		genCh:    make(chan struct{}),
		queueCh:  make(chan struct{}),
		reportCh: make(chan struct{}, 1),
		bad:      map[string]string{},
	}
	f.warnPlaintext()
	return f, nil
}

// warnPlaintext warns when TLS is configured but an endpoint is http://:
// etcd's client then speaks plaintext to it and ignores the TLS settings.
func (f *Fleet) warnPlaintext() {
	if f.o.TLS == nil && f.o.TLSFiles == nil {
		return
	}
	for _, ep := range f.o.Endpoints {
		if u, err := url.Parse(ep); err == nil && u.Scheme == "http" {
			f.log.Warn("fleet: fleet.etcd.tls is set but this endpoint is http://: the connection is plaintext and the TLS settings are not used for it; write https://",
				"endpoint", ep)
		}
	}
}

// Name is the fleet's name.
func (f *Fleet) Name() string { return f.o.Name }

// Instance is this instance's name in the fleet.
func (f *Fleet) Instance() string { return f.o.Instance }

// InstanceID is this process's id, carried by each report it writes.
func (f *Fleet) InstanceID() string { return f.id }

// connectedWithin is how long etcd may stay silent before Connected turns
// false: with a probe every second, DialTimeout + 2s after etcd went away
// at the latest.
func (f *Fleet) connectedWithin() time.Duration { return f.o.DialTimeout + 1500*time.Millisecond }

// Connected reports whether a session is established and etcd answered
// lately: it turns false within DialTimeout + 2s of etcd becoming
// unreachable. A move from a hung member to a healthy one keeps it true.
func (f *Fleet) Connected() bool {
	return f.up.Load() && time.Since(time.Unix(0, f.lastOK.Load())) <= f.connectedWithin()
}

// Conflict reports whether another process reports under this instance's
// name: its instance_id was seen on this instance's key, written after
// this process's own report, within the last InstanceTTL.
func (f *Fleet) Conflict() bool { return f.conflict.Load() }

// Aggregating returns the aggregator's term while this instance is the
// fleet's aggregator, else 0.
func (f *Fleet) Aggregating() int64 { return f.aggregating.Load() }

// SawRevision tells the Fleet, before Run, an etcd revision this
// instance acted on before it started (the saved fleet override's
// mod_revision): a cluster whose revision is lower has been restored or
// replaced, and is treated as a rollback.
func (f *Fleet) SawRevision(rev int64) {
	f.mu.Lock()
	f.maxRev = max(f.maxRev, rev)
	f.mu.Unlock()
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

// maxQueue bounds the override updates waiting for Next: beyond it the
// oldest are dropped (the newest is what etcd holds).
const maxQueue = 1000

// Override returns the last fleet override update queued: what etcd held
// as last seen.
func (f *Fleet) Override() OverrideUpdate {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ovr
}

// Next returns the next fleet override update, in etcd's order, waiting
// for one until ctx ends. Every change the watch saw is delivered (a
// reconnect replays what was missed), so each instance applies each
// override; a consumer that stops calling Next holds at most the last
// 1000.
func (f *Fleet) Next(ctx context.Context) (OverrideUpdate, error) {
	for {
		f.mu.Lock()
		if len(f.queue) > 0 {
			u := f.queue[0]
			f.queue[0] = OverrideUpdate{}
			f.queue = f.queue[1:]
			f.mu.Unlock()
			return u, nil
		}
		ch := f.queueCh
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return OverrideUpdate{}, ctx.Err()
		case <-ch:
		}
	}
}

// deliver queues u unless it is not newer than the last update queued in
// the same epoch. It returns the revision of an update it dropped to make
// room, else -1. The caller holds f.mu.
func (f *Fleet) deliver(u OverrideUpdate) (dropped int64) {
	dropped = -1
	u.Epoch = f.epoch
	if u.Epoch == f.ovr.Epoch && u.Revision <= f.ovr.Revision {
		return dropped
	}
	f.ovr = u
	if len(f.queue) >= maxQueue {
		dropped = f.queue[0].Revision
		f.queue = f.queue[1:]
	}
	f.queue = append(f.queue, u)
	close(f.queueCh)
	f.queueCh = make(chan struct{})
	return dropped
}

// logDropped logs an update deliver dropped.
func (f *Fleet) logDropped(rev int64) {
	if rev >= 0 {
		f.log.Warn("fleet: override updates are not being applied; dropped the oldest", "revision", rev)
	}
}
