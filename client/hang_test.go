package client

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// hangingTransport is a daemon that accepts every request and never answers.
type hangingTransport struct{ calls atomic.Int64 }

func (h *hangingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	h.calls.Add(1)
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// TestHungDaemonIsCutOff: a daemon that accepts connections but never
// answers must not hold the client: each request is cut off by the
// client's own timeouts and retried, the state goes stale, and Run still
// ends promptly when asked.
func TestHungDaemonIsCutOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := &hangingTransport{}
		c, err := New("http://127.0.0.1:8470", WithHTTPClient(&http.Client{Transport: hang}), WithStaleAfter(time.Minute), WithFailMode(FailClosed))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if n := hang.calls.Load(); n < 5 {
			t.Errorf("%d requests in 5 minutes, want each cut off and retried", n)
		} else {
			t.Logf("%d requests cut off and retried in 5 minutes", n)
		}
		if !c.Stale() || c.Allow(10) || !c.Allow(PriorityCritical) {
			t.Errorf("stale %v Allow(10) %v, want stale and FailClosed applied", c.Stale(), c.Allow(10))
		}
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return within 5s of cancel")
		}
	})
}
