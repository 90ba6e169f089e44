// Package testprom runs Debian's real Prometheus inside a test, scraping
// one target every second, for the tests of Prometheus-query signals (the
// signals package and the daemon's end-to-end tests). It is for tests of
// this repository; it is not an API.
package testprom

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Path finds the prometheus binary, or skips the test with how to get it.
func Path(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/bin/prometheus"); err == nil {
		return "/usr/bin/prometheus"
	}
	t.Skip("needs prometheus (Debian: apt-get install prometheus; .ci/run installs it)")
	return ""
}

// Log collects a process's output for failure messages; it is safe for
// concurrent use.
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Log) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written.
func (b *Log) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Start runs a real Prometheus on a free 127.0.0.1 port scraping target
// (host:port) every second, with its data in a temporary directory, and
// returns its base URL and its log. It is killed when the test ends.
func Start(t testing.TB, target string) (string, *Log) {
	t.Helper()
	bin := Path(t)
	dir := t.TempDir()
	conf := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: fake
    static_configs:
      - targets: [%q]
`, target)
	confPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	// Prometheus cannot inherit a listening socket, so take a free port
	// and hand its number over.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	logs := &Log{}
	cmd := exec.Command(bin,
		"--config.file="+confPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	return "http://" + addr, logs
}
