package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/internal/timeline"
	"github.com/degraded/degraded/levels"
)

// TestTimelineRecordedAndServed: a daemon with a data_dir records its
// health checks into data_dir/timeline, serves them on GET /v1/timeline,
// and a reload that turns recording off makes the route 404.
func TestTimelineRecordedAndServed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "degraded.yaml")
	body := "data_dir: " + filepath.Join(dir, "data") + "\nhealth_check_interval: 10ms\nsignals: {cpu: {source: off}, memory: {source: off}}\nauth: {token: adm}\n"
	writeConfig(t, path, body)
	d := startFromFile(t, path, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	get := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/v1/timeline", nil)
		req.Host = "localhost"
		req.Header.Set("Authorization", "Bearer adm")
		w := httptest.NewRecorder()
		d.Handler().ServeHTTP(w, req)
		return w
	}
	var lines []string
	for deadline := time.Now().Add(5 * time.Second); len(lines) < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 3 lines served within 5s: %q", lines)
		}
		w := get()
		if w.Code != http.StatusOK {
			t.Fatalf("GET /v1/timeline = %d %s", w.Code, w.Body.String())
		}
		lines = strings.Split(strings.TrimSpace(w.Body.String()), "\n")
	}
	var first levels.Line
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.Trigger != levels.TriggerStart || first.Published != "Normal" {
		t.Fatalf("first line %q (%v), want the start check at Normal", lines[0], err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "timeline", timeline.FileName(first.At))); err != nil {
		t.Errorf("the day's file: %v", err)
	}

	writeConfig(t, path, body+"record: {enabled: false}\n")
	if err := d.Reload("alice"); err != nil {
		t.Fatal(err)
	}
	if w := get(); w.Code != http.StatusNotFound {
		t.Errorf("after a reload with record.enabled false: %d, want 404", w.Code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestTimelineDropReasonsExported: the reasons the recorder drops lines
// for are the label values /metrics exports at 0.
func TestTimelineDropReasonsExported(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Signals.CPU.Source, cfg.Signals.Memory.Source = "off", "off"
	d, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Host = "localhost"
	w := httptest.NewRecorder()
	d.Handler().ServeHTTP(w, req)
	for _, reason := range timeline.DropReasons {
		if want := `degraded_timeline_dropped_total{reason="` + reason + `"} 0`; !strings.Contains(w.Body.String(), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
