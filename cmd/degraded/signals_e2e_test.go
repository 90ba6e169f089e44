package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/degraded/degraded/internal/testprom"
)

// The new signals against the real binary: each escalates the level, and
// each holds recovery the way DESIGN.md "Signals" says.

// latencyCounts is a latency_counts array with n requests in bucket i.
func latencyCounts(i, n int) string {
	c := make([]string, 14)
	for j := range c {
		c[j] = "0"
	}
	c[i] = fmt.Sprint(n)
	return "[" + strings.Join(c, ",") + "]"
}

// TestLatencySpikeEscalates: clients report a latency spike; the p99
// crosses Major's latency_ms at once, and the level recovers only once the
// slow requests have left the window.
func TestLatencySpikeEscalates(t *testing.T) {
	dir := t.TempDir()
	d := start(t, "serve", "--config", writeConfig(t, dir, `
listen: 127.0.0.1:0
data_dir: ""
health_check_interval: 50ms
minimum_level_duration: 100ms
error_rate_window: 2s
error_rate_window_buckets: 4
min_throughput: 10
signals: {cpu: {source: off}, memory: {source: off}}
levels:
  - {name: Minor, priority_threshold: 10, latency_ms: 200}
  - {name: Major, priority_threshold: 50, latency_ms: 500}
`))
	// 100 requests, all between 500ms and 1s.
	if resp, b := d.request(t, "POST", "/v1/outcomes", "", `{"success":100,"latency_counts":`+latencyCounts(9, 100)+`}`); resp.StatusCode != 202 {
		t.Fatalf("outcomes: %d %s", resp.StatusCode, b)
	}
	doc := d.waitLevel(t, "Major")
	if !strings.HasPrefix(doc.Reason, "latency p99 ") || !strings.HasSuffix(doc.Reason, "> 500ms (Major)") {
		t.Fatalf("reason %q, want latency p99 ... > 500ms (Major)", doc.Reason)
	}
	spike := time.Now()
	// Fast requests from now on: the p99 clears once the spike ages out.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				req, _ := newRequest("POST", d.url+"/v1/outcomes", "", `{"success":50,"latency_counts":`+latencyCounts(2, 50)+`}`)
				if resp, err := shortClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}
	}()
	d.waitLevel(t, "Normal")
	if held := time.Since(spike); held < 1500*time.Millisecond {
		t.Fatalf("recovered %v after the spike, before it left the 2s window", held)
	}
	d.stop(t)
}

// TestPressureEscalatesAndAvg60Holds: a fake cgroup with cpu.pressure
// some avg10=45 escalates past 40; a ten-second lull (avg10 5) while avg60
// is still 38 does not recover; avg60 20 does.
func TestPressureEscalatesAndAvg60Holds(t *testing.T) {
	dir := t.TempDir()
	cg := filepath.Join(dir, "cgroup")
	os.MkdirAll(cg, 0o750)
	psi := func(avg10, avg60 float64) {
		for _, res := range []string{"memory", "io"} {
			os.WriteFile(filepath.Join(cg, res+".pressure"), []byte("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"), 0o600)
		}
		body := fmt.Sprintf("some avg10=%.2f avg60=%.2f avg300=1.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", avg10, avg60)
		tmp := filepath.Join(cg, ".cpu.pressure")
		os.WriteFile(tmp, []byte(body), 0o600)
		os.Rename(tmp, filepath.Join(cg, "cpu.pressure"))
	}
	psi(45, 30)
	d := start(t, "serve", "--config", writeConfig(t, dir, fmt.Sprintf(`
listen: 127.0.0.1:0
data_dir: ""
health_check_interval: 50ms
minimum_level_duration: 0s
signals: {cpu: {source: off}, memory: {source: off}, pressure: {source: cgroup}, cgroup_path: %q}
levels:
  - {name: Major, priority_threshold: 50, cpu_pressure_percent: 40}
`, cg)))
	if doc := d.waitLevel(t, "Major"); doc.Reason != "cpu_pressure 45.00% > 40% (Major)" {
		t.Fatalf("reason %q, want cpu_pressure 45.00%% > 40%% (Major)", doc.Reason)
	}
	psi(5, 38) // a lull in a long stall: 38 > 40 x 0.9
	time.Sleep(300 * time.Millisecond)
	if doc := d.status(t); doc.Level != "Major" {
		t.Fatalf("avg10 5 with avg60 38: %s (%q), want Major held by avg60", doc.Level, doc.Reason)
	}
	psi(5, 20)
	d.waitLevel(t, "Normal")
	d.stop(t)
}

