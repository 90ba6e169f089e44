package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// snapshot is what a session reads first: the override, the aggregate
// and the audit counter at one revision.
type snapshot struct {
	header                        *pb.ResponseHeader
	override, aggregate, auditSeq *mvccpb.KeyValue
}

func (f *Fleet) readAll(ctx context.Context, cli *clientv3.Client) (snapshot, error) {
	actx, cancel := context.WithTimeout(ctx, f.attempt)
	defer cancel()
	resp, err := cli.Txn(actx).Then(clientv3.OpGet(f.keys.override()), clientv3.OpGet(f.keys.aggregate()),
		clientv3.OpGet(f.keys.auditSeq(), clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return snapshot{}, err
	}
	f.ok()
	s := snapshot{header: resp.Header}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		s.override = kvs[0]
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
		s.aggregate = kvs[0]
	}
	if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) == 1 {
		s.auditSeq = kvs[0]
	}
	return s, nil
}

// rolledBack says whether s shows etcd's history went back since what
// this Fleet saw: another cluster ID; a revision lower than one seen;
// the audit counter (never deleted, only ever rewritten) older than or
// gone from what a session read before; the override key older than the
// override last delivered. The latter two catch a restore whose revision
// has already climbed past the one seen. The caller holds f.mu.
func (f *Fleet) rolledBack(s snapshot) bool {
	h := s.header
	switch {
	case f.clusterID != 0 && h.ClusterId != f.clusterID, h.Revision < f.maxRev:
		return true
	case f.auditRev > 0 && (s.auditSeq == nil || s.auditSeq.ModRevision < f.auditRev):
		return true
	case s.override != nil && f.ovrRev > 0 && s.override.ModRevision < f.ovrRev:
		return true
	}
	return false
}

// resume folds a session's first read in and returns the revision the
// override watch starts from. A revision lower than one seen, or another
// cluster ID, is a rollback (a restored or replaced cluster): the terms
// and revisions remembered are forgotten, the epoch moves on, and the
// override read is delivered as the truth. Otherwise a reconnect resumes
// the watch after the last revision it delivered, so that every change
// missed meanwhile is replayed in order; a first session delivers what it
// read.
func (f *Fleet) resume(ctx context.Context, cli *clientv3.Client, s snapshot) int64 {
	h := s.header
	f.mu.Lock()
	rolled := f.rolledBack(s)
	seen, seenID := f.maxRev, f.clusterID
	if rolled {
		f.epoch++
		f.maxTerm, f.agg, f.watched, f.maxRev, f.auditRev, f.ovrRev = 0, nil, 0, 0, 0, 0
		f.proven, f.disproven = termCheck{}, termCheck{}
		f.puts, f.audit = putState{}, auditState{}
	}
	f.maxRev = max(f.maxRev, h.Revision)
	f.sessionRev = h.Revision
	f.clusterID = h.ClusterId
	if s.auditSeq != nil {
		f.auditRev = max(f.auditRev, s.auditSeq.ModRevision)
	}
	from := f.watched + 1
	dropped := int64(-1)
	if s.override != nil {
		f.ovrRev = max(f.ovrRev, s.override.ModRevision)
	}
	if f.watched == 0 || rolled {
		dropped = f.deliver(f.overrideAt(s.override, h.Revision))
		f.watched = h.Revision
		from = h.Revision + 1
	}
	f.mu.Unlock()
	if rolled {
		f.log.Warn("fleet: etcd's revision went back (a restored, wiped or replaced cluster): reading everything again",
			"seen_revision", seen, "revision", h.Revision, "seen_cluster_id", fmt.Sprintf("%x", seenID), "cluster_id", fmt.Sprintf("%x", h.ClusterId))
	}
	f.logDropped(dropped)
	if s.aggregate != nil {
		f.takeAggregate(ctx, cli, s.aggregate)
	}
	return from
}

