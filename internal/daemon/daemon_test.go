package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/controller"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// loaderOf returns a Loader reading path, as serve's does.
func loaderOf(path string) Loader {
	return func(reload bool) (*config.Config, []string, error) {
		return config.Load(config.LoadOptions{Path: path, Reload: reload})
	}
}

// startFromFile builds a daemon from the config file at path, reloading
// from it, and closes it when the test ends.
func startFromFile(t *testing.T, path string, o Options) *Daemon {
	t.Helper()
	cfg, _, err := loaderOf(path)(false)
	if err != nil {
		t.Fatal(err)
	}
	o.Load = loaderOf(path)
	d, err := New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// runDaemon runs d until the test ends and waits for its first health
// check: its controller then serves overrides and reloads.
func runDaemon(t *testing.T, d *Daemon) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	for {
		sampled := d.Controller().Sampled()
		if d.Controller().Ready() {
			return
		}
		<-sampled
	}
}

func writeConfig(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRunServesAndStopsCleanly: a daemon on a listener answers, and a
// stop saves the state with the clean-shutdown marker.
func TestRunServesAndStopsCleanly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "degraded.yaml")
	writeConfig(t, path, "data_dir: "+filepath.Join(dir, "data")+"\nhealth_check_interval: 10ms\nsignals: {cpu: {source: off}, memory: {source: off}}\nauth: {token: adm}\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := startFromFile(t, path, Options{Listener: ln})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	url := "http://" + d.Addr().String()
	for deadline := time.Now().Add(5 * time.Second); ; {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready within 5s: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	req, _ := http.NewRequest("PUT", url+"/v1/override", strings.NewReader(`{"level":"Major","ttl":"1h","reason":"x"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer adm")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("PUT /v1/override: %v %v", resp, err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "data", "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Level string `json:"level"`
		Clean bool   `json:"clean_shutdown"`
	}
	if err := json.Unmarshal(b, &p); err != nil || p.Level != "Major" || !p.Clean {
		t.Fatalf("state after a stop: %+v %v, want Major with the clean-shutdown marker", p, err)
	}
}

// TestReloadKeepsUnchangedSamplers: a reload keeps a sampler whose source
// and cgroup path did not change (it would warm up again otherwise), and
// builds a new one when they did.
func TestReloadKeepsUnchangedSamplers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "degraded.yaml")
	body := "data_dir: \"\"\nsignals: {cpu: {source: cgroup}, memory: {source: off}, cgroup_path: " + dir + "}\n"
	writeConfig(t, path, body)
	d := startFromFile(t, path, Options{})
	runDaemon(t, d)
	before := d.opts.CPU
	if err := d.Reload("alice"); err != nil {
		t.Fatal(err)
	}
	if d.opts.CPU != before || d.opts.Memory != nil {
		t.Fatalf("an unchanged reload replaced the cpu sampler (%p -> %p) or turned memory on", before, d.opts.CPU)
	}
	writeConfig(t, path, strings.Replace(body, "cgroup_path: "+dir, "cgroup_path: /elsewhere", 1))
	if err := d.Reload("alice"); err != nil {
		t.Fatal(err)
	}
	if d.opts.CPU == before {
		t.Fatal("a reload with another cgroup_path kept the old sampler")
	}
}

// TestRefusedStartLeavesTheStateAlone: a start refused for its TLS key
// pair, or for max_connections over the open-file limit, does not touch
// state.json: no sequence block reserved, no unclean mark, so the next
// start records no restart of a daemon that never ran.
func TestRefusedStartLeavesTheStateAlone(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.DataDir = dir
	d, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	state := filepath.Join(dir, "state.json")
	before, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for name, bad := range map[string]func(c *config.Config){
		"a missing key pair": func(c *config.Config) {
			c.TLS.CertFile, c.TLS.KeyFile = filepath.Join(dir, "no.crt"), filepath.Join(dir, "no.key")
		},
		"max_connections over the fd limit": func(c *config.Config) { c.MaxConnections = int(rl.Cur) },
	} {
		c := config.Default()
		c.DataDir = dir
		bad(c)
		if d, err := New(c, Options{Listener: ln}); err == nil {
			d.Close()
			t.Fatalf("%s: the start was not refused", name)
		}
		if after, err := os.ReadFile(state); err != nil || string(after) != string(before) {
			t.Errorf("%s: a refused start changed state.json (%v)", name, err)
		}
	}
}

func TestReloadNeedsALoader(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = ""
	d, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Reload("alice"); err == nil {
		t.Fatal("Reload without a loader succeeded")
	}
}

// TestReloadSwitchesQueries: a reload that changes the Prometheus queries
// stops the old ones and runs the new ones; an unchanged reload keeps them
// (they would warm up again otherwise); nothing outlives Run.
func TestReloadSwitchesQueries(t *testing.T) {
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"scalar","result":[1,"42"]}}`)
	}))
	defer prom.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "degraded.yaml")
	body := func(query string) string {
		return fmt.Sprintf("data_dir: \"\"\nsignals: {cpu: {source: off}, memory: {source: off}, prometheus: {url: %q, timeout: 500ms, queries: [{name: q, query: %q, interval: 1s}]}}\n", prom.URL, query)
	}
	writeConfig(t, path, body("vector(1)"))
	d := startFromFile(t, path, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	first := d.runner.current()
	if err := d.Reload("alice"); err != nil {
		t.Fatal(err)
	}
	if d.runner.current() != first {
		t.Fatal("an unchanged reload replaced the running queries")
	}
	writeConfig(t, path, body("vector(2)"))
	if err := d.Reload("alice"); err != nil {
		t.Fatal(err)
	}
	if d.runner.current() == first || d.runner.current() == nil {
		t.Fatal("a reload with another query kept the old queries")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestRefusedReloadChangesNoSource: a reload the controller refuses (its
// table drops the level the override pins) leaves the pushed signals as
// they were: nothing of the new config is half in force.
func TestRefusedReloadChangesNoSource(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "degraded.yaml")
	base := "data_dir: \"\"\nsignals: {cpu: {source: off}, memory: {source: off}, custom: [{name: %s, ttl: 1m}]}\n"
	writeConfig(t, path, fmt.Sprintf(base, "queue_depth"))
	d := startFromFile(t, path, Options{})
	runDaemon(t, d)
	if _, err := d.Controller().SetOverride(controller.OverrideRequest{Level: "Major", Mode: controller.ModePin, TTL: time.Hour, Reason: "INC-1"}); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, path, fmt.Sprintf(base, "backlog")+"levels: [{name: Minor, priority_threshold: 10}]\n")
	if err := d.Reload("alice"); err == nil {
		t.Fatal("a reload dropping the pinned level was accepted")
	}
	if err := d.pushed.Set("queue_depth", 1, time.Now()); err != nil {
		t.Errorf("after the refused reload, queue_depth: %v, want it still configured", err)
	}
	if err := d.pushed.Set("backlog", 1, time.Now()); err == nil {
		t.Error("after the refused reload, backlog was accepted: the new config is half in force")
	}
}
