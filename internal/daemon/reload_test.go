package daemon

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/levels"
)

// TestReloadRebuildsTheWindow: a reload that changes error_rate_window
// applies at once (DESIGN.md "What a reload applies"): a new, empty window
// takes the reports, the error rate warms up again over the new span, and
// nothing says the key needs a restart. An unchanged window is kept.
func TestReloadRebuildsTheWindow(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "degraded.yaml")
	body := "data_dir: \"\"\nerror_rate_window: %s\nerror_rate_window_buckets: %d\nmin_throughput: 0\nsignals: {cpu: {source: off}, memory: {source: off}}\n"
	writeConfig(t, path, strings.NewReplacer("%s", "1m", "%d", "6").Replace(body))
	var log lockedBuffer
	d := startFromFile(t, path, Options{Log: &log})
	runDaemon(t, d)
	first := d.Window()
	first.Record(time.Now(), 90, 10)
	if err := d.Reload("alice"); err != nil {
		t.Fatal(err)
	}
	if d.Window() != first {
		t.Fatal("a reload with the same window replaced it: its counts and warm-up would be lost")
	}
	writeConfig(t, path, strings.NewReplacer("%s", "30s", "%d", "3").Replace(body))
	if err := d.Reload("alice"); err != nil {
		t.Fatal(err)
	}
	w := d.Window()
	if w == first {
		t.Fatal("a reload with another error_rate_window kept the old window")
	}
	if a, f := w.Totals(time.Now()); a != 0 || f != 0 {
		t.Errorf("the new window holds %d/%d, want empty", a, f)
	}
	d.Controller().Check(context.Background())
	if st := d.Controller().State().Signals.State(levels.ErrorRate); st != levels.Warming {
		t.Errorf("error_rate after the window was rebuilt: %s, want warming", st)
	}
	if strings.Contains(log.String(), "key=error_rate_window") {
		t.Errorf("the reload said error_rate_window needs a restart:\n%s", log.String())
	}
}

// TestReloadAppliesTheLog: log.level and log.format apply at once, to the
// daemon's logger and every logger made from it.
func TestReloadAppliesTheLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "degraded.yaml")
	body := "data_dir: \"\"\nsignals: {cpu: {source: off}, memory: {source: off}}\nlog: {level: %s, format: %f}\n"
	writeConfig(t, path, strings.NewReplacer("%s", "info", "%f", "text").Replace(body))
	var log lockedBuffer
	d := startFromFile(t, path, Options{Log: &log})
	runDaemon(t, d)
	derived := d.Logger().With("part", "test")
	derived.Debug("before the reload")
	if strings.Contains(log.String(), "before the reload") {
		t.Fatal("a debug line was written at level info")
	}
	writeConfig(t, path, strings.NewReplacer("%s", "debug", "%f", "json").Replace(body))
	if err := d.Reload("alice"); err != nil {
		t.Fatal(err)
	}
	derived.Debug("after the reload")
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	var last map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last["msg"] != "after the reload" || last["part"] != "test" {
		t.Fatalf("the last log line %q (%v): want the debug line in JSON with its attribute", lines[len(lines)-1], err)
	}
	if strings.Contains(log.String(), "key=log") {
		t.Errorf("the reload said log needs a restart:\n%s", log.String())
	}
}

// TestStartFromPrevRepublishesAboveTheCeiling: a start that falls back to
// state.json.prev (state.json damaged) may resume from older than what
// readers saw, so it republishes above the reserved ceiling with a restart
// entry, even when the copy it read was a clean shutdown's. The daemon's
// own wrapper of the state file used to hide the fall back.
func TestStartFromPrevRepublishesAboveTheCeiling(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "degraded.yaml")
	writeConfig(t, path, "data_dir: "+filepath.Join(dir, "data")+"\nsignals: {cpu: {source: off}, memory: {source: off}}\n")
	start := func() *Daemon {
		d := startFromFile(t, path, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		for !d.Controller().Ready() {
			<-d.Controller().Sampled()
		}
		if _, err := d.Controller().SetOverride(controller.OverrideRequest{Level: "Minor", Mode: controller.ModePin, TTL: time.Hour, Reason: "INC-1"}); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		d.Close()
		return d
	}
	first := start()
	seen := first.Controller().State().Sequence // the clean shutdown's state.json.prev holds less
	if err := os.WriteFile(filepath.Join(dir, "data", "state.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := loaderOf(path)(false)
	if err != nil {
		t.Fatal(err)
	}
	again, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	st := again.Controller().State()
	h := again.Controller().History(1)
	if st.Sequence <= seen+controller.SequenceBlock || len(h) == 0 || h[0].Source != controller.SourceRestart {
		t.Fatalf("after falling back to state.json.prev: sequence %d (readers saw %d), newest entry %+v; want above the ceiling with a restart entry",
			st.Sequence, seen, h)
	}
}

// TestReloadAppliesSSE: sse.* applies at once (DESIGN.md "What a reload
// applies"): a stream refused at sse.max_subscribers 1 is served once a
// reload raises it, and nothing says sse needs a restart.
func TestReloadAppliesSSE(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "degraded.yaml")
	body := "data_dir: \"\"\nsignals: {cpu: {source: off}, memory: {source: off}}\nsse: {heartbeat: 1h, max_subscribers: %d}\n"
	writeConfig(t, path, strings.Replace(body, "%d", "1", 1))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var log lockedBuffer
	d := startFromFile(t, path, Options{Listener: ln, Log: &log})
	runDaemon(t, d)
	if _, br, status := openStream(t, d.Addr().String()); status != "HTTP/1.1 200 OK" {
		t.Fatalf("the first stream: %q, want 200", status)
	} else {
		readUntil(t, br, "event: level")
	}
	if _, _, status := openStream(t, d.Addr().String()); status != "HTTP/1.1 503 Service Unavailable" {
		t.Fatalf("a second stream at max_subscribers 1: %q, want 503", status)
	}
	writeConfig(t, path, strings.Replace(body, "%d", "2", 1))
	if err := d.Reload("alice"); err != nil {
		t.Fatal(err)
	}
	if _, br, status := openStream(t, d.Addr().String()); status != "HTTP/1.1 200 OK" {
		t.Errorf("a second stream after the reload to max_subscribers 2: %q, want 200", status)
	} else {
		readUntil(t, br, "event: level")
	}
	if strings.Contains(log.String(), "key=sse") {
		t.Errorf("the reload said sse needs a restart:\n%s", log.String())
	}
}
