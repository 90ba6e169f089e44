package fleet

import (
	"testing"
	"time"
)

// TestErrorRateFallsBackToLocal: the fleet window comes from the newest
// aggregate while etcd answers and the aggregate is fresh; else Local
// says why the local window is used.
func TestErrorRateFallsBackToLocal(t *testing.T) {
	f, err := New(Options{Endpoints: []string{"http://127.0.0.1:1"}, Name: "shop", Instance: "a", InstanceTTL: 2 * time.Second, Tick: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if w := f.ErrorRate(now); w.Local != LocalUnreachable {
		t.Errorf("before any session: %+v, want %q", w, LocalUnreachable)
	}
	f.up.Store(true)
	f.lastOK.Store(now.UnixNano())
	if w := f.ErrorRate(now); w.Local != LocalStale {
		t.Errorf("connected, no aggregate yet: %+v, want %q", w, LocalStale)
	}
	f.agg, f.aggAt = &Aggregate{Attempts: 1000, Failures: 100, Instances: 7, Term: 3}, now
	for _, c := range []struct {
		age  time.Duration
		want Window
	}{
		{0, Window{Attempts: 1000, Failures: 100, Instances: 7}},
		{2100 * time.Millisecond, Window{Attempts: 1000, Failures: 100, Instances: 7}}, // instance_ttl + one tick: still fresh
		{2101 * time.Millisecond, Window{Local: LocalStale}},
	} {
		if got := f.ErrorRate(now.Add(c.age)); got != c.want {
			t.Errorf("an aggregate received %s ago: %+v, want %+v", c.age, got, c.want)
		}
	}
	f.lastOK.Store(now.Add(-f.o.DialTimeout - 2*time.Second).UnixNano())
	if w := f.ErrorRate(now); w.Local != LocalUnreachable {
		t.Errorf("etcd silent for dial_timeout + 2s: %+v, want %q", w, LocalUnreachable)
	}
	if f.Connected() {
		t.Error("Connected after etcd was silent for dial_timeout + 2s")
	}
}

// TestDeliverKeepsEtcdsOrder: updates are queued in order; an older or
// equal revision is dropped within an epoch, and a new epoch (a rollback)
// takes any revision.
func TestDeliverKeepsEtcdsOrder(t *testing.T) {
	f, err := New(Options{Endpoints: []string{"http://127.0.0.1:1"}, Name: "shop", Instance: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, rev := range []int64{5, 7, 7, 6, 9} {
		f.deliver(OverrideUpdate{Revision: rev})
	}
	f.epoch++
	f.deliver(OverrideUpdate{Revision: 2})
	var got []int64
	for len(f.queue) > 0 {
		u, _ := f.Next(t.Context())
		got = append(got, u.Revision*10+int64(u.Epoch))
	}
	want := []int64{50, 70, 90, 21}
	if len(got) != len(want) {
		t.Fatalf("delivered %v, want %v (revision*10 + epoch)", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("delivered %v, want %v (revision*10 + epoch)", got, want)
			break
		}
	}
}

// TestLastViewKeepsTheNewestAggregate: with etcd gone, the fleet view is
// the last one read, with the newer of its aggregate and the one the
// watch delivered: a view read on demand can hold an aggregate the watch
// had not delivered yet, and the watch can deliver one after the last
// view was read.
func TestLastViewKeepsTheNewestAggregate(t *testing.T) {
	f, err := New(Options{Endpoints: []string{"http://127.0.0.1:1"}, Name: "shop", Instance: "a", InstanceTTL: 2 * time.Second, Tick: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	watched := Aggregate{Levels: map[string]int{"Normal": 3}, Term: 3, At: now.Add(-time.Second)}
	read := Aggregate{Levels: map[string]int{"Major": 3}, Term: 3, At: now}
	f.agg, f.aggAt = &watched, now.Add(-time.Second)
	f.view = View{Connected: true, Aggregate: &AggregateView{Aggregate: read, Received: now}}
	v := f.Document(t.Context(), 10)
	if v.Connected || v.Aggregate == nil || v.Aggregate.Levels["Major"] != 3 || v.Aggregate.Stale {
		t.Errorf("etcd gone, the view read holding the newer aggregate: %+v, want its Major: 3, fresh, disconnected", v.Aggregate)
	}
	later := Aggregate{Levels: map[string]int{"Severe": 3}, Term: 4, At: now.Add(-3 * time.Second)}
	f.agg, f.aggAt = &later, now.Add(-3*time.Second)
	if v := f.Document(t.Context(), 10); v.Aggregate == nil || v.Aggregate.Levels["Severe"] != 3 || !v.Aggregate.Stale {
		t.Errorf("etcd gone, the watch holding a later term: %+v, want its Severe: 3, stale by its receipt 3 s ago", v.Aggregate)
	}
}
