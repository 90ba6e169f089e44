package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// fleetConfig is a daemon's config in fleet mode: the fast config, a
// 200ms tick, instance_ttl 2s, the given endpoints; etcd is added to the
// etcd block (e.g. "dial_timeout: 2s").
func fleetConfig(t *testing.T, name, endpoints, etcd string) string {
	t.Helper()
	dir := t.TempDir()
	if etcd == "" {
		etcd = "dial_timeout: 1s"
	}
	cfg := fmt.Sprintf(fastConfig, dir, "200ms") + fmt.Sprintf(`fleet:
  enabled: true
  name: shop
  instance: %s
  instance_ttl: 2s
  etcd: {endpoints: [%s], %s}
`, name, endpoints, etcd)
	return writeConfig(t, dir, cfg)
}

// fleetLevel is what the test reads of each daemon's state document.
type fleetLevel struct {
	Level  string `json:"level"`
	Source string `json:"source"`
	Reason string `json:"reason"`
	Fleet  *struct {
		Connected bool `json:"connected"`
		Override  *struct {
			Reason string `json:"reason"`
		} `json:"override"`
	} `json:"fleet"`
}

func (d *process) fleetLevel(t *testing.T) fleetLevel {
	t.Helper()
	resp, body := d.request(t, "GET", "/v1/level", "", "")
	var doc fleetLevel
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &doc) != nil || doc.Fleet == nil {
		t.Fatalf("GET /v1/level: %d %s, want a state document with a fleet object", resp.StatusCode, body)
	}
	return doc
}

// until polls cond every 50ms for at most d.
func until(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFleetE2EOverrideAndOutage: three daemon processes and Debian's
// etcd. One `degraded override set Major --fleet` reaches all three, and
// `fleet status` names the aggregator, its term and the override's actor;
// with etcd SIGKILLed they keep serving and keep the override; with etcd
// back they reconnect.
func TestFleetE2EOverrideAndOutage(t *testing.T) {
	t.Parallel()
	etcd := startEtcdCluster(t, etcdOpts{})
	var ds []*process
	for _, name := range []string{"a", "b", "c"} {
		ds = append(ds, start(t, "serve", "--config", fleetConfig(t, name, etcd.endpoints(), "")))
	}
	for _, d := range ds {
		until(t, 15*time.Second, d.url+" connects to etcd", func() bool { return d.fleetLevel(t).Fleet.Connected })
	}
	for _, d := range ds {
		until(t, 5*time.Second, d.url+" /metrics counts the three instances, connected", func() bool {
			_, body := d.request(t, "GET", "/metrics", "", "")
			return strings.Contains(body, "\ndegraded_fleet_instances 3\n") && strings.Contains(body, "\ndegraded_fleet_connected 1\n")
		})
	}

	cli := exec.Command(binary, "override", "set", "Major", "--fleet", "--ttl", "15m", "--reason", "INC-42", "--addr", ds[0].url)
	cli.Env = append(os.Environ(), "DEGRADED_TOKEN=admin-secret")
	out, err := cli.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "fleet override pin Major until") {
		t.Fatalf("degraded override set Major --fleet: %v\n%s", err, out)
	}
	for _, d := range ds {
		until(t, 5*time.Second, d.url+" publishes the fleet pin", func() bool {
			st := d.fleetLevel(t)
			return st.Level == "Major" && st.Source == "fleet" && st.Reason == "fleet override set: pin Major for 15m0s: INC-42"
		})
	}
	status := exec.Command(binary, "fleet", "status", "--addr", ds[2].url)
	until(t, 5*time.Second, "fleet status names the aggregator", func() bool {
		out, err := status.CombinedOutput()
		status = exec.Command(binary, "fleet", "status", "--addr", ds[2].url)
		return err == nil && regexp.MustCompile(`Aggregator  [abc], term \d+, published`).Match(out) &&
			strings.Contains(string(out), "fleet pin Major until") && strings.Contains(string(out), " by admin (INC-42)")
	})

	etcd.kill(0)
	for _, d := range ds {
		until(t, 5*time.Second, d.url+" notices etcd is gone", func() bool { return !d.fleetLevel(t).Fleet.Connected })
		if st := d.fleetLevel(t); st.Level != "Major" || st.Source != "fleet" {
			t.Errorf("%s with etcd killed: %+v, want the fleet pin kept", d.url, st)
		}
		if resp, _ := d.request(t, "GET", "/readyz", "", ""); resp.StatusCode != http.StatusOK {
			t.Errorf("%s /readyz with etcd killed: %d, want 200", d.url, resp.StatusCode)
		}
	}

	etcd.start(0)
	for _, d := range ds {
		until(t, 15*time.Second, d.url+" reconnects", func() bool { return d.fleetLevel(t).Fleet.Connected })
		if st := d.fleetLevel(t); st.Level != "Major" || st.Source != "fleet" {
			t.Errorf("%s after etcd came back: %+v, want the fleet pin still in force", d.url, st)
		}
	}
	resp, body := ds[1].request(t, "DELETE", "/v1/fleet/override", "admin-secret", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE /v1/fleet/override after etcd came back: %d %s", resp.StatusCode, body)
	}
	for _, d := range ds {
		until(t, 5*time.Second, d.url+" drops the fleet pin", func() bool { return d.fleetLevel(t).Source == "auto" })
		if code := d.stop(t); code != 0 {
			t.Errorf("%s: SIGTERM exit %d\n%s", d.url, code, d.logs)
		}
	}
}
