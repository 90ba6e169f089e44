package micro

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/degraded/degraded/client"
)

// The middleware with and without its options, against the bare handler,
// in the same run: priority propagation (WithPropagation: the admitted
// request's priority in its context, for client.Transport and
// degradedgrpc's client interceptors) and a proxy's request start
// (WithRequestStart: the timed requests' latency from X-Request-Start).
// Every middleware is a busy service's: the client has learnt its rate
// and times a sample of the requests, as BenchmarkMiddleware's
// "middleware".
func BenchmarkMiddlewarePropagation(b *testing.B) {
	busy := func(b *testing.B, opts ...client.MiddlewareOption) {
		c := followingClient(b, "Major", client.WithReportInterval(10*time.Millisecond))
		h := client.Middleware(c, client.PriorityFromHeader("X-Priority", 50), opts...)(noContent)
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Priority", "80")
		r.Header.Set("X-Request-Start", fmt.Sprintf("t=%.3f", float64(time.Now().UnixMilli())/1e3))
		for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
		serve(b, h)
	}
	b.Run("bare", func(b *testing.B) { serve(b, noContent) })
	b.Run("middleware", func(b *testing.B) { busy(b) })
	b.Run("middleware+propagation", func(b *testing.B) { busy(b, client.WithPropagation()) })
	b.Run("middleware+request-start", func(b *testing.B) { busy(b, client.WithRequestStart("X-Request-Start")) })
}
