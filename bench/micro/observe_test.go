package micro

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/degraded/degraded/client"
)

// What a service pays per request for the latency signal: client.Observe
// (an outcome and its latency bucket), and the whole middleware (admission,
// timing, status capture, Observe) against the bare handler it wraps, in
// the same run. "clock" is the floor of timing a request: the two
// monotonic clock reads the middleware makes.

func BenchmarkObserve(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		c := followingClient(b, "Normal")
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			c.Observe(i&63 != 0, time.Duration(i&1023)*time.Millisecond)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		c := followingClient(b, "Normal")
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				c.Observe(i&63 != 0, time.Duration(i&1023)*time.Millisecond)
			}
		})
	})
}

// noContent is the bare handler: it answers 204 and does nothing else.
var noContent = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })

func serve(b *testing.B, h http.Handler) {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Priority", "80") // admitted at Major
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, r)
	}
}

func BenchmarkMiddleware(b *testing.B) {
	b.Run("bare", func(b *testing.B) { serve(b, noContent) })
	b.Run("middleware", func(b *testing.B) {
		c := followingClient(b, "Major")
		serve(b, client.Middleware(c, client.PriorityFromHeader("X-Priority", 50))(noContent))
	})
	b.Run("clock", func(b *testing.B) {
		epoch := time.Now()
		var d time.Duration
		b.ReportAllocs()
		for b.Loop() {
			start := time.Since(epoch)
			d += time.Since(epoch) - start
		}
		sink += int(d)
	})
}
