package fleet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc/connectivity"
)

// probeEvery is how often a session checks that its member still
// answers, when no report was written meanwhile.
const probeEvery = time.Second

// errCompacted ends a session whose watch could not resume: the
// revisions it needed are compacted; the next session reads everything.
var errCompacted = errors.New("the watch's revision is compacted")

// Run keeps this instance in the fleet until ctx ends: it connects to one
// member, reads the override and the aggregate, watches both from the
// revision read (or, on a reconnect, from the last one seen: every change
// missed is replayed), writes each report under the instance lease,
// campaigns to be the aggregator, and after any failure moves to the next
// member that answers (see [Fleet.connect]); once every member failed it
// backs off (full jitter, BackoffBase to BackoffCap). It returns
// ctx.Err() once everything it started has ended, and revokes the
// instance lease on the way out (a clean stop leaves the fleet view, and
// hands the aggregator's role on, at once).
func (f *Fleet) Run(ctx context.Context) error {
	n := len(f.o.Endpoints)
	idx, failed, rounds := f.first, 0, 0
	for {
		start := time.Now()
		cli, at, err := f.connect(ctx, idx)
		established := false
		if err == nil {
			idx = at
			established, err = f.session(ctx, f.o.Endpoints[idx], cli)
			f.noteFailure(f.o.Endpoints[idx], established, err)
		}
		if ctx.Err() != nil {
			f.up.Store(false)
			return ctx.Err()
		}
		again := errors.Is(err, errCompacted) || errors.Is(err, errRolledBack) // the member is fine: read it again
		if !again {
			idx = (idx + 1) % n
		}
		switch {
		case established && (again || time.Since(start) >= probeEvery):
			failed, rounds = 0, 0
			continue // the next member that answers, or the same one read afresh, at once
		case cli != nil:
			failed++ // a session that ended within a probe of its start
		default:
			failed = n // connect tried every member
		}
		if failed < n {
			continue
		}
		failed = 0
		f.setDown(err)
		d := min(BackoffCap, BackoffBase<<min(rounds, 10))
		rounds++
		t := time.NewTimer(rand.N(d))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// stagger is how long connect waits for one member to answer before it
// also dials the next (as Happy Eyeballs, RFC 8305, does for addresses,
// there with 250ms): a hung member then costs a new session one stagger,
// not an attempt timeout, and while members answer each instance keeps
// to the one its name hashes to, so that a fleet spreads over the
// cluster. A member answers a read in milliseconds; on a loaded machine
// a new connection's first read took 500ms, and a longer stagger, paid
// once per hung member, left a fleet PUT too little of its dial timeout.
const stagger = 100 * time.Millisecond

// dialed is one member connect tried.
type dialed struct {
	idx int
	cli *clientv3.Client
	err error
}

// connect returns a client to a member that answered a linearizable read
// (it is reachable, and has a leader and a quorum) within the attempt
// timeout, with the member's index. It dials the members in turn from
// idx, the next one as soon as the last failed or after stagger without
// an answer, and keeps the first that answers; the others are closed.
// (Tried one after another, two hung members cost two attempt timeouts, a
// whole dial timeout, and a fleet PUT made meanwhile failed with 503.)
// Each member that failed before one answered is noted and logged; when
// every one failed, connect returns the last failure.
func (f *Fleet) connect(ctx context.Context, idx int) (*clientv3.Client, int, error) {
	n := len(f.o.Endpoints)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan dialed, n)
	tried, pending := 0, 0
	next := func() {
		i := (idx + tried) % n
		tried++
		pending++
		go func() {
			cli, err := f.probe(rctx, f.o.Endpoints[i])
			results <- dialed{i, cli, err}
		}()
	}
	next()
	t := time.NewTimer(stagger)
	defer t.Stop()
	var last error
	for pending > 0 {
		select {
		case d := <-results:
			pending--
			if d.err == nil {
				cancel()
				go closeLosers(results, pending)
				return d.cli, d.idx, nil
			}
			if ctx.Err() != nil {
				continue
			}
			f.noteFailure(f.o.Endpoints[d.idx], false, d.err)
			last = d.err
			if tried < n {
				next()
				t.Reset(stagger)
			}
		case <-t.C:
			if tried < n {
				next()
				t.Reset(stagger)
			}
		}
	}
	if ctx.Err() != nil {
		return nil, 0, ctx.Err()
	}
	return nil, 0, last
}

// closeLosers closes the clients of the pending tries connect did not
// keep, as they end (canceled).
func closeLosers(results <-chan dialed, pending int) {
	for range pending {
		if d := <-results; d.cli != nil {
			_ = d.cli.Close()
		}
	}
}

// probe dials endpoint and reads one key (linearizable, so through the
// leader) within the attempt timeout, returning the client once it
// answered.
func (f *Fleet) probe(ctx context.Context, endpoint string) (*clientv3.Client, error) {
	start := time.Now()
	cli, err := f.newClient(endpoint)
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, f.attempt)
	defer cancel()
	if _, err := cli.Get(actx, f.keys.auditSeq(), clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		return nil, classify(ctx, "read from "+endpoint, f.cause(err, start))
	}
	f.ok()
	return cli, nil
}

