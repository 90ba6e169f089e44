package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// SetOverride writes o as the fleet override, under a lease of its TTL,
// with its audit entry, in one transaction; it returns once etcd
// committed it. The caller validates o's level; SetAt, ExpiresAt and
// Instance are filled here, Actor is the caller's. An error wraps
// ErrUnavailable (and ErrAuth or ErrTLS) when etcd could not be used
// within the dial timeout; a try that timed out on a hung member and is
// retried on another is never committed twice.
func (f *Fleet) SetOverride(ctx context.Context, o Override) (OverrideUpdate, error) {
	now := time.Now()
	o.Instance = f.o.Instance
	o.SetAt, o.ExpiresAt = now.UTC(), now.Add(o.TTL).UTC()
	if err := o.check(); err != nil {
		return OverrideUpdate{}, fmt.Errorf("fleet: %w", err)
	}
	b, err := json.Marshal(o)
	if err != nil {
		return OverrideUpdate{}, fmt.Errorf("fleet: encode override: %w", err)
	}
	exp := o.ExpiresAt
	e := AuditEntry{Action: ActionSet, Level: o.Level, Mode: o.Mode, TTL: o.TTL.String(), Reason: o.Reason,
		Instance: o.Instance, Actor: o.Actor, At: o.SetAt, ExpiresAt: &exp}
	var rev int64
	lease := clientv3.NoLease // granted once: a try on another member reuses it
	err = f.do(ctx, "write the fleet override", func(ctx context.Context, cli *clientv3.Client) error {
		if lease == clientv3.NoLease {
			resp, err := cli.Grant(ctx, int64((o.TTL+time.Second-1)/time.Second))
			if err != nil {
				return err
			}
			lease = resp.ID
		}
		// On an error the lease is left to run out: the transaction may
		// have committed all the same, and revoking it would delete the
		// key.
		var err error
		rev, err = f.audited(ctx, cli, e, clientv3.OpPut(f.keys.override(), string(b), clientv3.WithLease(lease)), b, lease)
		return err
	})
	if err != nil {
		return OverrideUpdate{}, err
	}
	return OverrideUpdate{Override: &o, Revision: rev}, nil
}

// ClearOverride deletes the fleet override with its audit entry (naming
// actor), in one transaction, and returns once etcd committed it. With no
// fleet override it still writes the audit entry: the operator's clear is
// on record.
func (f *Fleet) ClearOverride(ctx context.Context, reason, actor string) (OverrideUpdate, error) {
	e := AuditEntry{Action: ActionClear, Reason: reason, Instance: f.o.Instance, Actor: actor, At: time.Now().UTC()}
	var rev int64
	err := f.do(ctx, "clear the fleet override", func(ctx context.Context, cli *clientv3.Client) error {
		var err error
		rev, err = f.audited(ctx, cli, e, clientv3.OpDelete(f.keys.override()), nil, clientv3.NoLease)
		return err
	})
	if err != nil {
		return OverrideUpdate{}, err
	}
	return OverrideUpdate{Revision: rev, Actor: actor}, nil
}

// audited commits change with the next audit entry, in one transaction
// that holds only if audit_seq is unchanged since it was read: it applies
// change, increments audit_seq, writes the entry and deletes the one
// AuditKeep back. The first try compares with the audit_seq this Fleet
// last wrote or saw (0, "absent", in a new fleet), and a transaction that
// fails its compare reads audit_seq and the override in its Else branch,
// so that a write usually takes one round trip, and two when another
// instance wrote last. When the override already holds value (an earlier
// try of the same call committed, but its answer was lost), it returns
// that revision instead of writing again. Once committed, it revokes the
// lease of the override it replaced or deleted, which nothing holds any
// more: otherwise every PUT would leave a lease in etcd for as long as
// its ttl.
func (f *Fleet) audited(ctx context.Context, cli *clientv3.Client, e AuditEntry, change clientv3.Op, value []byte, lease clientv3.LeaseID) (int64, error) {
	f.mu.Lock()
	seq, modRev, replaced := f.audit.seq, f.audit.modRev, f.audit.lease
	f.mu.Unlock()
	for {
		e.Seq = seq + 1
		b, err := json.Marshal(e)
		if err != nil {
			return 0, fmt.Errorf("fleet: encode audit entry: %w", err)
		}
		ops := []clientv3.Op{change,
			clientv3.OpPut(f.keys.auditSeq(), strconv.FormatInt(e.Seq, 10)),
			clientv3.OpPut(f.keys.audit(e.Seq), string(b))}
		if old := e.Seq - AuditKeep; old > 0 {
			ops = append(ops, clientv3.OpDelete(f.keys.audit(old)))
		}
		tr, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(f.keys.auditSeq()), "=", modRev)).Then(ops...).
			Else(clientv3.OpGet(f.keys.auditSeq()), clientv3.OpGet(f.keys.override())).Commit()
		if err != nil {
			return 0, err
		}
		if tr.Succeeded {
			f.mu.Lock()
			f.audit = auditState{seq: e.Seq, modRev: tr.Header.Revision, lease: lease}
			f.mu.Unlock()
			f.revokeReplaced(ctx, cli, replaced)
			return tr.Header.Revision, nil
		}
		seq, modRev, replaced = 0, 0, clientv3.NoLease
		if kvs := tr.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
			modRev = kvs[0].ModRevision
			if seq, err = strconv.ParseInt(string(kvs[0].Value), 10, 64); err != nil {
				return 0, fmt.Errorf("fleet: %s holds %q, not a number: %w", f.keys.auditSeq(), kvs[0].Value, err)
			}
		}
		if kvs := tr.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
			if value != nil && bytes.Equal(kvs[0].Value, value) {
				return kvs[0].ModRevision, nil
			}
			replaced = clientv3.LeaseID(kvs[0].Lease)
		}
	}
}

// auditState is what this Fleet last wrote of the audit: audit_seq's
// value and mod_revision, and the lease of the override it left (the
// first guess of the next write's transaction).
type auditState struct {
	seq, modRev int64
	lease       clientv3.LeaseID
}

// revokeReplaced ends the lease of a fleet override that is no longer in
// etcd; a failure is logged, and the lease runs out with its ttl.
func (f *Fleet) revokeReplaced(ctx context.Context, cli *clientv3.Client, lease clientv3.LeaseID) {
	if lease == clientv3.NoLease {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.attempt)
	defer cancel()
	if _, err := cli.Revoke(rctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		f.log.Warn("fleet: could not revoke the lease of the replaced fleet override; it ends with its ttl", "lease", int64(lease), "err", err)
	}
}

// History returns the newest limit audit entries, newest first.
func (f *Fleet) History(ctx context.Context, limit int) ([]AuditEntry, error) {
	var out []AuditEntry
	err := f.do(ctx, "read the audit entries", func(ctx context.Context, cli *clientv3.Client) error {
		resp, err := cli.Get(ctx, f.keys.auditDir(), clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(limit)))
		if err != nil {
			return err
		}
		out = make([]AuditEntry, 0, len(resp.Kvs))
		for _, kv := range resp.Kvs {
			var e AuditEntry
			if err := json.Unmarshal(kv.Value, &e); err != nil {
				f.log.Warn("fleet: unreadable audit entry; skipped", "key", string(kv.Key), "err", err)
				continue
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}
