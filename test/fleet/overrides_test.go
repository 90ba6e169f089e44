package fleet_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// handWritten puts a fleet override value straight into etcd, under a
// lease of a minute, as a buggy or hostile writer of the key could.
func handWritten(t *testing.T, etcd *etcdServer, value string) int64 {
	t.Helper()
	raw := etcd.raw(t)
	lease, err := raw.Grant(context.Background(), 60)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := raw.Put(context.Background(), "/degraded/shop/override", value, clientv3.WithLease(lease.ID))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

func overrideJSON(level, ttl, reason string, setAt, expiresAt time.Time) string {
	return fmt.Sprintf(`{"level":%q,"mode":"pin","ttl":%q,"reason":%q,"instance":"ghost","actor":"mallory","set_at":%q,"expires_at":%q}`,
		level, ttl, reason, setAt.UTC().Format(time.RFC3339Nano), expiresAt.UTC().Format(time.RFC3339Nano))
}

// TestFleetOverridesFromEtcdAreValidated (finding 4): a fleet override
// read from etcd with a 1 MB reason is refused whole (ERROR, the metric,
// /v1/fleet says why; the state document, state.json and the timeline
// stay small); one already expired by this instance's clock is logged,
// not silently skipped; one whose ttl exceeds max_override_ttl is clamped
// to it.
func TestFleetOverridesFromEtcdAreValidated(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	dataDir := t.TempDir()
	a := fleetRig(t, strings.Replace(fleetYAML(t, etcd.endpoint(), "a", "", "max_override_ttl: 1h"), "data_dir: ", "data_dir: "+dataDir+" #", 1))
	eventually(t, 10*time.Second, "a connects", func() bool { return level(t, a.Rig).Fleet.Connected })
	now := time.Now()

	rev := handWritten(t, etcd, overrideJSON("Major", "15m0s", strings.Repeat("x", 1<<20), now, now.Add(15*time.Minute)))
	eventually(t, 5*time.Second, "a refuses the 1 MB reason, and /v1/fleet says why", func() bool {
		r := fleetView(t, a.Rig).OverrideRefused
		return r != nil && r.Revision == rev && strings.Contains(r.Error, "reason must be 1 to 500 characters (was 1048576)")
	})
	if r := fleetView(t, a.Rig).OverrideRefused; r.Level != "Major" || r.Actor != "mallory" {
		t.Errorf("the refusal names level %q and actor %q, want the value's Major and mallory", r.Level, r.Actor)
	}
	if st := level(t, a.Rig); st.Source != "auto" || st.Fleet.Override != nil || st.size > 16<<10 {
		t.Errorf("a publishes source %s, fleet override %+v, a document of %d bytes: want the override refused whole", st.Source, st.Fleet.Override, st.size)
	}
	if got := metric(t, a.Rig, "degraded_fleet_override_refused_total"); got != "1" {
		t.Errorf("degraded_fleet_override_refused_total %q, want 1", got)
	}
	if n := a.log.count("level=ERROR", "the fleet override in etcd is refused", "reason must be 1 to 500"); n != 1 {
		t.Errorf("%d ERROR lines for the refused override, want 1:\n%.2000s", n, a.log)
	}
	if strings.Contains(a.log.String(), strings.Repeat("x", 1000)) {
		t.Error("the log quotes the 1 MB reason")
	}

	handWritten(t, etcd, overrideJSON("Major", "1h0m0s", "INC-9 from the past", now.Add(-2*time.Hour), now.Add(-time.Hour)))
	eventually(t, 5*time.Second, "a logs the override that arrived expired", func() bool {
		return a.log.count("arrived already expired", "actor=mallory") == 1
	})
	if st := level(t, a.Rig); st.Source != "auto" {
		t.Errorf("an expired fleet override was applied: %+v", st)
	}

	handWritten(t, etcd, overrideJSON("Major", "48h0m0s", "INC-10 for two days", now, now.Add(48*time.Hour)))
	eventually(t, 5*time.Second, "a applies the 48h pin", func() bool { return level(t, a.Rig).Source == "fleet" })
	st := level(t, a.Rig)
	if st.Level != "Major" || st.Fleet.Override.ExpiresAt.After(time.Now().Add(time.Hour)) || st.Fleet.Override.Actor != "mallory" {
		t.Errorf("a publishes %s until %s (by %s), want Major clamped to max_override_ttl (1h), by mallory", st.Level, st.Fleet.Override.ExpiresAt, st.Fleet.Override.Actor)
	}
	if r := fleetView(t, a.Rig).OverrideRefused; r != nil {
		t.Errorf("/v1/fleet still shows a refusal once a valid override applies: %+v", r)
	}
	eventually(t, 5*time.Second, "the state file is written", func() bool {
		fi, err := os.Stat(filepath.Join(dataDir, "state.json"))
		return err == nil && fi.Size() > 0
	})
	if fi, _ := os.Stat(filepath.Join(dataDir, "state.json")); fi.Size() > 64<<10 {
		t.Errorf("state.json is %d bytes: the refused reason reached it", fi.Size())
	}
}

// tableYAML is a level table of the given names, thresholds 10, 30, 50...
func tableYAML(names ...string) string {
	var b strings.Builder
	b.WriteString("levels:\n")
	for i, n := range names {
		fmt.Fprintf(&b, "  - {name: %s, priority_threshold: %d}\n", n, 10+20*i)
	}
	return b.String()
}

// TestAnInstanceLackingTheFleetLevelDropsTheLayer (finding 5): a fleet
// pin naming a level one instance lacks replaces one it had applied; that
// instance drops the replaced pin (etcd no longer holds it), says why
// (ERROR, the metric, /v1/fleet), and follows the next valid one.
func TestAnInstanceLackingTheFleetLevelDropsTheLayer(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	a := fleetRig(t, fleetYAML(t, etcd.endpoint(), "a", "", tableYAML("Minor", "Major", "Critical")))
	b := fleetRig(t, fleetYAML(t, etcd.endpoint(), "b", "", tableYAML("Minor", "Major")))
	put(t, b.Rig, "Major", "INC-1", "15m")
	publishes(t, 10*time.Second, "Major", "fleet", a.Rig, b.Rig)

	put(t, a.Rig, "Critical", "INC-1 worse", "15m")
	publishes(t, 5*time.Second, "Critical", "fleet", a.Rig)
	eventually(t, 5*time.Second, "b drops the replaced Major pin", func() bool { return level(t, b.Rig).Source == "auto" })
	if r := fleetView(t, b.Rig).OverrideRefused; r == nil || r.Level != "Critical" || !strings.Contains(r.Error, `"Critical"`) {
		t.Errorf("b's /v1/fleet shows the refusal %+v, want one naming Critical", r)
	}
	if got := metric(t, b.Rig, "degraded_fleet_override_refused_total"); got != "1" {
		t.Errorf("b's degraded_fleet_override_refused_total %q, want 1", got)
	}
	if n := b.log.count("level=ERROR", "the fleet override in etcd is refused", "level=Critical"); n != 1 {
		t.Errorf("b logged %d ERROR lines naming Critical, want 1:\n%s", n, b.log)
	}

	put(t, a.Rig, "Minor", "INC-1 better", "15m")
	publishes(t, 5*time.Second, "Minor", "fleet", a.Rig, b.Rig)
	if r := fleetView(t, b.Rig).OverrideRefused; r != nil {
		t.Errorf("b still shows a refusal after a valid override: %+v", r)
	}
}

// TestReloadRemapsTheFleetOverrideByName (finding 3): a reload that
// inserts a level below an active fleet pin keeps the pinned level by
// name (its index moves); one that removes it is refused, naming the
// fleet override, and changes nothing.
func TestReloadRemapsTheFleetOverrideByName(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	yaml := func(names ...string) string { return fleetYAML(t, etcd.endpoint(), "a", "", tableYAML(names...)) }
	a := fleetRig(t, yaml("Minor", "Major", "Severe"))
	put(t, a.Rig, "Major", "INC-5", "15m")
	publishes(t, 10*time.Second, "Major", "fleet", a.Rig)
	if st := level(t, a.Rig); st.Index != 2 {
		t.Fatalf("Major pinned at index %d, want 2", st.Index)
	}
	seq := func() int64 {
		var doc struct{ Sequence int64 }
		_, body := call(t, "GET", a.URL+"/v1/level", "")
		if err := jsonUnmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		return doc.Sequence
	}

	a.rewrite(t, yaml("Minor", "Moderate", "Major", "Severe"))
	before := seq()
	if err := a.Reload("admin"); err != nil {
		t.Fatalf("reload inserting Moderate: %v", err)
	}
	if st := level(t, a.Rig); st.Level != "Major" || st.Index != 3 || st.Source != "fleet" {
		t.Errorf("after inserting Moderate: %s (index %d) from %s, want Major (index 3) from fleet", st.Level, st.Index, st.Source)
	}
	if after := seq(); after <= before {
		t.Errorf("the index moved but the sequence did not (%d -> %d)", before, after)
	}

	a.rewrite(t, yaml("Minor", "Moderate"))
	err := a.Reload("admin")
	if err == nil || !strings.Contains(err.Error(), "Major") || !strings.Contains(err.Error(), "fleet") {
		t.Errorf("reload dropping the fleet pin's level: %v, want it refused naming the fleet override of Major", err)
	}
	if st := level(t, a.Rig); st.Level != "Major" || st.Index != 3 || st.Source != "fleet" {
		t.Errorf("after the refused reload: %s (index %d) from %s, want Major (index 3) from fleet, unchanged", st.Level, st.Index, st.Source)
	}
	if code, body := call(t, "DELETE", a.URL+"/v1/fleet/override", ""); code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	if err := a.Reload("admin"); err != nil {
		t.Errorf("the same reload once the fleet pin is cleared: %v", err)
	}
	if st := level(t, a.Rig); st.Index > 2 {
		t.Errorf("after a reload to 2 levels: index %d in a 3-level table (Normal included)", st.Index)
	}
}
