package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// campaign runs for the aggregator's role (concurrency.Election on
// <prefix><name>/leader, under the instance lease) and, once elected,
// aggregates until deposed, then campaigns again; it returns when the
// session ends.
func (f *Fleet) campaign(ctx context.Context, sess *concurrency.Session) error {
	for {
		e := concurrency.NewElection(sess, f.keys.leader())
		if err := e.Campaign(clientv3.WithRequireLeader(ctx), f.o.Instance); err != nil {
			return classify(ctx, "campaign to aggregate", err)
		}
		term := e.Rev()
		err := f.aggregate(ctx, sess, e.Key(), term)
		f.aggregating.Store(0)
		if !errors.Is(err, errNotLeader) {
			return err
		}
		f.log.Warn("fleet: this instance no longer aggregates the fleet", "term", term, "err", err)
	}
}

// aggregate is the aggregator's loop: it learns for one tick, then every
// tick reads the instances' reports (one range read), sums the valid ones
// and writes the aggregate under its session lease, in a transaction that
// holds only while its election key (create revision term) exists, so
// that a deposed aggregator can never write. It returns errNotLeader when
// deposed.
func (f *Fleet) aggregate(ctx context.Context, sess *concurrency.Session, key string, term int64) error {
	cli := sess.Client()
	f.aggregating.Store(term)
	f.log.Info("fleet: this instance aggregates the fleet's reports", "term", term)
	if _, err := f.collect(ctx, cli); f.skipped(err) != nil { // the round it learns from
		return err
	}
	t := time.NewTicker(f.o.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
		a, err := f.collect(ctx, cli)
		if err != nil {
			if f.skipped(err) != nil {
				return err
			}
			continue
		}
		a.Leader, a.Term, a.At = f.o.Instance, term, time.Now().UTC()
		b, err := json.Marshal(a)
		if err != nil {
			return fmt.Errorf("fleet: encode the aggregate: %w", err)
		}
		actx, cancel := context.WithTimeout(ctx, f.attempt)
		resp, err := cli.Txn(actx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", term)).
			Then(clientv3.OpPut(f.keys.aggregate(), string(b), clientv3.WithLease(sess.Lease()))).Commit()
		cancel()
		if err != nil {
			if err := f.skipped(classify(ctx, "write the aggregate", err)); err != nil {
				return err
			}
			continue
		}
		f.ok()
		if err := f.checkHeader(resp.Header); err != nil {
			return err
		}
		if !resp.Succeeded {
			return errNotLeader
		}
	}
}

// skipped returns err unless it is ErrTooLarge: the reports under the
// prefix outgrew Options.MaxRecvBytes, or the aggregate etcd's request
// limit. That is the keys' fault, not the member's, so the session goes
// on and the round is skipped: the aggregate goes stale, and the fleet
// falls back to local error rates until the keys are removed. It is
// logged at ERROR, once a minute while it lasts.
func (f *Fleet) skipped(err error) error {
	if err == nil || !errors.Is(err, ErrTooLarge) {
		return err
	}
	f.logTooLarge("the aggregate is not published", "the fleet's error rate falls back to each instance's own until they are removed", err)
	return nil
}

// logTooLarge logs at ERROR, once a minute for each what, that what could
// not be done because etcd's answer or a request was over the size limit
// (ErrTooLarge), and then what follows from it.
func (f *Fleet) logTooLarge(what, then string, err error) {
	f.every("too large: "+what, time.Minute, func() {
		f.log.Error("fleet: "+what+": etcd's answer or the request is over the size limit (keys written by hand under the fleet's prefix?); "+then,
			"prefix", f.keys.root, "max_recv_bytes", f.o.MaxRecvBytes, "err", err)
	})
}

// collect reads every instance report and sums the valid ones. Each
// report left out is logged once per key and problem.
func (f *Fleet) collect(ctx context.Context, cli *clientv3.Client) (Aggregate, error) {
	actx, cancel := context.WithTimeout(ctx, f.attempt)
	resp, err := cli.Get(actx, f.keys.instances(), clientv3.WithPrefix())
	cancel()
	if err != nil {
		return Aggregate{}, classify(ctx, "read the instance reports", err)
	}
	f.ok()
	if err := f.checkHeader(resp.Header); err != nil {
		return Aggregate{}, err
	}
	now := time.Now()
	valid := make([]Report, 0, len(resp.Kvs))
	type refusal struct {
		key string
		err error
	}
	var refused []refusal
	bad := map[string]bool{}
	f.mu.Lock()
	for _, kv := range resp.Kvs {
		r, err := checkReport(kv.Value, kv.Lease, now, f.o.InstanceTTL)
		if err != nil {
			key := string(kv.Key)
			bad[key] = true
			if err := f.once(key, err); err != nil {
				refused = append(refused, refusal{key, err})
			}
			continue
		}
		valid = append(valid, r)
	}
	for key := range f.bad {
		if strings.HasPrefix(key, f.keys.instances()) && !bad[key] {
			delete(f.bad, key) // valid again, or gone: a new problem is logged again
		}
	}
	f.mu.Unlock()
	for _, r := range refused {
		f.log.Warn("fleet: an instance report is left out of the fleet's sums", "key", r.key, "err", r.err)
	}
	return sum(valid), nil
}
