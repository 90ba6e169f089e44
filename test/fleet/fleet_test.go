package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/degraded/degraded/fleet"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func pin(level, reason string, ttl time.Duration) fleet.Override {
	return fleet.Override{Level: level, Mode: "pin", TTL: ttl, Reason: reason}
}

// setOverride writes o through f for a test's setup, again while etcd
// answers too late: under -race on a loaded machine the embedded etcd can
// take longer than the members' dial_timeout (a full run saw "context
// deadline exceeded" for the first write of the partition test, before
// any partition, at 1s). What the tests assert of refused writes they
// assert on SetOverride itself.
func setOverride(t *testing.T, f *fleet.Fleet, o fleet.Override) fleet.OverrideUpdate {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		set, err := f.SetOverride(context.Background(), o)
		if err == nil {
			return set
		}
		if !errors.Is(err, fleet.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		t.Logf("setup write retried: %v", err)
	}
}

// seesOverride waits until f holds the update of revision rev.
func seesOverride(t *testing.T, f *fleet.Fleet, rev int64, d time.Duration) fleet.OverrideUpdate {
	t.Helper()
	var got fleet.OverrideUpdate
	eventually(t, d, fmt.Sprintf("%s sees the fleet override of revision %d", f.Instance(), rev), func() bool {
		got = f.Override()
		return got.Revision >= rev
	})
	return got
}

func TestOverrideReachesEveryMember(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	a, b, c := member(t, etcd.endpoint(), "a"), member(t, etcd.endpoint(), "b"), member(t, etcd.endpoint(), "c")
	connected(t, a, b, c)

	o := pin("Major", "INC-42", 15*time.Minute)
	o.Actor = "alice"
	set := setOverride(t, a, o)
	for _, f := range []*fleet.Fleet{a, b, c} {
		got := seesOverride(t, f, set.Revision, 5*time.Second)
		if got.Override == nil || got.Override.Level != "Major" || got.Override.Mode != "pin" || got.Override.Reason != "INC-42" ||
			got.Override.TTL != 15*time.Minute || got.Override.Instance != "a" || got.Override.Actor != "alice" || got.Revision != set.Revision {
			t.Errorf("%s holds %+v (override %+v), want a's pin Major for 15m at revision %d", f.Instance(), got, got.Override, set.Revision)
		}
	}

	clr, err := b.ClearOverride(context.Background(), "INC-42 resolved", "bob")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []*fleet.Fleet{a, b, c} {
		if got := seesOverride(t, f, clr.Revision, 5*time.Second); got.Override != nil || got.Expired || got.Actor != "bob" {
			t.Errorf("%s holds %+v after the DELETE, want no override, cleared (not expired) by bob", f.Instance(), got)
		}
	}
}

func TestOverrideLeaseExpiryIsNotAClear(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	a, b := member(t, etcd.endpoint(), "a"), member(t, etcd.endpoint(), "b")
	connected(t, a, b)
	set := setOverride(t, a, pin("Minor", "drill", 2*time.Second))
	seesOverride(t, b, set.Revision, 5*time.Second)
	got := seesOverride(t, b, set.Revision+1, 10*time.Second)
	if got.Override != nil || !got.Expired {
		t.Errorf("b holds %+v once the override's lease ran out, want none, marked expired", got)
	}
}

// TestAClearWhoseAuditCannotBeReadIsLogged: a lying writer deletes the
// fleet override and sets the audit counter to a word in the same
// transaction, so no try of reading the clear's audit entry can succeed.
// The clear is still applied (an override no one can read the author of
// must not outlive its DELETE), without an actor and not as an expiry,
// and the member says so, naming the revision and what was wrong: it
// used to apply it silently, as if the daemon itself had cleared it.
func TestAClearWhoseAuditCannotBeReadIsLogged(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	a, alog := logged(t, etcd.endpoint(), "a")
	connected(t, a)
	set := setOverride(t, a, pin("Major", "INC-7", 15*time.Minute))
	seesOverride(t, a, set.Revision, 5*time.Second)

	raw := etcd.raw(t)
	resp, err := raw.Txn(context.Background()).Then(
		clientv3.OpDelete("/degraded/shop/override"),
		clientv3.OpPut("/degraded/shop/audit_seq", "seven"),
	).Commit()
	if err != nil {
		t.Fatal(err)
	}
	rev := resp.Header.Revision
	if got := seesOverride(t, a, rev, 10*time.Second); got.Override != nil || got.Expired || got.Actor != "" || got.Revision != rev {
		t.Errorf("a holds %+v (override %+v) after the lying clear, want no override at revision %d, not expired, no actor", got, got.Override, rev)
	}
	if n := alog.count("the audit entry of an override clear could not be read", fmt.Sprintf("revision=%d", rev), "seven", "is not a number"); n != 1 {
		t.Errorf("a logged the unread clear %d times, want once:\n%s", n, alog)
	}
}

