package fleet_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/degraded/degraded/internal/daemon"
	"github.com/degraded/degraded/internal/daemon/daemontest"
)

// fleetDaemon runs a daemon in fleet mode against endpoint.
func fleetDaemon(t *testing.T, endpoint, instance string) *daemontest.Rig {
	t.Helper()
	yaml := fmt.Sprintf(`data_dir: %s
health_check_interval: 100ms
signals: {cpu: {source: off}, memory: {source: off}}
fleet:
  enabled: true
  name: shop
  instance: %s
  instance_ttl: 2s
  etcd: {endpoints: [%s], dial_timeout: 2s}
`, t.TempDir(), instance, endpoint)
	return daemontest.Start(t, yaml, daemon.Options{})
}

func call(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

type levelDoc struct {
	Level  string `json:"level"`
	Source string `json:"source"`
	Reason string `json:"reason"`
	Fleet  *struct {
		Connected bool `json:"connected"`
		Override  *struct {
			Level string `json:"level"`
		} `json:"override"`
	} `json:"fleet"`
}

func level(t *testing.T, r *daemontest.Rig) levelDoc {
	t.Helper()
	code, body := call(t, "GET", r.URL+"/v1/level", "")
	var d levelDoc
	if code != http.StatusOK || json.Unmarshal([]byte(body), &d) != nil {
		t.Fatalf("GET /v1/level: %d %s", code, body)
	}
	return d
}

func TestDaemonsFollowTheFleetOverride(t *testing.T) {
	etcd := startEtcd(t)
	ds := []*daemontest.Rig{fleetDaemon(t, etcd.endpoint(), "a"), fleetDaemon(t, etcd.endpoint(), "b"), fleetDaemon(t, etcd.endpoint(), "c")}
	for _, d := range ds {
		eventually(t, 10*time.Second, "daemon connects", func() bool { f := level(t, d).Fleet; return f != nil && f.Connected })
	}

	code, body := call(t, "PUT", ds[0].URL+"/v1/fleet/override", `{"level":"Major","mode":"pin","ttl":"15m","reason":"INC-42"}`)
	if code != http.StatusOK || !strings.Contains(body, `"level":"Major"`) {
		t.Fatalf("PUT /v1/fleet/override: %d %s, want 200 with the fleet document", code, body)
	}
	if st := level(t, ds[0]); st.Level != "Major" || st.Source != "fleet" {
		t.Errorf("the handling instance answered before applying it: %+v", st)
	}
	for i, d := range ds {
		eventually(t, 5*time.Second, fmt.Sprintf("daemon %d publishes the fleet pin", i), func() bool {
			st := level(t, d)
			return st.Level == "Major" && st.Source == "fleet" && st.Reason == "fleet override set: pin Major for 15m0s: INC-42"
		})
	}
	eventually(t, 5*time.Second, "the fleet view lists 3 instances", func() bool {
		_, body := call(t, "GET", ds[1].URL+"/v1/fleet", "")
		var v struct {
			Instances []struct{ Instance string } `json:"instances"`
			Levels    map[string]int              `json:"levels"`
		}
		_ = json.Unmarshal([]byte(body), &v)
		return len(v.Instances) == 3 && v.Levels["Major"] == 3
	})

	// etcd goes away: the daemons keep serving and keep the override.
	etcd.stop()
	for i, d := range ds {
		eventually(t, 5*time.Second, fmt.Sprintf("daemon %d sees etcd gone within dial_timeout + 2s", i), func() bool { return !level(t, d).Fleet.Connected })
		if st := level(t, d); st.Level != "Major" || st.Source != "fleet" {
			t.Errorf("daemon %d with etcd down: %+v, want the fleet pin kept", i, st)
		}
		if code, _ := call(t, "GET", d.URL+"/readyz", ""); code != http.StatusOK {
			t.Errorf("daemon %d /readyz with etcd down: %d, want 200: readiness does not depend on etcd", i, code)
		}
	}
	if code, body := call(t, "DELETE", ds[2].URL+"/v1/fleet/override", ""); code != http.StatusServiceUnavailable {
		t.Errorf("DELETE with etcd down: %d %s, want 503", code, body)
	}

	etcd.start()
	for i, d := range ds {
		eventually(t, 10*time.Second, fmt.Sprintf("daemon %d reconnects", i), func() bool { return level(t, d).Fleet.Connected })
	}
	if code, body := call(t, "DELETE", ds[2].URL+"/v1/fleet/override", ""); code != http.StatusOK {
		t.Fatalf("DELETE after etcd came back: %d %s", code, body)
	}
	for i, d := range ds {
		eventually(t, 5*time.Second, fmt.Sprintf("daemon %d drops the fleet pin", i), func() bool {
			st := level(t, d)
			return st.Source == "auto" && st.Reason == "fleet override cleared: INC-42"
		})
	}
	_, body = call(t, "GET", ds[1].URL+"/v1/fleet/history?limit=10", "")
	var h struct {
		Entries []struct {
			Seq    int64  `json:"seq"`
			Action string `json:"action"`
		} `json:"entries"`
	}
	if err := json.Unmarshal([]byte(body), &h); err != nil || len(h.Entries) != 2 || h.Entries[0].Action != "clear" || h.Entries[1].Action != "set" {
		t.Errorf("history = %s, want the clear then the set, newest first", body)
	}
}