// overrideAt is the update for the override key's value kv (nil: no
// override at revision rev).
func (f *Fleet) overrideAt(kv *mvccpb.KeyValue, rev int64) OverrideUpdate {
	if kv == nil {
		return OverrideUpdate{Revision: rev}
	}
	o, err := checkOverride(kv.Value)
	if err != nil {
		return OverrideUpdate{Revision: kv.ModRevision, Refused: err}
	}
	return OverrideUpdate{Override: o, Revision: kv.ModRevision}
}

// watchLoop follows the two watched keys until one watch fails, the
// lease ends or ctx ends.
func (f *Fleet) watchLoop(ctx context.Context, cli *clientv3.Client, sess *concurrency.Session, owch, awch clientv3.WatchChan) error {
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-sess.Done():
			return fmt.Errorf("%w: the instance lease's keepalive ended", ErrUnavailable)
		case wr, ok := <-owch:
			if err := f.checkWatch(ctx, wr, ok, "override"); err != nil {
				return err
			}
			f.overrideEvents(ctx, cli, wr)
		case wr, ok := <-awch:
			if err := f.checkWatch(ctx, wr, ok, "aggregate"); err != nil {
				return err
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypePut {
					f.takeAggregate(ctx, cli, ev.Kv)
				}
			}
		}
	}
}

// checkWatch checks one watch response: a closed or failed watch ends the
// session; a compacted one makes the next session read everything; a
// header from another cluster ends it too (the next one sees why).
func (f *Fleet) checkWatch(ctx context.Context, wr clientv3.WatchResponse, ok bool, what string) error {
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case !ok:
		return fmt.Errorf("%w: the %s watch closed", ErrUnavailable, what)
	case wr.CompactRevision != 0:
		f.mu.Lock()
		f.watched = 0
		f.mu.Unlock()
		return fmt.Errorf("%w (compacted at %d)", errCompacted, wr.CompactRevision)
	case wr.Err() != nil:
		return fmt.Errorf("%w: the %s watch: %w", ErrUnavailable, what, wr.Err())
	}
	f.ok()
	return f.checkHeader(wr.Header)
}

// errRolledBack ends a session that saw etcd's history go back under it
// (a member restarted from a restored or wiped data dir, reconnected to by
// the same client): the next session reads everything and resets.
var errRolledBack = errors.New("etcd's revision went back")

// checkHeader checks a response of the session's member: another cluster
// ID, or a revision lower than the session's first read, ends the
// session. Every operation of a session starts after that linearizable
// read, so none can answer from before it; operations running side by
// side may answer out of order among themselves, so they are not compared
// with each other.
func (f *Fleet) checkHeader(h *pb.ResponseHeader) error {
	if h == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.clusterID != 0 && h.ClusterId != f.clusterID:
		return fmt.Errorf("%w: the member now answers for another cluster (%x, was %x)", errRolledBack, h.ClusterId, f.clusterID)
	case h.Revision < f.sessionRev:
		return fmt.Errorf("%w: from %d, read at the session's start, to %d", errRolledBack, f.sessionRev, h.Revision)
	}
	f.maxRev = max(f.maxRev, h.Revision)
	return nil
}

// checkAudit reads the audit counter's key: older than, or gone from,
// what was read before means etcd's history went back (a restore whose
// revision has already climbed past the one seen).
func (f *Fleet) checkAudit(ctx context.Context, cli *clientv3.Client) error {
	actx, cancel := context.WithTimeout(ctx, f.attempt)
	resp, err := cli.Get(actx, f.keys.auditSeq(), clientv3.WithKeysOnly())
	cancel()
	if err != nil {
		return classify(ctx, "read the audit counter", err)
	}
	f.ok()
	if err := f.checkHeader(resp.Header); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.auditRev > 0 && len(resp.Kvs) == 0:
		return fmt.Errorf("%w: the audit counter is gone", errRolledBack)
	case len(resp.Kvs) == 1 && resp.Kvs[0].ModRevision < f.auditRev:
		return fmt.Errorf("%w: the audit counter went from revision %d to %d", errRolledBack, f.auditRev, resp.Kvs[0].ModRevision)
	case len(resp.Kvs) == 1:
		f.auditRev = resp.Kvs[0].ModRevision
	}
	return nil
}

