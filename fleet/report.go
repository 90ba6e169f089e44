package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// auditEvery is how often a session reads the audit counter's key, to
// notice a restore whose revision has climbed past the one seen.
const auditEvery = 30 * time.Second

// writeLoop writes the latest report under the lease at once (one given
// before the session started, or whose write failed in the last one),
// then each new report, probes the member when nothing answered for
// probeEvery, and checks the audit counter every auditEvery, until one
// fails or ctx ends.
func (f *Fleet) writeLoop(ctx context.Context, cli *clientv3.Client, lease clientv3.LeaseID) error {
	if err := f.putReport(ctx, cli, lease); err != nil {
		return err
	}
	probe := time.NewTicker(probeEvery / 4)
	defer probe.Stop()
	audit := time.NewTicker(auditEvery)
	defer audit.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-f.reportCh:
			if err := f.putReport(ctx, cli, lease); err != nil {
				return err
			}
		case <-audit.C:
			if err := f.checkAudit(ctx, cli); err != nil {
				return err
			}
		case <-probe.C:
			if time.Since(time.Unix(0, f.lastOK.Load())) < probeEvery {
				continue
			}
			actx, cancel := context.WithTimeout(ctx, f.attempt)
			resp, err := cli.Get(actx, f.keys.override(), clientv3.WithCountOnly())
			cancel()
			if err != nil {
				return classify(ctx, "probe", err)
			}
			f.ok()
			if err := f.checkHeader(resp.Header); err != nil {
				return err
			}
		}
	}
}

// putReport writes the latest report, if any, under the lease, and judges
// from the value it replaced whether another process uses this name.
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
	f.noteOversized(len(b), r.Level)
	actx, cancel := context.WithTimeout(ctx, f.attempt)
	resp, err := cli.Put(actx, f.keys.instance(f.o.Instance), string(b), clientv3.WithLease(lease), clientv3.WithPrevKV())
	cancel()
	if err != nil {
		return classify(ctx, "write the instance report", err)
	}
	f.ok()
	if err := f.checkHeader(resp.Header); err != nil {
		return err
	}
	f.mu.Lock()
	v := f.puts.judge(resp.PrevKv, f.id, resp.Header.Revision, time.Now(), f.o.InstanceTTL)
	f.mu.Unlock()
	switch {
	case v.started:
		f.log.Error("fleet: another process reports under this instance's name; give each instance its own fleet.instance",
			"other_instance_id", v.other, "other_lease", fmt.Sprintf("%x", v.otherLease), "instance_id", f.id)
	case v.ended:
		f.log.Info("fleet: the other process under this instance's name has gone", "other_instance_id", v.other)
	case v.tookOver:
		f.log.Info("fleet: took over this instance's key from a previous process (a restart); not a conflict unless it writes again",
			"previous_instance_id", v.other, "previous_lease", fmt.Sprintf("%x", v.otherLease))
	}
	// Stored after the log line: whoever sees the conflict finds it logged.
	f.conflict.Store(v.conflict)
	return nil
}

// noteOversized warns, once a minute while it lasts, that this instance's
// report is one the aggregator leaves out (checkReport): too large, or its
// level's name too long. It is written anyway, for the fleet view's sake.
func (f *Fleet) noteOversized(size int, level string) {
	var why string
	switch {
	case size > MaxReportBytes:
		why = fmt.Sprintf("this instance's report is %d bytes, over the %d the aggregator takes (fewer custom signals?)", size, MaxReportBytes)
	case utf8.RuneCountInString(level) > MaxLevelName:
		why = fmt.Sprintf("the level %.40q... is over %d characters", level, MaxLevelName)
	default:
		return
	}
	f.every("report oversized", time.Minute, func() {
		f.log.Warn("fleet: "+why+": the aggregator leaves this instance out of the fleet's sums", "instance", f.o.Instance)
	})
}

// putState is what the conflict judgement remembers between puts.
type putState struct {
	last     int64     // the revision of this process's last report put
	other    string    // the other instance_id last seen on the key
	otherAt  time.Time // when it was last seen
	conflict bool      // the last verdict
}

// verdict is one put's judgement.
type verdict struct {
	conflict, started, ended, tookOver bool
	other                              string
	otherLease                         int64
}

// judge decides, from prev (the value a report put replaced, WithPrevKV),
// whether another process writes under this instance's name. Another
// instance_id on the key before this process's first put is a previous
// process's last report (a crash or restart; its lease may still run):
// taken over, not a conflict. Another instance_id after this process's
// own put means someone wrote since: a conflict, which ends once no other
// id has been seen for ttl (the other process has gone).
func (p *putState) judge(prev *mvccpb.KeyValue, id string, rev int64, now time.Time, ttl time.Duration) verdict {
	was := p.conflict
	var v verdict
	if prev != nil && prev.ModRevision != p.last {
		var r struct {
			InstanceID string `json:"instance_id"`
		}
		_ = json.Unmarshal(prev.Value, &r)
		if r.InstanceID != id {
			v.other, v.otherLease = r.InstanceID, prev.Lease
			if p.last == 0 {
				v.tookOver = true
			} else {
				p.other, p.otherAt = r.InstanceID, now
			}
		}
	}
	p.last = rev
	v.conflict = !p.otherAt.IsZero() && now.Sub(p.otherAt) <= ttl
	p.conflict = v.conflict
	v.started = v.conflict && !was
	v.ended = was && !v.conflict
	if v.ended {
		v.other = p.other
	}
	return v
}
