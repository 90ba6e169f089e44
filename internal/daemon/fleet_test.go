package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/fleet"
	"github.com/degraded/degraded/fleet/fleettest"
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

// TestTLSSettingsWithPlaintextEndpointsWarn (finding 8, its first half):
// fleet.etcd.tls set while an endpoint is http:// connects in plaintext;
// the daemon says so at start, naming the endpoint, and is quiet about
// https:// ones.
func TestTLSSettingsWithPlaintextEndpointsWarn(t *testing.T) {
	dir := t.TempDir()
	ca, err := fleettest.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	files, err := ca.WriteFiles(dir, "", "degraded")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "degraded.yaml")
	writeConfig(t, path, "data_dir: \"\"\nsignals: {cpu: {source: off}, memory: {source: off}}\n"+
		"fleet: {enabled: true, name: shop, instance: web-1, etcd: {endpoints: [http://127.0.0.1:1, https://127.0.0.1:2], tls: {ca_file: "+files.CA+"}}}\n")
	var log lockedBuffer
	startFromFile(t, path, Options{Log: &log})
	if !strings.Contains(log.String(), "fleet.etcd.tls is set but this endpoint is http://") || !strings.Contains(log.String(), "endpoint=http://127.0.0.1:1") {
		t.Errorf("no warning that the TLS settings are unused for the http:// endpoint:\n%s", log.String())
	}
	if strings.Contains(log.String(), "endpoint=https://127.0.0.1:2") {
		t.Errorf("a warning about the https:// endpoint:\n%s", log.String())
	}
}

// TestUnavailableNamesWhyEtcdFailed: each kind of etcd failure the fleet
// names reaches the API as its own 503 sentence, and only those.
func TestUnavailableNamesWhyEtcdFailed(t *testing.T) {
	for _, c := range []struct {
		kind, want error
	}{
		{fleet.ErrAuth, api.ErrFleetAuth},
		{fleet.ErrTLS, api.ErrFleetTLS},
		{fleet.ErrTooLarge, api.ErrFleetTooLarge},
	} {
		err := unavailable(fmt.Errorf("%w: %w: read the audit entries: x", fleet.ErrUnavailable, c.kind))
		if !errors.Is(err, api.ErrFleetUnavailable) || !errors.Is(err, c.want) {
			t.Errorf("%v: %v, want ErrFleetUnavailable and %v", c.kind, err, c.want)
		}
	}
	if err := unavailable(fmt.Errorf("%w: x", fleet.ErrUnavailable)); !errors.Is(err, api.ErrFleetUnavailable) ||
		errors.Is(err, api.ErrFleetAuth) || errors.Is(err, api.ErrFleetTLS) || errors.Is(err, api.ErrFleetTooLarge) {
		t.Errorf("plain unavailable: %v, want ErrFleetUnavailable alone", err)
	}
}