// overrideEvents delivers each change of the override key. A progress
// notification moves the resume point on.
func (f *Fleet) overrideEvents(ctx context.Context, cli *clientv3.Client, wr clientv3.WatchResponse) {
	if wr.IsProgressNotify() {
		f.mu.Lock()
		f.watched = max(f.watched, wr.Header.Revision)
		f.mu.Unlock()
		return
	}
	for _, ev := range wr.Events {
		var u OverrideUpdate
		if ev.Type == clientv3.EventTypePut {
			u = f.overrideAt(ev.Kv, ev.Kv.ModRevision)
		} else {
			u = f.deleted(ctx, cli, ev.Kv.ModRevision)
		}
		f.mu.Lock()
		dropped := f.deliver(u)
		f.watched = max(f.watched, ev.Kv.ModRevision)
		if ev.Type == clientv3.EventTypePut {
			f.ovrRev = max(f.ovrRev, ev.Kv.ModRevision)
		}
		f.mu.Unlock()
		f.logDropped(dropped)
	}
}

// deleted is the update for a delete of the override key at rev: a clear
// when the same revision wrote the audit counter (a DELETE's transaction),
// with the actor of its audit entry; else its lease ran out. A read that
// fails is tried again, up to three tries of one attempt each: a member
// slowed for a moment must not strip a clear of its actor. When the audit
// still cannot be read (compacted, a member gone) the failure is logged and
// the update is left to the consumer's clock.
func (f *Fleet) deleted(ctx context.Context, cli *clientv3.Client, rev int64) OverrideUpdate {
	var err error
	for range 3 {
		var u OverrideUpdate
		if u, err = f.readClear(ctx, cli, rev); err == nil {
			return u
		}
		if ctx.Err() != nil || errors.Is(err, rpctypes.ErrCompacted) {
			break
		}
	}
	f.every("override clear unread", 30*time.Second, func() {
		f.log.Warn("fleet: the audit entry of an override clear could not be read; the clear is applied without its actor",
			"revision", rev, "err", err)
	})
	return OverrideUpdate{Revision: rev}
}

