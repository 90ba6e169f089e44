package daemontest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/internal/daemon"
)

// Rig is a running daemon and the server in front of it.
type Rig struct {
	// Daemon is the daemon; its Controller and Window are there to drive.
	*daemon.Daemon
	// Server serves the daemon's API on a loopback address.
	Server *Server
	// URL is Server's base URL.
	URL string
}

// Config loads yaml over the embedded defaults, as `degraded serve
// --config` would, failing the test on any problem.
func Config(t testing.TB, yaml string) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "degraded.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(config.LoadOptions{Path: path})
	if err != nil {
		t.Fatalf("daemontest config: %v", err)
	}
	return cfg
}

// New builds a daemon from yaml and o without starting it: for rigs that
// serve its Handler themselves (in-memory networks, fake time).
func New(t testing.TB, yaml string, o daemon.Options) *daemon.Daemon {
	t.Helper()
	d, err := daemon.New(Config(t, yaml), o)
	if err != nil {
		t.Fatalf("daemontest: %v", err)
	}
	t.Cleanup(d.Close)
	return d
}

// Start builds a daemon from yaml and o, serves its API on a loopback
// server and runs it until the test ends. Run's result is checked then: a
// daemon that could not save its state fails the test.
func Start(t testing.TB, yaml string, o daemon.Options) *Rig {
	t.Helper()
	d := New(t, yaml, o)
	srv := NewServer(t, d.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel() // ends the event streams
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
	})
	return &Rig{Daemon: d, Server: srv, URL: srv.URL}
}
