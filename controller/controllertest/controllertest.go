// Package controllertest runs a controller for the tests of the packages
// that serve one (api, cmd/degraded, replay): Run starts its goroutine and
// ends it with the test. It is for tests only.
package controllertest

import (
	"context"
	"errors"
	"testing"

	"github.com/degraded/degraded/controller"
)

// Run runs c (controller.Controller.Run) until the test ends, failing the
// test if it returns anything but the end of its context, and waits for
// its first health check. It works inside a testing/synctest bubble too.
func Run(t testing.TB, c *controller.Controller) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("controller: Run returned %v, want context.Canceled", err)
		}
	})
	for {
		sampled := c.Sampled()
		if c.Ready() {
			return
		}
		select {
		case <-sampled:
		case err := <-done:
			done <- err
			t.Fatalf("controller: Run returned %v before its first health check", err)
		}
	}
}

// New builds a controller from o and runs it (see Run).
func New(t testing.TB, o controller.Options) *controller.Controller {
	t.Helper()
	c, err := controller.New(o)
	if err != nil {
		t.Fatal(err)
	}
	Run(t, c)
	return c
}