// readClear is one try of deleted's reads, each within one attempt.
func (f *Fleet) readClear(ctx context.Context, cli *clientv3.Client, rev int64) (OverrideUpdate, error) {
	u := OverrideUpdate{Revision: rev}
	actx, cancel := context.WithTimeout(ctx, f.attempt)
	defer cancel()
	resp, err := cli.Get(actx, f.keys.auditSeq(), clientv3.WithRev(rev))
	if err != nil {
		return u, err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision != rev {
		u.Expired = true
		return u, nil
	}
	seq, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
	if err != nil {
		return u, fmt.Errorf("the audit counter %q is not a number", resp.Kvs[0].Value)
	}
	entry, err := cli.Get(actx, f.keys.audit(seq), clientv3.WithRev(rev))
	if err != nil {
		return u, err
	}
	if len(entry.Kvs) == 1 {
		var e AuditEntry
		if json.Unmarshal(entry.Kvs[0].Value, &e) == nil {
			u.Actor = e.Actor
		}
	}
	return u, nil
}

// takeAggregate takes an aggregate read or watched, unless checkAggregate
// refuses it, its term is lower than one seen while that one is fresh (a
// deposed aggregator's late write, or a stale member), or its lease holds
// no election key created at its term (elected): an aggregate written by
// hand under the aggregate key is never the fleet's error rate. A refusal
// is logged at once, the same one again every 30s at most. Only the
// session's goroutine calls it (resume, then watchLoop), so nothing else
// takes an aggregate while elected reads etcd. The caller does not hold
// f.mu.
func (f *Fleet) takeAggregate(ctx context.Context, cli *clientv3.Client, kv *mvccpb.KeyValue) {
	a, err := checkAggregate(kv.Value, kv.Lease, kv.ModRevision)
	if err == nil {
		f.mu.Lock()
		err = f.lower(a)
		f.mu.Unlock()
	}
	if err == nil {
		err = f.elected(ctx, cli, a.Term, kv.Lease)
	}
	if err != nil {
		f.every("aggregate refused: "+err.Error(), 30*time.Second, func() {
			f.log.Warn("fleet: the aggregate in etcd is refused; the fleet error rate waits for the next one", "key", f.keys.aggregate(), "err", err)
		})
		return
	}
	f.mu.Lock()
	f.agg, f.aggAt, f.maxTerm = &a, time.Now(), a.Term
	f.mu.Unlock()
}

// every calls log, the caller not holding f.mu, unless the message key
// was logged less than d ago: each problem at once, the same one again
// every d at most, however problems interleave. The memory is bounded:
// past 64 keys it starts again (64 kinds of problem at once are logged
// again, not lost).
func (f *Fleet) every(key string, d time.Duration, log func()) {
	now := time.Now()
	f.mu.Lock()
	at, seen := f.loggedAt[key]
	due := !seen || now.Sub(at) >= d
	if due {
		if f.loggedAt == nil || len(f.loggedAt) >= 64 {
			f.loggedAt = map[string]time.Time{}
		}
		f.loggedAt[key] = now
	}
	f.mu.Unlock()
	if due {
		log()
	}
}

// lower refuses an aggregate of a lower term than one seen while that one
// is fresh. Once the newer term has not published for instance_ttl + one
// tick it is gone (or its history was restored away): then a lower term
// is taken. The caller holds f.mu.
func (f *Fleet) lower(a Aggregate) error {
	if a.Term < f.maxTerm && f.agg != nil && time.Since(f.aggAt) <= f.staleAfter() {
		return fmt.Errorf("its term %d is lower than term %d already seen", a.Term, f.maxTerm)
	}
	return nil
}

// termCheck is what elected found for an aggregate's term and lease: err
// is nil when the lease holds an election key created at the term.
type termCheck struct {
	term, lease int64
	err         error
}

// elected checks, with one read of etcd, that lease holds an election key
// created at term: that the aggregate was written by the session of an
// instance that campaigned in that term, as aggregate writes it. The last
// term proven and the last refused are remembered, so an aggregator's
// writes cost one read per term, and a hand-written one repeated costs
// none. (Whoever can write etcd can campaign and write as an elected
// instance, as it can write a fleet override: this check is against keys
// written by hand or by mistake, not against a forger with the fleet's
// credentials.) A read that fails is not remembered.
func (f *Fleet) elected(ctx context.Context, cli *clientv3.Client, term, lease int64) error {
	f.mu.Lock()
	proven, refused := f.proven, f.disproven
	f.mu.Unlock()
	switch {
	case proven.term == term && proven.lease == lease:
		return nil
	case refused.term == term && refused.lease == lease:
		return refused.err
	}
	key := fmt.Sprintf("%s/%x", f.keys.leader(), lease)
	actx, cancel := context.WithTimeout(ctx, f.attempt)
	resp, err := cli.Get(actx, key)
	cancel()
	if err != nil {
		return fmt.Errorf("its election key %s cannot be read: %w", key, err)
	}
	f.ok()
	c := termCheck{term: term, lease: lease}
	switch {
	case len(resp.Kvs) == 0:
		c.err = fmt.Errorf("its lease %x holds no election key (written by hand, or by an aggregator deposed since)", lease)
	case resp.Kvs[0].CreateRevision != term:
		c.err = fmt.Errorf("its term is not the one its election key (lease %x) was created at, %d", lease, resp.Kvs[0].CreateRevision)
	}
	f.mu.Lock()
	if c.err == nil {
		f.proven = c
	} else {
		f.disproven = c
	}
	f.mu.Unlock()
	return c.err
}

// once returns err the first time key has this problem, else nil: each
// refused value is logged once per key. The caller holds f.mu.
func (f *Fleet) once(key string, err error) error {
	if f.bad[key] == err.Error() {
		return nil
	}
	f.bad[key] = err.Error()
	return err
}

// errNotLeader is why an aggregate write failed its guard.
var errNotLeader = errors.New("the election key is gone: another instance aggregates")
