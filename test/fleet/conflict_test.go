package fleet_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestARestartUnderTheSameNameIsNotAConflict (finding 11): a process
// that crashed left its report under web-1, its lease still alive; the
// restarted daemon of the same name takes the key over without raising
// degraded_fleet_instance_conflict, tick after tick.
func TestARestartUnderTheSameNameIsNotAConflict(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	raw := etcd.raw(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	lease, err := raw.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.KeepAlive(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	last := fmt.Sprintf(`{"level":"Major","index":3,"source":"auto","at":%q,"instance_id":"crashed0process"}`, time.Now().UTC().Format(time.RFC3339Nano))
	if _, err := raw.Put(ctx, "/degraded/shop/instances/web-1", last, clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}

	d := fleetRig(t, fleetYAML(t, etcd.endpoint(), "web-1", "", ""))
	eventually(t, 10*time.Second, "the restarted web-1 reports", func() bool {
		v := fleetView(t, d.Rig)
		return len(v.Instances) == 1 && v.Levels["Normal"] == 1
	})
	deadline := time.Now().Add(20 * testTick)
	for time.Now().Before(deadline) {
		if got := metric(t, d.Rig, "degraded_fleet_instance_conflict"); got != "0" {
			t.Fatalf("degraded_fleet_instance_conflict %s after a restart under the same name, want 0:\n%s", got, d.log)
		}
		time.Sleep(testTick / 2)
	}
	if n := d.log.count("took over this instance's key from a previous process", "crashed0process"); n != 1 {
		t.Errorf("%d lines say web-1 took its key over, want 1:\n%s", n, d.log)
	}
}

// TestTheConflictGaugeClearsWhenTheOtherProcessGoes (finding 8, its
// second half, through the daemons): two daemons under one name both
// raise degraded_fleet_instance_conflict; once one stops, the other's
// gauge returns to 0.
func TestTheConflictGaugeClearsWhenTheOtherProcessGoes(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	a := fleetRig(t, fleetYAML(t, etcd.endpoint(), "web-1", "", ""))
	b, stopB := stoppable(t, fleetYAML(t, etcd.endpoint(), "web-1", "", ""))
	for i, r := range []*rig{a, b} {
		eventually(t, 10*time.Second, fmt.Sprintf("daemon %d sees the conflict", i), func() bool {
			return metric(t, r.Rig, "degraded_fleet_instance_conflict") == "1"
		})
	}
	stopB()
	eventually(t, 5*time.Second, "the conflict clears on a once b has gone", func() bool {
		return metric(t, a.Rig, "degraded_fleet_instance_conflict") == "0"
	})
}
