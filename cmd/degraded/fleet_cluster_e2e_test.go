package main

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"strings"
	"testing"
	"time"
)

// spreadNames are n instance names whose first etcd member (the fleet
// package starts at fnv32a(instance) mod members) differ: one daemon per
// member of an n-member cluster.
func spreadNames(n int) []string {
	taken := map[uint32]bool{}
	var names []string
	for i := 0; len(names) < n; i++ {
		name := fmt.Sprintf("web-%d", i)
		h := fnv.New32a()
		_, _ = h.Write([]byte(name))
		if r := h.Sum32() % uint32(n); !taken[r] {
			taken[r] = true
			names = append(names, name)
		}
	}
	return names
}

// fleetPut sets a fleet pin through d and returns the status and body.
func fleetPut(t *testing.T, d *process, level, reason string) (int, string) {
	t.Helper()
	resp, body := d.request(t, "PUT", "/v1/fleet/override", "admin-secret", fmt.Sprintf(`{"level":%q,"mode":"pin","ttl":"15m","reason":%q}`, level, reason))
	return resp.StatusCode, body
}

// historyReasons are the reasons of d's history entries.
func (d *process) historyReasons(t *testing.T) map[string]bool {
	t.Helper()
	_, body := d.request(t, "GET", "/v1/history?limit=1000", "", "")
	var h struct {
		Transitions []struct{ Reason string } `json:"transitions"`
	}
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatalf("GET /v1/history: %v: %s", err, body)
	}
	out := map[string]bool{}
	for _, tr := range h.Transitions {
		out[tr.Reason] = true
	}
	return out
}

// clusterFleet is a 3-member cluster and a daemon on each member.
func clusterFleet(t *testing.T) (*etcdCluster, []*process) {
	t.Helper()
	etcd := startEtcdCluster(t, etcdOpts{members: 3})
	var ds []*process
	for _, name := range spreadNames(3) {
		ds = append(ds, start(t, "serve", "--config", fleetConfig(t, name, etcd.endpoints(), "dial_timeout: 2s")))
	}
	for _, d := range ds {
		until(t, 15*time.Second, d.url+" connects to etcd", func() bool { return d.fleetLevel(t).Fleet.Connected })
	}
	return etcd, ds
}

// TestFleetE2ELeaderKilledDuringPuts: a 3-member cluster whose leader is
// SIGKILLed while fleet overrides are being written, one after another,
// through all three daemons (one on each member). Every override a PUT
// acknowledged reaches every daemon's history; the fleet ends at the
// last one.
func TestFleetE2ELeaderKilledDuringPuts(t *testing.T) {
	t.Parallel()
	etcd, ds := clusterFleet(t)
	leader := etcd.leader()
	var acked []string
	refused := 0
	begin := time.Now()
	killed := false
	for n := 0; time.Since(begin) < 6*time.Second; n++ {
		if !killed && time.Since(begin) > 1500*time.Millisecond {
			etcd.kill(leader)
			killed = true
			t.Logf("killed the leader, %s, after %d PUTs", etcd.members[leader].name, n)
		}
		level := []string{"Major", "Minor"}[n%2]
		reason := fmt.Sprintf("INC-%d", n)
		code, body := fleetPut(t, ds[n%3], level, reason)
		switch code {
		case http.StatusOK:
			acked = append(acked, fmt.Sprintf("fleet override set: pin %s for 15m0s: %s", level, reason))
		case http.StatusServiceUnavailable:
			refused++
		default:
			t.Fatalf("PUT %d: %d %s", n, code, body)
		}
	}
	t.Logf("%d PUTs acknowledged, %d answered 503 while the cluster elected a new leader", len(acked), refused)
	if len(acked) < 10 {
		t.Fatalf("only %d PUTs acknowledged", len(acked))
	}
	for _, d := range ds {
		var missing []string
		deadline := time.Now().Add(10 * time.Second)
		for {
			h := d.historyReasons(t)
			missing = missing[:0]
			for _, r := range acked {
				if !h[r] {
					missing = append(missing, r)
				}
			}
			if len(missing) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if len(missing) > 0 {
			t.Errorf("%s has not applied %d acknowledged overrides: %v\n%s", d.url, len(missing), missing, d.logs)
			continue
		}
		last := acked[len(acked)-1]
		if st := d.fleetLevel(t); st.Source != "fleet" || st.Reason != last {
			t.Errorf("%s ends at %q, want the last acknowledged %q", d.url, st.Reason, last)
		}
	}
}

// TestFleetE2EMemberPausedNo503: one member of three SIGSTOPped (quorum
// holds): the daemon on it moves to another member; no fleet PUT answers
// 503, every one reaches every daemon, and no daemon shows connected
// false.
func TestFleetE2EMemberPausedNo503(t *testing.T) {
	t.Parallel()
	etcd, ds := clusterFleet(t)
	leader := etcd.leader()
	paused := (leader + 1) % 3
	etcd.pause(paused)
	defer etcd.resume(paused)
	t.Logf("paused %s (the leader is %s)", etcd.members[paused].name, etcd.members[leader].name)
	begin := time.Now()
	var slowest time.Duration
	for n := 0; time.Since(begin) < 8*time.Second; n++ {
		reason := fmt.Sprintf("INC-%d", n)
		start := time.Now()
		code, body := fleetPut(t, ds[n%3], "Major", reason)
		took := time.Since(start)
		slowest = max(slowest, took)
		if code != http.StatusOK {
			t.Fatalf("PUT %d through %s with one member paused: %d %s after %s", n, ds[n%3].url, code, body, took.Round(time.Millisecond))
		}
		for _, d := range ds {
			until(t, 5*time.Second, d.url+" applies "+reason, func() bool {
				st := d.fleetLevel(t)
				if !st.Fleet.Connected {
					t.Errorf("%s shows connected false with two members of three up", d.url)
				}
				return st.Fleet.Override != nil && st.Fleet.Override.Reason == reason
			})
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("the slowest PUT took %s", slowest.Round(time.Millisecond))
	var moved bool
	for _, d := range ds {
		moved = moved || strings.Contains(d.logs.String(), "lost the etcd member; moving to the next")
	}
	if !moved {
		t.Error("no daemon moved off the paused member: the test did not test it")
	}
}
