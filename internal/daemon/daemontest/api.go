package daemontest

import (
	"context"
	"errors"
	"testing"

	"github.com/degraded/degraded/api"
)

// RunAPI runs s (api.Server.Run) until the test ends, then ends its event
// streams and long-polls and waits for its goroutines. Call it after the
// server that serves s.Handler is set up, so that the streams end before
// that server closes.
func RunAPI(t testing.TB, s *api.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("api: Run returned %v, want context.Canceled", err)
		}
	})
}
