package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/internal/daemon"
	"github.com/degraded/degraded/internal/daemon/daemontest"
)

// rig is a daemon in fleet mode, its log and its config file (rewritten
// and reloaded by the tests that reload).
type rig struct {
	*daemontest.Rig
	log  *logBuffer
	path string
}

// fleetYAML is a daemon's config in fleet mode against endpoint: a 100ms
// tick, signals off, instance_ttl 2s; extra is added to the fleet block's
// etcd map (e.g. "dial_timeout: 3s") and body to the top level.
func fleetYAML(t *testing.T, endpoint, instance, etcd, body string) string {
	if etcd == "" {
		etcd = "dial_timeout: 2s"
	}
	return fmt.Sprintf(`data_dir: %s
health_check_interval: 100ms
signals: {cpu: {source: off}, memory: {source: off}}
%s
fleet:
  enabled: true
  name: shop
  instance: %s
  instance_ttl: 2s
  error_rate_scope: fleet
  etcd: {endpoints: [%s], %s}
`, t.TempDir(), body, instance, endpoint, etcd)
}

// fleetDaemon runs a daemon in fleet mode against endpoint.
func fleetDaemon(t *testing.T, endpoint, instance string) *daemontest.Rig {
	t.Helper()
	return fleetRig(t, fleetYAML(t, endpoint, instance, "", "")).Rig
}