func TestDeadInstanceLeavesTheViewWhenItsLeaseExpires(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	a := member(t, etcd.endpoint(), "a")
	connected(t, a)
	reporting(t, a, fleet.Report{Level: "Normal", Source: "auto"})

	// A process killed with SIGKILL stops its keepalives without revoking
	// its lease: here, a raw client that reported under a 2s lease, then
	// vanished.
	raw := etcd.raw(t)
	lease, err := raw.Grant(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	dead := fmt.Sprintf(`{"level":"Major","index":3,"source":"auto","instance_id":"x","at":%q}`, time.Now().UTC().Format(time.RFC3339Nano))
	if _, err := raw.Put(context.Background(), "/degraded/shop/instances/dead", dead, clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	ctx := context.Background()
	eventually(t, 5*time.Second, "the aggregate counts both instances", func() bool {
		v := a.Document(ctx, 100)
		return len(v.Instances) == 2 && v.Aggregate != nil && v.Aggregate.Instances == 2
	})
	if v := a.Document(ctx, 100); v.Aggregate.Levels["Major"] != 1 || v.Aggregate.Levels["Normal"] != 1 || v.InstancesTotal != 2 {
		t.Errorf("view %+v, aggregate %+v: want one Major and one Normal, 2 in all", v, v.Aggregate)
	}
	start := time.Now()
	eventually(t, 6*time.Second, "the dead instance leaves the view and the aggregate", func() bool {
		v := a.Document(ctx, 100)
		return len(v.Instances) == 1 && v.Aggregate.Instances == 1
	})
	t.Logf("the dead instance left the view %s after its last write", time.Since(start).Round(time.Millisecond))
	if v := a.Document(ctx, 100); v.Instances[0].Instance != "a" {
		t.Errorf("view holds %+v, want only a", v.Instances)
	}
}

func TestFleetErrorRateComesFromTheAggregate(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	ms := []*fleet.Fleet{member(t, etcd.endpoint(), "a"), member(t, etcd.endpoint(), "b"), member(t, etcd.endpoint(), "c")}
	connected(t, ms...)
	windows := [][2]int64{{100, 30}, {200, 10}, {700, 60}}
	for i, m := range ms {
		reporting(t, m, fleet.Report{Level: "Normal", Source: "auto", WindowAttempts: windows[i][0], WindowFailures: windows[i][1]})
	}
	for _, m := range ms {
		eventually(t, 5*time.Second, m.Instance()+" sees an aggregate of 3 instances", func() bool {
			return m.ErrorRate(time.Now()).Instances == 3
		})
		if w := m.ErrorRate(time.Now()); w.Attempts != 1000 || w.Failures != 100 || w.Local != "" {
			t.Errorf("%s: fleet window %+v, want 100 failures of 1000 attempts (10%%) over 3", m.Instance(), w)
		}
	}
	var aggregators int
	for _, m := range ms {
		if m.Aggregating() > 0 {
			aggregators++
		}
	}
	if aggregators != 1 {
		t.Errorf("%d members aggregate, want exactly 1", aggregators)
	}
}

func TestEtcdStoppedAndRestarted(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	a, b := member(t, etcd.endpoint(), "a"), member(t, etcd.endpoint(), "b")
	connected(t, a, b)
	set := setOverride(t, a, pin("Major", "INC-7", time.Hour))
	seesOverride(t, b, set.Revision, 5*time.Second)

	etcd.stop()
	stopped := time.Now()
	eventually(t, 4*time.Second+500*time.Millisecond, "b notices etcd is gone within dial_timeout + 2s", func() bool { return !b.Connected() })
	t.Logf("disconnected after %s", time.Since(stopped).Round(time.Millisecond))
	if got := b.Override(); got.Override == nil || got.Revision != set.Revision {
		t.Errorf("b holds %+v while etcd is down, want the last override kept", got)
	}
	_, err := a.SetOverride(context.Background(), pin("Severe", "nope", time.Hour))
	if !errors.Is(err, fleet.ErrUnavailable) {
		t.Errorf("SetOverride with etcd down = %v, want ErrUnavailable", err)
	}

	etcd.start()
	connected(t, a, b)
	clr, err := a.ClearOverride(context.Background(), "INC-7 over", "admin")
	if err != nil {
		t.Fatal(err)
	}
	if got := seesOverride(t, b, clr.Revision, 5*time.Second); got.Override != nil {
		t.Errorf("b holds %+v after the clear, want none: the watch resumed", got)
	}
}

func TestPartitionKeepsTheOverrideAndCatchesUp(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	p := newProxy(t, etcd.client.Host)
	a, b := member(t, etcd.endpoint(), "a"), member(t, p.endpoint(), "b")
	connected(t, a, b)
	first := setOverride(t, a, pin("Moderate", "INC-1", time.Hour))
	seesOverride(t, b, first.Revision, 5*time.Second)

	p.cut()
	eventually(t, 4*time.Second+500*time.Millisecond, "b is cut off within dial_timeout + 2s", func() bool { return !b.Connected() })
	second := setOverride(t, a, pin("Severe", "INC-2", time.Hour))
	if got := b.Override(); got.Revision != first.Revision || got.Override == nil || got.Override.Level != "Moderate" {
		t.Errorf("b holds %+v during the partition, want the first override kept", got)
	}

	p.restore(t)
	got := seesOverride(t, b, second.Revision, 10*time.Second)
	if got.Override == nil || got.Override.Level != "Severe" || got.Override.Reason != "INC-2" {
		t.Errorf("b holds %+v after the partition, want the override set meanwhile", got.Override)
	}
	if !b.Connected() {
		t.Error("b not connected after the partition healed")
	}
}

func TestAuditHistory(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	a, b := member(t, etcd.endpoint(), "a"), member(t, etcd.endpoint(), "b")
	connected(t, a, b)
	ctx := context.Background()
	if _, err := a.SetOverride(ctx, pin("Major", "INC-42", 15*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ClearOverride(ctx, "INC-42 resolved", "bob"); err != nil {
		t.Fatal(err)
	}
	// Concurrent writers each get their own sequence number.
	var wg sync.WaitGroup
	for _, m := range []*fleet.Fleet{a, b, a, b} {
		wg.Go(func() {
			if _, err := m.SetOverride(ctx, fleet.Override{Level: "Minor", Mode: "floor", TTL: time.Minute, Reason: "race"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()

	h, err := b.History(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 6 {
		t.Fatalf("history has %d entries, want 6", len(h))
	}
	for i, e := range h {
		if want := int64(6 - i); e.Seq != want {
			t.Errorf("entry %d has seq %d, want %d (newest first, no gaps, no duplicates)", i, e.Seq, want)
		}
	}
	set, clr := h[5], h[4]
	if set.Action != "set" || set.Level != "Major" || set.Mode != "pin" || set.TTL != "15m0s" || set.Reason != "INC-42" || set.Instance != "a" || set.ExpiresAt == nil {
		t.Errorf("first entry = %+v, want a's set of pin Major for 15m0s", set)
	}
	if clr.Action != "clear" || clr.Reason != "INC-42 resolved" || clr.Instance != "b" || clr.Actor != "bob" || clr.ExpiresAt != nil {
		t.Errorf("second entry = %+v, want b's clear", clr)
	}
	if h2, _ := a.History(ctx, 2); len(h2) != 2 || h2[0].Seq != 6 {
		t.Errorf("History(2) = %+v, want the 2 newest", h2)
	}
}

// A replaced or cleared fleet override leaves no lease behind in etcd:
// only the instances' leases and the standing override's remain.
func TestReplacedOverrideLeavesNoLease(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	a, b := member(t, etcd.endpoint(), "a"), member(t, etcd.endpoint(), "b")
	connected(t, a, b)
	raw := etcd.raw(t)
	ctx := context.Background()
	leases := func() int {
		t.Helper()
		l, err := raw.Leases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Leases)
	}
	instances := leases()
	for i, step := range []func() error{
		func() error { _, err := a.SetOverride(ctx, pin("Major", "INC-42", 15*time.Minute)); return err },
		func() error { _, err := b.SetOverride(ctx, pin("Severe", "INC-42 worse", 15*time.Minute)); return err },
		func() error { _, err := a.SetOverride(ctx, pin("Severe", "INC-42 worse", 15*time.Minute)); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
		if got := leases(); got != instances+1 {
			t.Errorf("after PUT %d: %d leases in etcd, want %d (the instances' and one for the override)", i+1, got, instances+1)
		}
	}
	if _, err := b.ClearOverride(ctx, "INC-42 resolved", "admin"); err != nil {
		t.Fatal(err)
	}
	if got := leases(); got != instances {
		t.Errorf("after the DELETE: %d leases in etcd, want the instances' %d", got, instances)
	}
}

// TestTwoProcessesUnderOneInstanceNameConflict (finding 8, its second
// half): two live processes under one name both raise the conflict, and
// it clears once the other has gone.
func TestTwoProcessesUnderOneInstanceNameConflict(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	a, alog := logged(t, etcd.endpoint(), "web-1")
	b, _, stopB := startMember(t, etcd.endpoint(), "web-1")
	c := member(t, etcd.endpoint(), "web-2")
	connected(t, a, b, c)
	for _, m := range []*fleet.Fleet{a, b, c} {
		reporting(t, m, fleet.Report{Level: "Normal", Source: "auto"})
	}
	for _, m := range []*fleet.Fleet{a, b} {
		eventually(t, 5*time.Second, "a process sharing web-1 notices the other", m.Conflict)
	}
	if c.Conflict() {
		t.Error("web-2, alone under its name, reports a conflict")
	}
	if n := alog.count("another process reports under this instance's name", b.InstanceID()); n != 1 {
		t.Errorf("a logged the conflict %d times, want once:\n%s", n, alog)
	}
	_ = stopB()
	eventually(t, 5*time.Second, "the conflict clears once the other process has gone (within instance_ttl and a tick)", func() bool { return !a.Conflict() })
}
