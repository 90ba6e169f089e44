package micro

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/degraded/degraded/client"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/internal/daemon"
	"github.com/degraded/degraded/internal/daemon/daemontest"
)

// followingClient returns a client.Client that holds a real state pushed
// over SSE by the daemon's own controller and API (in-process, on
// loopback), pinned at level: the exact state a service would be in.
func followingClient(b *testing.B, level string, opts ...client.Option) *client.Client {
	b.Helper()
	r := daemontest.Start(b, `data_dir: ""`, daemon.Options{})
	ctrl := r.Controller()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	srv := r.Server
	c, err := client.New(srv.URL, append([]client.Option{client.WithReportInterval(time.Hour)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	wg.Go(func() { _ = c.Run(ctx) })
	b.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	if _, err := ctrl.SetOverride(controller.OverrideRequest{Level: level, Mode: controller.ModePin, TTL: time.Hour, Reason: "bench"}); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); c.State().Level != level || c.Stale(); {
		if time.Now().After(deadline) {
			b.Fatalf("client did not reach level %s (has %q)", level, c.State().Level)
		}
		time.Sleep(time.Millisecond)
	}
	return c
}
