package fleet_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// copyDir copies a stopped member's data directory (a cold backup).
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v\n%s", from, to, err, out)
	}
}

// churn writes n revisions to a key nobody watches, so that the revision
// the daemons saw is well above what a restored or wiped etcd reaches
// while they reconnect.
func churn(t *testing.T, etcd *etcdServer, n int) {
	t.Helper()
	raw := etcd.raw(t)
	for i := range n {
		if _, err := raw.Put(context.Background(), "/churn", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
}

// TestRevisionRollback (finding 2): etcd restored from an older backup,
// then wiped. After each, every daemon publishes what etcd holds (the
// backup's override, then none), and fleet PUTs and DELETEs answer 200
// and are applied by every instance, although their revisions are below
// the ones the daemons had applied.
func TestRevisionRollback(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	a := fleetRig(t, fleetYAML(t, etcd.endpoint(), "a", "", ""))
	b := fleetRig(t, fleetYAML(t, etcd.endpoint(), "b", "", ""))
	put(t, a.Rig, "Minor", "INC-1 backed up", "15m")
	publishes(t, 10*time.Second, "Minor", "fleet", a.Rig, b.Rig)

	etcd.stop()
	backup := filepath.Join(t.TempDir(), "backup")
	copyDir(t, filepath.Join(etcd.dir, "data"), backup)
	etcd.start()
	eventually(t, 10*time.Second, "a reconnects", func() bool { return level(t, a.Rig).Fleet.Connected })
	put(t, a.Rig, "Major", "INC-2 after the backup", "15m")
	publishes(t, 10*time.Second, "Major", "fleet", a.Rig, b.Rig)
	churn(t, etcd, 500)

	// Restored from the backup: etcd holds the Minor pin again, at a
	// revision below the Major's.
	etcd.stop()
	if err := os.RemoveAll(filepath.Join(etcd.dir, "data")); err != nil {
		t.Fatal(err)
	}
	copyDir(t, backup, filepath.Join(etcd.dir, "data"))
	etcd.start()
	for i, r := range []*rig{a, b} {
		eventually(t, 15*time.Second, fmt.Sprintf("daemon %d publishes the restored backup's Minor pin", i), func() bool {
			st := level(t, r.Rig)
			return st.Level == "Minor" && st.Source == "fleet" && st.Fleet.Connected
		})
	}
	put(t, b.Rig, "Severe", "INC-3 after the restore", "15m")
	publishes(t, 5*time.Second, "Severe", "fleet", a.Rig, b.Rig)
	churn(t, etcd, 500)

	// Wiped: etcd holds nothing, its revision back near 1.
	etcd.stop()
	etcd.wipe()
	etcd.start()
	publishes(t, 15*time.Second, "", "auto", a.Rig, b.Rig)
	for i, r := range []*rig{a, b} {
		eventually(t, 10*time.Second, fmt.Sprintf("daemon %d reconnects to the wiped etcd", i), func() bool { return level(t, r.Rig).Fleet.Connected })
	}
	put(t, b.Rig, "Moderate", "INC-4 after the wipe", "15m")
	publishes(t, 5*time.Second, "Moderate", "fleet", a.Rig, b.Rig)
	if code, body := call(t, "DELETE", a.URL+"/v1/fleet/override", ""); code != http.StatusOK {
		t.Fatalf("DELETE after the wipe: %d %s", code, body)
	}
	for i, r := range []*rig{a, b} {
		eventually(t, 5*time.Second, fmt.Sprintf("daemon %d drops the pin cleared after the wipe", i), func() bool {
			st := level(t, r.Rig)
			return st.Source == "auto" && st.Reason == "fleet override cleared: INC-4 after the wipe"
		})
	}
	for i, r := range []*rig{a, b} {
		if n := r.log.count("etcd's revision went back"); n < 2 {
			t.Errorf("daemon %d logged %d rollbacks, want one for the restore and one for the wipe:\n%s", i, n, r.log)
		}
	}
}
