package daemon

import (
	"bytes"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is the daemon's log, read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestFleetSettingsAreRestartOnly: a reload that changes fleet.* keeps
// the fleet in force and warns that the change needs a restart; the state
// document carries the fleet object, and fleet mode off leaves it out.
func TestFleetSettingsAreRestartOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "degraded.yaml")
	body := "data_dir: \"\"\nsignals: {cpu: {source: off}, memory: {source: off}}\n" +
		"fleet: {enabled: true, name: shop, instance: web-1, error_rate_scope: fleet, etcd: {endpoints: [http://127.0.0.1:1]}}\n"
	writeConfig(t, path, body)
	var log lockedBuffer
	d := startFromFile(t, path, Options{Log: &log})
	runDaemon(t, d)
	if f := d.Controller().State().Fleet; f == nil || f.Name != "shop" || f.Instance != "web-1" || f.Connected {
		t.Fatalf("fleet object %+v, want shop/web-1, not connected", f)
	}
	if d.opts.FleetErrors == nil {
		t.Error("error_rate_scope fleet did not give the controller the fleet's window")
	}
	writeConfig(t, path, strings.Replace(body, "name: shop", "name: cart", 1))
	if err := d.Reload("alice"); err != nil {
		t.Fatal(err)
	}
	if f := d.Controller().State().Fleet; f == nil || f.Name != "shop" {
		t.Errorf("after a reload renaming the fleet: %+v, want shop kept until a restart", f)
	}
	if !strings.Contains(log.String(), "takes effect only after a restart") || !strings.Contains(log.String(), "key=fleet") {
		t.Errorf("the reload did not warn that fleet.* needs a restart:\n%s", log.String())
	}

	off := filepath.Join(dir, "off.yaml")
	writeConfig(t, off, "data_dir: \"\"\nsignals: {cpu: {source: off}, memory: {source: off}}\n")
	if f := startFromFile(t, off, Options{}).Controller().State().Fleet; f != nil {
		t.Errorf("fleet mode off: fleet object %+v, want none", f)
	}
}
