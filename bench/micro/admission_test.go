package micro

import (
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/go-kratos/aegis/ratelimit"
	"github.com/go-kratos/aegis/ratelimit/bbr"
	"github.com/sony/gobreaker/v2"
)

// The admission check a request pays before it is served, with the
// bookkeeping after it that each library needs: client.Allow needs none
// (the daemon decides the level out of band); Allow+Record adds the
// outcome count a service reports; the peers' "done" records the outcome
// or releases the permit, as their docs require.
//
// Each peer is set up so that it admits every request and never rejects:
// a healthy service's steady state, the path every request pays.

// sink keeps results alive so the compiler cannot drop the calls.
var sink int

type gate struct {
	name string
	// setup returns the per-request function; ok reports admission.
	setup func(b *testing.B) func(i int) (ok bool)
}

func gates() []gate {
	return []gate{
		{"degraded.Allow", func(b *testing.B) func(int) bool {
			c := followingClient(b, "Major")
			return func(i int) bool { return c.Allow(i & 127) }
		}},
		{"degraded.Allow+Record", func(b *testing.B) func(int) bool {
			c := followingClient(b, "Major")
			return func(i int) bool {
				ok := c.Allow(i & 127)
				if ok {
					c.Record(true)
				}
				return ok
			}
		}},
		{"aegis.bbr", func(b *testing.B) func(int) bool {
			// CPU threshold above 100% so BBR never sheds under the
			// benchmark's own CPU load: every call takes the admit path.
			l := bbr.NewLimiter(bbr.WithCPUThreshold(1001))
			return func(int) bool {
				done, err := l.Allow()
				if err != nil {
					return false
				}
				done(ratelimit.DoneInfo{})
				return true
			}
		}},
		{"failsafe.bulkhead", func(b *testing.B) func(int) bool {
			bh := bulkhead.New[any](1 << 16)
			return func(int) bool {
				if !bh.TryAcquirePermit() {
					return false
				}
				bh.ReleasePermit()
				return true
			}
		}},
		{"gobreaker.twostep", func(b *testing.B) func(int) bool {
			cb := gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{Name: "bench", Interval: time.Minute})
			return func(int) bool {
				done, err := cb.Allow()
				if err != nil {
					return false
				}
				done(nil)
				return true
			}
		}},
	}
}

func BenchmarkAdmission(b *testing.B) {
	for _, g := range gates() {
		b.Run("serial/"+g.name, func(b *testing.B) {
			f := g.setup(b)
			b.ReportAllocs()
			n := 0
			for i := 0; b.Loop(); i++ {
				if f(i) {
					n++
				}
			}
			sink += n
		})
	}
	for _, g := range gates() {
		b.Run("parallel/"+g.name, func(b *testing.B) {
			f := g.setup(b)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				n := 0
				for i := 0; pb.Next(); i++ {
					if f(i) {
						n++
					}
				}
				_ = n
			})
		})
	}
}
