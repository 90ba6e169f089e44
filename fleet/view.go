package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// InstanceView is one instance's report as the fleet view lists it.
type InstanceView struct {
	Instance string
	Level    string
	Index    int
	Source   string
	Signals  json.RawMessage
	// SeenAt is when the instance wrote its report, by its own clock.
	SeenAt time.Time
}

// AggregateView is an aggregate as this instance judges it: Stale once it
// was received more than InstanceTTL + one tick ago by the local clock.
type AggregateView struct {
	Aggregate
	Received time.Time
	Stale    bool
}

// View is the fleet read on demand: the aggregate and the first
// instances' reports, by name. While etcd cannot be reached it is the
// last view read, with Connected false.
type View struct {
	Connected bool
	Aggregate *AggregateView
	Instances []InstanceView
	// InstancesTotal is how many report keys etcd holds, listed or not.
	InstancesTotal int64
}

// Document reads the fleet view from etcd: the aggregate, and the
// reports of the first limit instances by name (one range read). Reports
// that the aggregator would leave out are left out here too. While etcd
// cannot be reached (or does not answer within the dial timeout) it
// returns the last view read, with Connected false.
func (f *Fleet) Document(ctx context.Context, limit int) View {
	if !f.Connected() {
		return f.lastView()
	}
	var v View
	err := f.do(ctx, "read the fleet view", func(ctx context.Context, cli *clientv3.Client) error {
		resp, err := cli.Txn(ctx).Then(clientv3.OpGet(f.keys.aggregate()),
			clientv3.OpGet(f.keys.instances(), clientv3.WithPrefix(), clientv3.WithLimit(int64(limit)),
				clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))).Commit()
		if err != nil {
			return err
		}
		now := time.Now()
		v = View{Connected: true, Instances: []InstanceView{}}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
			v.Aggregate = f.judge(kvs[0], now)
		}
		rr := resp.Responses[1].GetResponseRange()
		v.InstancesTotal = rr.Count
		for _, kv := range rr.Kvs {
			r, err := checkReport(kv.Value, kv.Lease, now, f.o.InstanceTTL)
			if err != nil {
				continue
			}
			v.Instances = append(v.Instances, InstanceView{Instance: strings.TrimPrefix(string(kv.Key), f.keys.instances()),
				Level: r.Level, Index: r.Index, Source: r.Source, Signals: r.Signals, SeenAt: r.At.UTC()})
		}
		return nil
	})
	if errors.Is(err, ErrTooLarge) {
		// Connected, but the reports asked for are over the size limit:
		// the last view read, saying so in the log, not a lost etcd.
		f.logTooLarge("the fleet view is not read", "GET /v1/fleet shows the last view read; a lower ?limit may fit", err)
		v := f.lastView()
		v.Connected = f.Connected()
		return v
	}
	if err != nil {
		return f.lastView()
	}
	f.mu.Lock()
	f.view = v
	f.mu.Unlock()
	return v
}

// judge places the aggregate kv read on demand: one of the term and lease
// this instance proved elected (Fleet.elected) is shown, received now
// unless it is the one this instance holds (same term and at), which
// keeps its receipt time; any other is shown as the one held (nil when
// none is), since only a proved aggregate is the fleet's error rate. The
// caller does not hold f.mu.
func (f *Fleet) judge(kv *mvccpb.KeyValue, now time.Time) *AggregateView {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, err := checkAggregate(kv.Value, kv.Lease, kv.ModRevision)
	proved := err == nil && f.proven.term == a.Term && f.proven.lease == kv.Lease
	h := f.agg
	switch {
	case proved && h != nil && h.Term == a.Term && h.At.Equal(a.At):
	case proved:
		return &AggregateView{Aggregate: a, Received: now, Stale: false}
	case h == nil:
		return nil
	default:
		a = *h
	}
	return &AggregateView{Aggregate: a, Received: f.aggAt, Stale: now.Sub(f.aggAt) > f.staleAfter()}
}

// lastView is the last view read, marked disconnected, with the newer of
// its aggregate and the one the watch delivered, judged by now: a view
// read on demand can hold an aggregate the watch had not delivered yet
// when etcd went away.
func (f *Fleet) lastView() View {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := f.view
	v.Connected = false
	if v.Instances == nil {
		v.Instances = []InstanceView{}
	}
	agg := v.Aggregate
	if h := f.agg; h != nil && (agg == nil || !h.olderThan(agg.Aggregate)) {
		agg = &AggregateView{Aggregate: *h, Received: f.aggAt}
	}
	if agg != nil {
		a := *agg // f.view keeps its own
		a.Stale = time.Since(a.Received) > f.staleAfter()
		v.Aggregate = &a
	}
	return v
}

// olderThan reports whether a was published before b: by an earlier
// aggregator (a lower term), or earlier by the same one.
func (a Aggregate) olderThan(b Aggregate) bool {
	return a.Term < b.Term || a.Term == b.Term && a.At.Before(b.At)
}

// staleAfter is how old (by receipt) an aggregate may be.
func (f *Fleet) staleAfter() time.Duration { return f.o.InstanceTTL + f.o.Tick }

// Window is the fleet's error window as this instance uses it. Local,
// when set, says why the local window is to be used instead.
type Window struct {
	Attempts, Failures int64
	Instances          int
	Local              string
}

// Why the local error window is used.
const (
	LocalUnreachable = "fleet unreachable"
	LocalStale       = "fleet aggregate stale"
)

// ErrorRate is the fleet's error window from the newest aggregate,
// unless etcd cannot be reached or the aggregate is stale (or none has
// arrived): then Local says so.
func (f *Fleet) ErrorRate(now time.Time) Window {
	if !f.Connected() {
		return Window{Local: LocalUnreachable}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.agg == nil || now.Sub(f.aggAt) > f.staleAfter() {
		return Window{Local: LocalStale}
	}
	return Window{Attempts: f.agg.Attempts, Failures: f.agg.Failures, Instances: f.agg.Instances}
}

// Aggregate returns the newest aggregate accepted, judged by now; nil
// before the first.
func (f *Fleet) Aggregate(now time.Time) *AggregateView {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.agg == nil {
		return nil
	}
	return &AggregateView{Aggregate: *f.agg, Received: f.aggAt, Stale: now.Sub(f.aggAt) > f.staleAfter()}
}
