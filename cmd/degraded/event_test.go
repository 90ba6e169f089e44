package main

import (
	"context"
	"testing"
	"time"
)

// TestErrorBurstShedAtOnce: with an hour between health checks, a report
// that crosses a threshold reaches SSE subscribers at once: an error burst
// is shed within milliseconds, not at the next tick.
func TestErrorBurstShedAtOnce(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `
listen: 127.0.0.1:0
data_dir: ""
health_check_interval: 1h
error_rate_window: 10s
min_throughput: 10
signals: {cpu: {source: off}, memory: {source: off}}
`)
	d := start(t, "serve", "--config", cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := d.events(t, ctx)
	waitFor(t, events, "Normal:")
	sent := time.Now()
	if resp, b := d.request(t, "POST", "/v1/outcomes", "", `{"success":85,"failure":15}`); resp.StatusCode != 202 {
		t.Fatalf("outcomes: %d %s", resp.StatusCode, b)
	}
	waitFor(t, events, "Major:")
	t.Logf("Major reached subscribers %v after the report (the next tick is an hour away)", time.Since(sent))
	d.stop(t)
}
