package fleet

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Backoff bounds of reconnection: each wait is uniform in [0, d) (full
// jitter), d doubling from BackoffBase up to BackoffCap.
const (
	BackoffBase = 100 * time.Millisecond
	BackoffCap  = 5 * time.Second
)

// probeEvery is how often a session checks that etcd still answers:
// with each check bounded by the dial timeout, connected turns false
// within DialTimeout + probeEvery of etcd going away.
const probeEvery = time.Second

func newID() string {
	var b [8]byte
	_, _ = crand.Read(b[:]) // never fails on Linux (crypto/rand's own contract)
	return hex.EncodeToString(b[:])
}

// Run keeps this instance in the fleet until ctx ends: it connects, reads
// the override and the instances, watches from the revision read, writes
// each report under the instance lease, and after any failure reconnects
// with backoff. It returns ctx.Err() once everything it started has ended,
// and revokes the instance lease on the way out (a clean stop leaves the
// fleet view at once).
func (f *Fleet) Run(ctx context.Context) error {
	defer func() {
		f.mu.Lock()
		cli := f.cli
		f.cli = nil
		f.mu.Unlock()
		if cli != nil {
			_ = cli.Close()
		}
	}()
	for attempt := 0; ; attempt++ {
		wasConnected, err := f.session(ctx)
		f.setConnected(false, err)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if wasConnected {
			attempt = 0
		}
		d := min(BackoffCap, BackoffBase<<min(attempt, 10))
		t := time.NewTimer(rand.N(d))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (f *Fleet) setConnected(on bool, err error) {
	if f.connected.Swap(on) == on {
		return
	}
	if on {
		f.log.Info("fleet: connected to etcd")
	} else {
		f.log.Warn("fleet: etcd unreachable; keeping the last fleet override until it expires", "err", err)
	}
}

func (f *Fleet) dial() (*clientv3.Client, error) {
	f.mu.Lock()
	cli := f.cli
	f.mu.Unlock()
	if cli != nil {
		return cli, nil
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            f.o.Endpoints,
		DialTimeout:          f.o.DialTimeout,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Username:             f.o.Username,
		Password:             f.o.Password,
		TLS:                  f.o.TLS,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	f.mu.Lock()
	f.cli = cli
	f.mu.Unlock()
	return cli, nil
}

// client returns the etcd client, or ErrUnavailable before the first dial.
func (f *Fleet) client() (*clientv3.Client, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cli == nil {
		return nil, fmt.Errorf("%w: not connected yet", ErrUnavailable)
	}
	return f.cli, nil
}

// op bounds one etcd operation by the dial timeout.
func (f *Fleet) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, f.o.DialTimeout)
}

// unavailable wraps an etcd error as ErrUnavailable, keeping ctx's own end.
func unavailable(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return ctx.Err()
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
}

// session is one connection: read all, watch, keep the lease, write
// reports, probe. It returns when any of them fails or ctx ends, and
// whether it had connected (the next reconnect then starts from the
// shortest backoff).
func (f *Fleet) session(ctx context.Context) (bool, error) {
	cli, err := f.dial()
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	octx, ocancel := f.op(ctx)
	lease, err := cli.Grant(octx, int64((f.o.InstanceTTL+time.Second-1)/time.Second))
	ocancel()
	if err != nil {
		return false, unavailable(ctx, "grant instance lease", err)
	}
	defer func() {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), f.o.DialTimeout)
		_, _ = cli.Revoke(rctx, lease.ID)
		rcancel()
	}()
	rev, u, err := f.readAll(ctx, cli)
	if err != nil {
		return false, err
	}
	kas, err := cli.KeepAlive(ctx, lease.ID)
	if err != nil {
		return false, unavailable(ctx, "keep the instance lease alive", err)
	}
	wch := cli.Watch(clientv3.WithRequireLeader(ctx), f.keys.root, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	f.setConnected(true, nil)
	f.deliver(u) // after connected: whoever sees the update sees the member connected
	// Reports and probes wait for etcd's answer (a commit, milliseconds
	// on a busy etcd): they run beside the watch, so that a fleet override
	// is never delivered late because a report was on its way, the
	// session's first report included.
	writerErr := make(chan error, 1)
	var writer sync.WaitGroup
	writer.Go(func() { writerErr <- f.writeLoop(ctx, cli, lease.ID) })
	defer func() { cancel(); writer.Wait() }()
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case err := <-writerErr:
			return true, err
		case _, ok := <-kas:
			if !ok {
				return true, unavailable(ctx, "instance lease", errors.New("keepalive ended"))
			}
		case wr, ok := <-wch:
			if !ok {
				return true, unavailable(ctx, "watch", errors.New("watch closed"))
			}
			if err := wr.Err(); err != nil {
				return true, unavailable(ctx, "watch", err)
			}
			f.apply(wr)
		}
	}
}

