package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// peakRSS is a process's peak resident set (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no VmHWM in /proc/%d/status", pid)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

// TestHugePrometheusAnswer: a Prometheus that answers a valid 400 MB
// vector fails the query, naming the 1 MiB cap, and the daemon's peak RSS
// stays where it was (before the cap it went from 22 MB to 1.74 GB, and
// stayed there).
func TestHugePrometheusAnswer(t *testing.T) {
	t.Parallel()
	const size = 400 << 20
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		sample := `{"metric":{"__name__":"queue_depth","instance":"i"},"value":[1700000000,"7"]},`
		chunk := strings.Repeat(sample, 64<<10/len(sample))
		if _, err := io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[`); err != nil {
			return
		}
		for n := 0; n < size; n += len(chunk) {
			if _, err := io.WriteString(w, chunk); err != nil {
				return // the daemon stopped reading
			}
		}
		_, _ = io.WriteString(w, sample[:len(sample)-1]+`]}}`)
	}))
	defer prom.Close()
	d := start(t, "serve", "--config", writeConfig(t, t.TempDir(), fmt.Sprintf(`
listen: 127.0.0.1:0
data_dir: ""
health_check_interval: 100ms
signals:
  cpu: {source: off}
  memory: {source: off}
  prometheus: {url: %q, timeout: 20s, queries: [{name: queue_depth, query: "max(queue_depth)", interval: 30s}]}
levels:
  - {name: Major, priority_threshold: 50, custom: {queue_depth: 1000}}
`, prom.URL)))
	waitLog(t, d, "1 MiB cap")
	until(t, 10*time.Second, "queue_depth failed", func() bool {
		return d.status(t).Signals.Status["queue_depth"] == "failed"
	})
	rss := peakRSS(t, d.cmd.Process.Pid)
	t.Logf("peak RSS %d MiB after a %d MiB answer", rss>>20, size>>20)
	if rss > 200<<20 {
		t.Errorf("peak RSS %d MiB after a 400 MB answer, want it flat (the race detector's build idles near 60 MiB)", rss>>20)
	}
	d.stop(t)
}

// TestStalePushedSignalLogsOnce: a pushed signal past its ttl is logged
// once when it goes stale, not at every health check (its error used to
// carry its age, so every tick's message was new).
func TestStalePushedSignalLogsOnce(t *testing.T) {
	t.Parallel()
	d := start(t, "serve", "--config", writeConfig(t, t.TempDir(), `
listen: 127.0.0.1:0
data_dir: ""
health_check_interval: 50ms
signals: {cpu: {source: off}, memory: {source: off}, custom: [{name: queue_depth, ttl: 1s}]}
levels:
  - {name: Major, priority_threshold: 50, custom: {queue_depth: 1000}}
`))
	if resp, b := d.request(t, "PUT", "/v1/signals/queue_depth", "", `{"value": 5}`); resp.StatusCode != 204 {
		t.Fatalf("PUT /v1/signals/queue_depth: %d %s", resp.StatusCode, b)
	}
	until(t, 10*time.Second, "queue_depth stale", func() bool { return d.status(t).Signals.Status["queue_depth"] == "failed" })
	checks := func() float64 { return d.metric(t, "degraded_health_check_duration_seconds_count") }
	stale := checks()
	until(t, 30*time.Second, "40 health checks with queue_depth stale", func() bool { return checks() >= stale+40 })
	if n := strings.Count(d.logs.String(), `msg="sample failed" signal=queue_depth`); n != 1 {
		t.Errorf("the stale signal was logged %d times over 40 health checks, want once:\n%s", n, d.logs)
	}
	d.stop(t)
}
