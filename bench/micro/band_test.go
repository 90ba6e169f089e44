package micro

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/degraded/degraded/client"
)

// Allow with partial admission, against the peers' admission checks
// (admission_test.go's gates), in the same run: at Major (threshold 50)
// admitting 40% of 30-49, over eight priorities of which two are in the
// band, so that a quarter of the calls draw. "Allow, band only" draws on
// every call; "Admit" is Allow plus counting the decision for the
// admission report, what Allow would cost if it counted (it does not:
// docs/client.md).
func BenchmarkAllowBand(b *testing.B) {
	mix := [8]int{0, 10, 20, 35, 45, 50, 70, 90}
	cases := []gate{
		// The harness alone (the loop and the count): subtract it from the others.
		{"noop", func(*testing.B) checks {
			return func(from, n int) (k int) {
				for range n {
					k++
				}
				return k
			}
		}},
		{"degraded.Allow, band", func(b *testing.B) checks {
			c := partialClient(b)
			return func(from, n int) (k int) {
				for i := from; i < from+n; i++ {
					if c.Allow(mix[i&7]) {
						k++
					}
				}
				return k
			}
		}},
		{"degraded.Allow, band only", func(b *testing.B) checks {
			c := partialClient(b)
			return func(from, n int) (k int) {
				for range n {
					if c.Allow(40) {
						k++
					}
				}
				return k
			}
		}},
		{"degraded.Admit, band", func(b *testing.B) checks {
			c := partialClient(b)
			return func(from, n int) (k int) {
				for i := from; i < from+n; i++ {
					if c.Admit(mix[i&7]).Admitted() {
						k++
					}
				}
				return k
			}
		}},
	}
	for _, g := range gates() {
		if g.name != "degraded.Allow+Record" {
			cases = append(cases, g)
		}
	}
	for _, g := range cases {
		b.Run(g.name, func(b *testing.B) {
			runSerial(b, g.setup(b))
		})
	}
}

// partialClient returns a client.Client holding a state with partial
// admission, served by a minimal stand-in for the daemon's GET /v1/level
// (the daemon publishes "partial" only from its control law, which a
// benchmark cannot pin).
func partialClient(b *testing.B) *client.Client {
	b.Helper()
	recovery := time.Now().Add(time.Minute)
	st := client.State{Level: "Major", Index: 3, PriorityThreshold: 50, Source: client.SourceAuto, Since: time.Now(),
		EarliestRecoveryAt: &recovery, Sequence: 2, Partial: &client.Partial{From: 30, Fraction: 0.4}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/outcomes" {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if r.URL.Path != "/v1/level" {
			http.NotFound(w, r)
			return
		}
		if r.URL.Query().Has("wait") {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(30 * time.Second):
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	}))
	c, err := client.New(srv.URL, client.WithReportInterval(time.Hour), client.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) })
	b.Cleanup(func() {
		cancel()
		wg.Wait()
		srv.Close()
	})
	for deadline := time.Now().Add(10 * time.Second); c.State().Partial == nil; {
		if time.Now().After(deadline) {
			b.Fatal("the client did not get the partial state")
		}
		time.Sleep(time.Millisecond)
	}
	return c
}