// fleetRig runs a daemon from yaml, logging to a buffer, reloadable from
// its file.
func fleetRig(t *testing.T, yaml string) *rig {
	t.Helper()
	path := filepath.Join(t.TempDir(), "degraded.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	log := &logBuffer{}
	load := func(reload bool) (*config.Config, []string, error) {
		return config.Load(config.LoadOptions{Path: path, Reload: reload})
	}
	r := daemontest.Start(t, yaml, daemon.Options{Log: log, Load: load})
	return &rig{Rig: r, log: log, path: path}
}

// stoppable runs a daemon from yaml like fleetRig, and returns a stop
// that ends it (a clean SIGTERM's path) before the test does.
func stoppable(t *testing.T, yaml string) (*rig, func()) {
	t.Helper()
	log := &logBuffer{}
	d := daemontest.New(t, yaml, daemon.Options{Log: log})
	srv := daemontest.NewServer(t, d.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("daemon: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return &rig{Rig: &daemontest.Rig{Daemon: d, Server: srv, URL: srv.URL}, log: log}, stop
}

// rewrite replaces the rig's config file (before a Reload).
func (r *rig) rewrite(t *testing.T, yaml string) {
	t.Helper()
	if err := os.WriteFile(r.path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
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
	Index  int    `json:"index"`
	Source string `json:"source"`
	Reason string `json:"reason"`
	Fleet  *struct {
		Connected bool `json:"connected"`
		Override  *struct {
			Level     string    `json:"level"`
			Reason    string    `json:"reason"`
			Actor     string    `json:"actor"`
			ExpiresAt time.Time `json:"expires_at"`
		} `json:"override"`
	} `json:"fleet"`
	size int
}

func level(t *testing.T, r *daemontest.Rig) levelDoc {
	t.Helper()
	code, body := call(t, "GET", r.URL+"/v1/level", "")
	var d levelDoc
	if code != http.StatusOK || json.Unmarshal([]byte(body), &d) != nil {
		t.Fatalf("GET /v1/level: %d %.300s", code, body)
	}
	d.size = len(body)
	return d
}

// fleetDoc is what the tests read of GET /v1/fleet.
type fleetDoc struct {
	Connected  bool `json:"connected"`
	Aggregator *struct {
		Instance string    `json:"instance"`
		Term     int64     `json:"term"`
		At       time.Time `json:"at"`
		Stale    bool      `json:"stale"`
	} `json:"aggregator"`
	OverrideRefused *struct {
		Revision int64  `json:"revision"`
		Level    string `json:"level"`
		Actor    string `json:"actor"`
		Error    string `json:"error"`
	} `json:"override_refused"`
	Instances []struct {
		Instance string `json:"instance"`
	} `json:"instances"`
	InstancesTotal int64          `json:"instances_total"`
	Levels         map[string]int `json:"levels"`
	WindowAttempts int64          `json:"window_attempts"`
	WindowFailures int64          `json:"window_failures"`
}

func fleetView(t *testing.T, r *daemontest.Rig) fleetDoc {
	t.Helper()
	code, body := call(t, "GET", r.URL+"/v1/fleet", "")
	var d fleetDoc
	if code != http.StatusOK || json.Unmarshal([]byte(body), &d) != nil {
		t.Fatalf("GET /v1/fleet: %d %.300s", code, body)
	}
	return d
}

// metric reads one unlabelled sample of the daemon's /metrics ("" when
// it is not there).
func metric(t *testing.T, r *daemontest.Rig, name string) string {
	t.Helper()
	_, body := call(t, "GET", r.URL+"/metrics", "")
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// put sets a fleet pin through r and fails the test unless it answers 200.
func put(t *testing.T, r *daemontest.Rig, level, reason, ttl string) {
	t.Helper()
	// A daemon just started, or whose etcd just came back, answers 503
	// until it is connected (the API's contract: nothing is changed).
	eventually(t, 10*time.Second, "the daemon connects to etcd", func() bool { return fleetView(t, r).Connected })
	code, body := call(t, "PUT", r.URL+"/v1/fleet/override", fmt.Sprintf(`{"level":%q,"mode":"pin","ttl":%q,"reason":%q}`, level, ttl, reason))
	if code != http.StatusOK {
		t.Fatalf("PUT /v1/fleet/override %s: %d %s", level, code, body)
	}
}

// publishes waits until every daemon publishes want from source (want
// "": any level).
func publishes(t *testing.T, d time.Duration, want, source string, rs ...*daemontest.Rig) {
	t.Helper()
	for i, r := range rs {
		eventually(t, d, fmt.Sprintf("daemon %d publishes %q from %s", i, want, source), func() bool {
			st := level(t, r)
			return st.Source == source && (want == "" || st.Level == want)
		})
	}
}

func jsonUnmarshal(body string, v any) error { return json.Unmarshal([]byte(body), v) }

func TestDaemonsFollowTheFleetOverride(t *testing.T) {
	t.Parallel()
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
	// Every daemon has seen the aggregate of the three Major reports
	// before etcd goes away, so what each answers with etcd down is known.
	for i, d := range ds {
		eventually(t, 5*time.Second, fmt.Sprintf("daemon %d's fleet view lists 3 instances at Major", i), func() bool {
			v := fleetView(t, d)
			return len(v.Instances) == 3 && v.Levels["Major"] == 3
		})
	}

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
		// What it last saw: the aggregate of the three Major reports, and
		// the instances of its last GET /v1/fleet.
		if v := fleetView(t, d); v.Connected || v.Aggregator == nil || v.Levels["Major"] != 3 || len(v.Instances) != 3 {
			t.Errorf("daemon %d's GET /v1/fleet with etcd down: %+v, want the last view it read, connected false", i, v)
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
		// Every instance records who set and who cleared it (no token is
		// configured here: anonymous), not only the one asked.
		_, body := call(t, "GET", d.URL+"/v1/history?limit=10", "")
		var hist struct {
			Transitions []struct{ Reason, Actor string } `json:"transitions"`
		}
		_ = json.Unmarshal([]byte(body), &hist)
		actors := map[string]string{}
		for _, tr := range hist.Transitions {
			actors[tr.Reason] = tr.Actor
		}
		if actors["fleet override set: pin Major for 15m0s: INC-42"] != "anonymous" || actors["fleet override cleared: INC-42"] != "anonymous" {
			t.Errorf("daemon %d's history names %v, want the set and the clear by anonymous", i, actors)
		}
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
