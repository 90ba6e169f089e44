package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/degraded/degraded/client"
)

// TestShadowModeEndToEnd: the real binary in shadow mode, pinned at Major,
// admits a low priority on GET /v1/admit with X-Degraded-Would-Shed: 1 and
// counts it; a Go client admits it too and its count reaches the same
// counter. A reload to enforce is one history entry, and then the same
// request is shed.
func TestShadowModeEndToEnd(t *testing.T) {
	dir := t.TempDir()
	shadowCfg := fmt.Sprintf(fastConfig, "", "100ms") + "mode: shadow\n"
	cfg := writeConfig(t, dir, shadowCfg)
	d := start(t, "serve", "--config", cfg)
	if resp, b := d.request(t, "PUT", "/v1/override", "admin-secret", `{"level":"Major","ttl":"1h","reason":"shadow e2e"}`); resp.StatusCode != 200 {
		t.Fatalf("pin Major: %d %s", resp.StatusCode, b)
	}
	var doc struct {
		Level  string `json:"level"`
		Shadow bool   `json:"shadow"`
	}
	if _, b := d.request(t, "GET", "/v1/level", "", ""); json.Unmarshal([]byte(b), &doc) != nil || doc.Level != "Major" || !doc.Shadow {
		t.Fatalf("GET /v1/level: %s, want Major with shadow true", b)
	}
	if code, out, _ := runCLI(t, []string{"DEGRADED_ADDR=" + d.url}, "status"); code != 0 || !strings.Contains(out, "SHADOW: nothing is shed") {
		t.Errorf("degraded status in shadow mode does not say so:\n%s", out)
	}

	for range 2 {
		resp, b := d.request(t, "GET", "/v1/admit?priority=10", "", "")
		if resp.StatusCode != 204 || resp.Header.Get("X-Degraded-Would-Shed") != "1" {
			t.Fatalf("admit in shadow mode: %d %s would-shed %q, want 204 with X-Degraded-Would-Shed: 1", resp.StatusCode, b, resp.Header.Get("X-Degraded-Would-Shed"))
		}
	}
	if resp, _ := d.request(t, "GET", "/v1/admit?priority=50", "", ""); resp.StatusCode != 204 || resp.Header.Get("X-Degraded-Would-Shed") != "" {
		t.Errorf("admit of an admitted priority: %d would-shed %q, want 204 without the header", resp.StatusCode, resp.Header.Get("X-Degraded-Would-Shed"))
	}
	if got := wouldShedMetric(t, d, "Major"); got != 2 {
		t.Errorf("degraded_shadow_would_shed_total{level=\"Major\"} = %v after two admits, want 2", got)
	}

	// A Go client in shadow mode admits and reports what it would shed.
	c, err := client.New(d.url, client.WithReportInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopClient := sync.OnceFunc(func() { cancel(); <-done })
	defer stopClient()
	for deadline := time.Now().Add(10 * time.Second); !c.State().Shadow; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the client never saw the shadow state: %+v", c.State())
		}
	}
	for i := range 5 {
		if !c.Allow(10) {
			t.Fatalf("client Allow(10) #%d refused in shadow mode", i)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); wouldShedMetric(t, d, "Major") != 7; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the client's would-shed counts never reached the daemon: %v, want 7", wouldShedMetric(t, d, "Major"))
		}
	}

	// Back to enforce by reload: one history entry, then shed.
	before := d.level(t, "").Sequence
	writeConfig(t, dir, strings.Replace(shadowCfg, "mode: shadow", "mode: enforce", 1))
	if resp, b := d.request(t, "POST", "/-/reload", "admin-secret", ""); resp.StatusCode != 200 {
		t.Fatalf("reload: %d %s", resp.StatusCode, b)
	}
	if after := d.level(t, "").Sequence; after != before+1 {
		t.Errorf("sequence %d after the switch, want %d (one step)", after, before+1)
	}
	var hist struct {
		Transitions []struct {
			Source, Reason string
			Sequence       uint64
		}
	}
	if _, b := d.request(t, "GET", "/v1/history?limit=5", "", ""); json.Unmarshal([]byte(b), &hist) != nil || len(hist.Transitions) == 0 {
		t.Fatalf("GET /v1/history: %s", b)
	}
	if h := hist.Transitions[0]; h.Source != "config" || h.Reason != "config reload: mode shadow -> enforce" || h.Sequence != before+1 {
		t.Errorf("newest history entry %+v, want source config, reason \"config reload: mode shadow -> enforce\" at %d", h, before+1)
	}
	if n := strings.Count(fmt.Sprint(hist.Transitions), "mode shadow -> enforce"); n != 1 {
		t.Errorf("%d history entries for the switch, want 1", n)
	}
	resp, b := d.request(t, "GET", "/v1/admit?priority=10", "", "")
	if resp.StatusCode != 503 || resp.Header.Get("X-Degraded-Would-Shed") != "" {
		t.Errorf("admit after the switch to enforce: %d %s, want 503 without X-Degraded-Would-Shed", resp.StatusCode, b)
	}
	for deadline := time.Now().Add(10 * time.Second); c.State().Shadow; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the client never saw the switch to enforce")
		}
	}
	if c.Allow(10) {
		t.Error("client Allow(10) at Major after the switch to enforce, want false")
	}
	stopClient()
	if code := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}

// wouldShedMetric reads degraded_shadow_would_shed_total{level} from /metrics.
func wouldShedMetric(t *testing.T, d *process, level string) float64 {
	t.Helper()
	_, body := d.request(t, "GET", "/metrics", "", "")
	m := regexp.MustCompile(`(?m)^degraded_shadow_would_shed_total\{level="` + regexp.QuoteMeta(level) + `"\} (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics has no degraded_shadow_would_shed_total{level=%q}", level)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
