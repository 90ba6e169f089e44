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

// checks is a gate's admission check run on the indexes [from, from+n),
// called in the loop as a service's handler calls it (directly, so that
// the compiler may inline it, not through a function value a call at a
// time), and the number admitted. Through a function value, most of what
// the serial benchmark timed of degraded.Allow was the harness's own call:
// 3.6-3.8 ns, of which the call was about 2 (BenchmarkAllowBand's noop,
// which then made the same call; it now times the bare loop, 0.3-0.4 ns).
type checks func(from, n int) int

type gate struct {
	name  string
	setup func(b *testing.B) checks
}

func gates() []gate {
	return []gate{
		{"degraded.Allow", func(b *testing.B) checks {
			c := followingClient(b, "Major")
			return func(from, n int) (k int) {
				for i := from; i < from+n; i++ {
					if c.Allow(i & 127) {
						k++
					}
				}
				return k
			}
		}},
		{"degraded.Allow+Record", func(b *testing.B) checks {
			c := followingClient(b, "Major")
			return func(from, n int) (k int) {
				for i := from; i < from+n; i++ {
					if c.Allow(i & 127) {
						c.Record(true)
						k++
					}
				}
				return k
			}
		}},
		{"aegis.bbr", func(b *testing.B) checks {
			// CPU threshold above 100% so BBR never sheds under the
			// benchmark's own CPU load: every call takes the admit path.
			l := bbr.NewLimiter(bbr.WithCPUThreshold(1001))
			return func(from, n int) (k int) {
				for range n {
					done, err := l.Allow()
					if err == nil {
						done(ratelimit.DoneInfo{})
						k++
					}
				}
				return k
			}
		}},
		{"failsafe.bulkhead", func(b *testing.B) checks {
			bh := bulkhead.New[any](1 << 16)
			return func(from, n int) (k int) {
				for range n {
					if bh.TryAcquirePermit() {
						bh.ReleasePermit()
						k++
					}
				}
				return k
			}
		}},
		{"gobreaker.twostep", func(b *testing.B) checks {
			cb := gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{Name: "bench", Interval: time.Minute})
			return func(from, n int) (k int) {
				for range n {
					done, err := cb.Allow()
					if err == nil {
						done(nil)
						k++
					}
				}
				return k
			}
		}},
	}
}

// runSerial times f's checks in one loop of b.N.
func runSerial(b *testing.B, f checks) {
	b.ReportAllocs()
	b.ResetTimer()
	sink += f(0, b.N)
}

func BenchmarkAdmission(b *testing.B) {
	for _, g := range gates() {
		b.Run("serial/"+g.name, func(b *testing.B) {
			runSerial(b, g.setup(b))
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
					n += f(i, 1)
				}
				_ = n
			})
		})
	}
}
