package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConnectionFlood: 700 long-polls against a daemon limited to 512 file
// descriptors, with cgroup memory at 99%. Connections beyond the cap are
// closed at accept and streams beyond theirs get 503, so the samplers keep
// their files, the level stays at Emergency, and health checks and
// overrides still answer.
func TestConnectionFlood(t *testing.T) {
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("needs prlimit (util-linux)")
	}
	dir := t.TempDir()
	cg := filepath.Join(dir, "cgroup")
	os.MkdirAll(cg, 0o750)
	for name, body := range map[string]string{
		"memory.current": "1063004405\n", // 99% of max, no inactive file pages
		"memory.max":     "1073741824\n",
		"memory.stat":    "anon 1063004405\ninactive_file 0\n",
	} {
		os.WriteFile(filepath.Join(cg, name), []byte(body), 0o600)
	}
	cfg := writeConfig(t, dir, fmt.Sprintf(`
listen: 127.0.0.1:0
data_dir: %q
health_check_interval: 50ms
minimum_level_duration: 0s
signals: {cpu: {source: off}, memory: {source: cgroup}, cgroup_path: %q}
auth: {token: "admin-secret"}
`, filepath.Join(dir, "data"), cg))
	d := startCmd(t, exec.Command("prlimit", "--nofile=512:512", binary, "serve", "--config", cfg))
	seq := d.waitLevel(t, "Emergency").Sequence

	addr := strings.TrimPrefix(d.url, "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 700 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			continue // the backlog is full: also refused
		}
		fmt.Fprintf(c, "GET /v1/level?wait=60s&after=%d HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", seq)
		conns = append(conns, c)
	}
	time.Sleep(500 * time.Millisecond) // ten health checks under the flood

	if resp, _ := d.request(t, "GET", "/healthz", "", ""); resp.StatusCode != 200 {
		t.Fatalf("/healthz under the flood: %d", resp.StatusCode)
	}
	doc := d.status(t)
	if doc.Level != "Emergency" || doc.Signals.Status["memory"] != "available" {
		t.Fatalf("under the flood: %s, memory %s (%q); want Emergency with memory available", doc.Level, doc.Signals.Status["memory"], doc.Reason)
	}
	if resp, b := d.request(t, "PUT", "/v1/override", "admin-secret", `{"level":"Emergency","ttl":"1m","reason":"flood"}`); resp.StatusCode != 200 {
		t.Fatalf("override under the flood: %d %s", resp.StatusCode, b)
	}
	if h := d.history(t); strings.Contains(h, "recovered") {
		t.Fatalf("the level recovered under the flood:\n%s", h)
	}
	d.stop(t)
}
