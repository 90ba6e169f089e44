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
// status capture, counting the outcome, timing) against the bare handler
// it wraps, in the same run. "middleware" is a busy service's: the client
// has learnt its rate from a report and times a sample of the requests
// (at least 1,024 a second); "middleware, every request timed" is a
// service under about 2,048 requests a second, where every request is
// timed. "clock" is the floor of timing one request: the two monotonic
// clock reads the middleware makes.

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
		// Reports every 10ms, so that the client learns the benchmark's
		// rate before the timing starts.
		c := followingClient(b, "Major", client.WithReportInterval(10*time.Millisecond))
		h := client.Middleware(c, client.PriorityFromHeader("X-Priority", 50))(noContent)
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Priority", "80")
		for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
		serve(b, h)
	})
	b.Run("middleware, every request timed", func(b *testing.B) {
		c := followingClient(b, "Major") // never reports: every request stays timed
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
