package fleet_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/degraded/degraded/fleet"
	"github.com/degraded/degraded/fleet/fleettest"
)

// member starts a fleet member on endpoint (tick 100ms, instance_ttl 2s,
// dial_timeout 2s, as the daemons of these tests have it) and stops it
// when the test ends; edit, when given, changes the options first. (At
// 1s, a write to the embedded etcd, which runs under the race detector in
// the test process, timed out on a slow machine: "write the fleet
// override: context deadline exceeded", before anything was cut.)
func member(t *testing.T, endpoint, instance string, edit ...func(*fleet.Options)) *fleet.Fleet {
	t.Helper()
	f, _ := logged(t, endpoint, instance, edit...)
	return f
}

// logged is member, with its log.
func logged(t *testing.T, endpoint, instance string, edit ...func(*fleet.Options)) (*fleet.Fleet, *logBuffer) {
	t.Helper()
	f, log, stop := startMember(t, endpoint, instance, edit...)
	t.Cleanup(func() {
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: Run returned %v, want context.Canceled", instance, err)
		}
	})
	return f, log
}

// startMember starts a member and returns it, its log and a stop that
// returns Run's result.
func startMember(t *testing.T, endpoint, instance string, edit ...func(*fleet.Options)) (*fleet.Fleet, *logBuffer, func() error) {
	t.Helper()
	log := &logBuffer{}
	o := fleet.Options{
		Endpoints:   []string{endpoint},
		DialTimeout: 2 * time.Second,
		Name:        "shop",
		Instance:    instance,
		InstanceTTL: 2 * time.Second,
		Tick:        testTick,
		Logger:      slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, e := range edit {
		e(&o)
	}
	f, err := fleet.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	var once sync.Once
	var runErr error
	return f, log, func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
}

// reporting hands f a report every tick until the test ends, so that it
// stays in the aggregate.
func reporting(t *testing.T, f *fleet.Fleet, r fleet.Report) {
	t.Helper()
	everyTick(t, func(context.Context) {
		r.At = time.Now()
		f.Report(r)
	})
}

func connected(t *testing.T, fs ...*fleet.Fleet) {
	t.Helper()
	for _, f := range fs {
		eventually(t, 10*time.Second, f.Instance()+" connects", f.Connected)
	}
}

// withDial gives a member the Cutter's dialer.
func withDial(c *fleettest.Cutter) func(*fleet.Options) {
	return func(o *fleet.Options) { o.Dial = c.Dial }
}