// session is one connection to endpoint, over cli: the lease, the
// read, the watches, the reports and the election. It returns when any
// of them fails or ctx ends, with whether it had been established, and
// closes cli.
func (f *Fleet) session(ctx context.Context, endpoint string, cli *clientv3.Client) (established bool, err error) {
	defer func(start time.Time) { err = f.cause(err, start) }(time.Now())
	sctx, cancel := context.WithCancelCause(ctx)
	// An operation waiting for a member (a fleet PUT whose try hung) uses
	// the client at once, while the session is set up: the member has
	// answered connect's read, and the operation needs none of the
	// session's state. (Held until the watches began, the retry of a PUT
	// lost those round trips, 200ms on a loaded machine, of its dial
	// timeout.)
	f.beginSession(cli, cancel)
	var wg sync.WaitGroup
	defer func() {
		f.endSession(cli)
		cancel(nil)
		if ctx.Err() != nil {
			f.revoke(ctx, cli)
		}
		_ = cli.Close() // ends a campaign waiting on the member
		wg.Wait()
		f.aggregating.Store(0)
	}()
	lease, err := f.ensureLease(sctx, cli)
	if err != nil {
		return false, classify(ctx, "keep the instance lease", err)
	}
	snap, err := f.readAll(sctx, cli)
	if err != nil {
		return false, classify(ctx, "read the fleet", err)
	}
	from := f.resume(sctx, cli, snap)
	sess, err := concurrency.NewSession(cli, concurrency.WithLease(lease), concurrency.WithContext(sctx))
	if err != nil {
		return false, classify(ctx, "keep the instance lease alive", err)
	}
	wctx := clientv3.WithRequireLeader(sctx)
	owch := cli.Watch(wctx, f.keys.override(), clientv3.WithRev(from), clientv3.WithProgressNotify())
	awch := cli.Watch(wctx, f.keys.aggregate(), clientv3.WithRev(snap.header.Revision+1))
	f.setUp(endpoint)
	wg.Go(func() { cancel(f.writeLoop(sctx, cli, lease)) })
	wg.Go(func() { cancel(f.campaign(sctx, sess)) })
	wg.Go(func() { cancel(watchConn(sctx, cli)) })
	cancel(f.watchLoop(sctx, cli, sess, owch, awch))
	return true, context.Cause(sctx)
}

// watchConn returns once the session's connection to its member leaves
// the ready state (the member died, restarted, closed it): gRPC would
// reconnect to the same address by itself, hiding a member restarted from
// a restored or wiped data dir, whose history the session must read
// again, and resuming the watches from revisions that member may not have.
func watchConn(ctx context.Context, cli *clientv3.Client) error {
	conn := cli.ActiveConnection()
	for st := conn.GetState(); ; st = conn.GetState() {
		if st != connectivity.Ready {
			return fmt.Errorf("%w: the connection to the member is %s", ErrUnavailable, strings.ToLower(st.String()))
		}
		if !conn.WaitForStateChange(ctx, st) {
			return context.Cause(ctx)
		}
	}
}