// writeLoop writes the latest report under the lease at once (one given
// before the session started, or whose write failed in the last one),
// then each new report, and probes etcd every probeEvery, until one fails
// or ctx ends.
func (f *Fleet) writeLoop(ctx context.Context, cli *clientv3.Client, lease clientv3.LeaseID) error {
	if err := f.putReport(ctx, cli, lease); err != nil {
		return err
	}
	probe := time.NewTicker(probeEvery)
	defer probe.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.reportCh:
			if err := f.putReport(ctx, cli, lease); err != nil {
				return err
			}
		case <-probe.C:
			octx, ocancel := f.op(ctx)
			_, err := cli.Get(octx, f.keys.override(), clientv3.WithCountOnly())
			ocancel()
			if err != nil {
				return unavailable(ctx, "probe", err)
			}
		}
	}
}

// readAll reads the override and the instances at one revision, replaces
// the instances the Fleet held with them, and returns that revision and
// the override update to deliver.
func (f *Fleet) readAll(ctx context.Context, cli *clientv3.Client) (int64, OverrideUpdate, error) {
	octx, ocancel := f.op(ctx)
	defer ocancel()
	resp, err := cli.Txn(octx).Then(
		clientv3.OpGet(f.keys.override()),
		clientv3.OpGet(f.keys.instances(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return 0, OverrideUpdate{}, unavailable(ctx, "read the fleet", err)
	}
	rev := resp.Header.Revision
	u := OverrideUpdate{Revision: rev}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		u = f.decodeOverride(kvs[0])
	}
	now := time.Now()
	insts := map[string]instance{}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		if name, r, ok := f.decodeReport(kv); ok {
			insts[name] = instance{Report: r, seen: now}
		}
	}
	f.mu.Lock()
	f.instances = insts
	f.mu.Unlock()
	return rev, u, nil
}

func (f *Fleet) decodeOverride(kv *mvccpb.KeyValue) OverrideUpdate {
	var o Override
	if err := json.Unmarshal(kv.Value, &o); err != nil {
		f.log.Error("fleet: unreadable fleet override in etcd; ignored", "key", string(kv.Key), "err", err)
		return OverrideUpdate{Revision: kv.ModRevision}
	}
	return OverrideUpdate{Override: &o, Revision: kv.ModRevision}
}

func (f *Fleet) decodeReport(kv *mvccpb.KeyValue) (string, Report, bool) {
	name := strings.TrimPrefix(string(kv.Key), f.keys.instances())
	var r Report
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		f.log.Warn("fleet: unreadable instance report; ignored", "key", string(kv.Key), "err", err)
		return "", r, false
	}
	if name == f.o.Instance && r.InstanceID != f.id && !f.conflict.Swap(true) {
		f.log.Error("fleet: another process reports under this instance's name; give each instance its own fleet.instance",
			"other_instance_id", r.InstanceID, "instance_id", f.id)
	}
	return name, r, true
}

// apply folds one watch response into the view and the override. A
// delete of the override key is a clear when the same revision wrote an
// audit entry (a DELETE's transaction), else its lease expired.
func (f *Fleet) apply(wr clientv3.WatchResponse) {
	audited := map[int64]bool{}
	for _, ev := range wr.Events {
		if ev.Type == clientv3.EventTypePut && strings.HasPrefix(string(ev.Kv.Key), f.keys.auditDir()) {
			audited[ev.Kv.ModRevision] = true
		}
	}
	now := time.Now()
	for _, ev := range wr.Events {
		key := string(ev.Kv.Key)
		switch {
		case key == f.keys.override() && ev.Type == clientv3.EventTypePut:
			f.deliver(f.decodeOverride(ev.Kv))
		case key == f.keys.override():
			f.deliver(OverrideUpdate{Revision: ev.Kv.ModRevision, Expired: !audited[ev.Kv.ModRevision]})
		case strings.HasPrefix(key, f.keys.instances()) && ev.Type == clientv3.EventTypePut:
			if name, r, ok := f.decodeReport(ev.Kv); ok {
				f.mu.Lock()
				f.instances[name] = instance{Report: r, seen: now}
				f.mu.Unlock()
			}
		case strings.HasPrefix(key, f.keys.instances()):
			f.mu.Lock()
			delete(f.instances, strings.TrimPrefix(key, f.keys.instances()))
			f.mu.Unlock()
		}
	}
}

// putReport writes the latest report, if any, under the lease.
func (f *Fleet) putReport(ctx context.Context, cli *clientv3.Client, lease clientv3.LeaseID) error {
	f.mu.Lock()
	r := f.report
	f.mu.Unlock()
	if r == nil {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("fleet: encode report: %w", err)
	}
	octx, ocancel := f.op(ctx)
	_, err = cli.Put(octx, f.keys.instance(f.o.Instance), string(b), clientv3.WithLease(lease))
	ocancel()
	if err != nil {
		return unavailable(ctx, "write the instance report", err)
	}
	return nil
}