// TestPushedSignalEscalatesAndGoesStale: a pushed queue_depth over its
// threshold escalates at once; once it is older than its ttl it is failed
// and holds recovery for blind_hold, then memory (available) decides.
func TestPushedSignalEscalatesAndGoesStale(t *testing.T) {
	dir := t.TempDir()
	cg := filepath.Join(dir, "cgroup")
	os.MkdirAll(cg, 0o750)
	for name, body := range map[string]string{"memory.current": "107374182\n", "memory.max": "1073741824\n", "memory.stat": "inactive_file 0\n"} {
		os.WriteFile(filepath.Join(cg, name), []byte(body), 0o600)
	}
	d := start(t, "serve", "--config", writeConfig(t, dir, fmt.Sprintf(`
listen: 127.0.0.1:0
data_dir: ""
health_check_interval: 50ms
minimum_level_duration: 0s
blind_hold: 1s
signals: {cpu: {source: off}, memory: {source: cgroup}, cgroup_path: %q, custom: [{name: queue_depth, ttl: 1s}]}
levels:
  - {name: Major, priority_threshold: 50, memory_percent: 80, custom: {queue_depth: 1000}}
`, cg)))
	d.waitLevel(t, "Normal")
	code, out, errOut := runCLI(t, []string{"DEGRADED_ADDR=" + d.url}, "report", "--signal", "queue_depth=1234")
	if code != 0 {
		t.Fatalf("report --signal: %d %s %s", code, out, errOut)
	}
	pushed := time.Now()
	// At once: the push wakes the controller, which evaluates it as an
	// event, or at the first health check (50ms) when the push came before
	// it. The answer to the push does not wait for either, so the level is
	// read until it moves, for at most half the value's ttl (read once, a
	// loaded CI machine saw the start document still).
	doc := d.status(t)
	for doc.Level != "Major" && time.Since(pushed) < 500*time.Millisecond {
		time.Sleep(5 * time.Millisecond)
		doc = d.status(t)
	}
	if doc.Level != "Major" || doc.Reason != "queue_depth 1234 > 1000 (Major)" {
		t.Fatalf("%v after the push: %s %q, want Major at once", time.Since(pushed).Round(time.Millisecond), doc.Level, doc.Reason)
	}
	doc = d.waitLevel(t, "Normal")
	if held := time.Since(pushed); held < 1800*time.Millisecond { // ttl 1s + blind_hold 1s, less a tick: the blind clock runs from the last tick that saw it
		t.Fatalf("recovered %v after the last push, before ttl (1s) + blind_hold (1s)", held)
	}
	if !strings.Contains(doc.Reason, "queue_depth failed for") {
		t.Errorf("recovery reason %q should name the stale signal", doc.Reason)
	}
	d.stop(t)
}

// TestPromQLSignalEscalates: a query against a real Prometheus that
// scrapes a fake exporter escalates when its value crosses the threshold.
func TestPromQLSignalEscalates(t *testing.T) {
	var depth atomic.Int64
	depth.Store(10)
	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# TYPE queue_depth gauge\nqueue_depth %d\n", depth.Load())
	}))
	defer exporter.Close()
	prom, logs := testprom.Start(t, strings.TrimPrefix(exporter.URL, "http://"))
	dir := t.TempDir()
	d := start(t, "serve", "--config", writeConfig(t, dir, fmt.Sprintf(`
listen: 127.0.0.1:0
data_dir: ""
health_check_interval: 100ms
signals:
  cpu: {source: off}
  memory: {source: off}
  prometheus: {url: %q, timeout: 900ms, queries: [{name: queue_depth, query: "max(queue_depth)", interval: 1s}]}
levels:
  - {name: Major, priority_threshold: 50, custom: {queue_depth: 1000}}
`, prom)))
	depth.Store(1234)
	deadline := time.Now().Add(45 * time.Second)
	for {
		doc := d.status(t)
		if doc.Level == "Major" {
			if doc.Reason != "queue_depth 1234 > 1000 (Major)" {
				t.Fatalf("reason %q, want queue_depth 1234 > 1000 (Major)", doc.Reason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Major within 45s: %s %q, status %v\nprometheus:\n%s\ndaemon:\n%s", doc.Level, doc.Reason, doc.Signals.Status, logs, d.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.stop(t)
}