// ensureLease keeps the lease of the last session when etcd still holds
// it (a move to another member keeps this instance's keys and its place
// as aggregator), else grants a new one.
func (f *Fleet) ensureLease(ctx context.Context, cli *clientv3.Client) (clientv3.LeaseID, error) {
	f.mu.Lock()
	id := f.lease
	f.mu.Unlock()
	actx, cancel := context.WithTimeout(ctx, f.attempt)
	defer cancel()
	if id != clientv3.NoLease {
		_, err := cli.KeepAliveOnce(actx, id)
		if err == nil {
			f.ok()
			return id, nil
		}
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return 0, err
		}
		f.log.Info("fleet: the instance lease ran out while etcd could not be reached; taking a new one")
	}
	resp, err := cli.Grant(actx, int64(f.o.InstanceTTL/time.Second))
	if err != nil {
		return 0, err
	}
	f.ok()
	f.mu.Lock()
	f.lease = resp.ID
	f.mu.Unlock()
	return resp.ID, nil
}

// revoke ends the instance lease on a clean stop: the report, the
// election key and any aggregate this instance wrote go with it.
func (f *Fleet) revoke(ctx context.Context, cli *clientv3.Client) {
	f.mu.Lock()
	id := f.lease
	f.lease = clientv3.NoLease
	f.mu.Unlock()
	if id == clientv3.NoLease {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.attempt)
	defer cancel()
	if _, err := cli.Revoke(rctx, id); err != nil {
		f.log.Warn("fleet: could not revoke the instance lease at stop; this instance leaves the fleet view when it runs out", "err", err)
	}
}

func (f *Fleet) beginSession(cli *clientv3.Client, end context.CancelCauseFunc) {
	f.mu.Lock()
	f.cli, f.endOf = cli, end
	f.gen++
	ch := f.genCh
	f.genCh = make(chan struct{})
	f.mu.Unlock()
	close(ch)
}

func (f *Fleet) endSession(cli *clientv3.Client) {
	f.mu.Lock()
	if f.cli != cli {
		f.mu.Unlock()
		return
	}
	f.cli, f.endOf = nil, nil
	f.gen++
	ch := f.genCh
	f.genCh = make(chan struct{})
	f.mu.Unlock()
	close(ch)
}

// setUp marks the fleet connected, logging the change.
func (f *Fleet) setUp(endpoint string) {
	f.ok()
	f.mu.Lock()
	f.lastErr = nil
	f.logged = errorLog{}
	f.mu.Unlock()
	if !f.up.Swap(true) {
		f.log.Info("fleet: connected to etcd", "endpoint", endpoint)
	}
}

// setDown marks the fleet disconnected once every member failed in a row.
func (f *Fleet) setDown(err error) {
	if f.up.Swap(false) {
		f.log.Warn("fleet: etcd unreachable; keeping the last fleet override until it expires, and the local error rate", "err", err)
	}
}

// errorLog limits the log of failed connection attempts: a new kind of
// error is logged at once, the same one again every 30s.
type errorLog struct {
	last string
	at   time.Time
}

// noteFailure records why a session ended or could not start, and logs
// it: refused credentials and TLS failures at ERROR, naming them.
func (f *Fleet) noteFailure(endpoint string, established bool, err error) {
	now := time.Now()
	f.mu.Lock()
	f.lastErr = err
	msg := err.Error()
	again := f.logged.last == msg && now.Sub(f.logged.at) < 30*time.Second
	if !again {
		f.logged = errorLog{last: msg, at: now}
	}
	f.mu.Unlock()
	switch kind := errorKind(err); {
	case errors.Is(err, errRolledBack), errors.Is(err, errCompacted):
		f.log.Warn("fleet: reading everything again", "endpoint", endpoint, "err", err)
	case established:
		f.log.Warn("fleet: lost the etcd member; moving to the next", "endpoint", endpoint, "err", err)
	case again:
	case errors.Is(kind, ErrAuth):
		f.log.Error("fleet: etcd refused the credentials: check fleet.etcd.username and fleet.etcd.password_file, and the user's role", "endpoint", endpoint, "err", err)
	case errors.Is(kind, ErrTLS):
		f.log.Error("fleet: the TLS handshake with etcd failed: check fleet.etcd.tls (ca_file, cert_file, key_file) and the endpoint's scheme", "endpoint", endpoint, "err", err)
	default:
		f.log.Warn("fleet: cannot reach the etcd member", "endpoint", endpoint, "err", err)
	}
}
