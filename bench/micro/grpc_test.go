package micro

import (
	"context"
	"testing"

	"github.com/degraded/degraded/degradedgrpc"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/failsafegrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// What a gRPC service pays per unary call for admission: each library's
// unary server interceptor around a handler that does nothing, called
// directly (no network, no codec: those cost the same with or without an
// interceptor) with the incoming metadata a call carries, against the
// bare handler, in the same run. Every interceptor admits every call:
// degradedgrpc at a pinned Major with the call at priority 80 (it reads
// the priority from metadata, admits, puts the priority in the context
// and observes the outcome and latency); failsafegrpc with a bulkhead that
// is never full, and with failsafe-go's prioritized adaptive limiter
// behind its priority interceptor (the closest peer: priority from
// metadata, then admission).
func BenchmarkUnaryInterceptor(b *testing.B) {
	md := metadata.Pairs("x-priority", "80", "x-failsafe-priority", "3")
	ctx := metadata.NewIncomingContext(context.Background(), md)
	info := &grpc.UnaryServerInfo{FullMethod: "/bench.Service/Call"}
	handler := func(_ context.Context, req any) (any, error) { return req, nil }
	chain := func(outer, inner grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
		return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return outer(ctx, req, info, func(ctx context.Context, req any) (any, error) { return inner(ctx, req, info, h) })
		}
	}
	for _, bc := range []struct {
		name  string
		setup func(b *testing.B) grpc.UnaryServerInterceptor
	}{
		{"bare", nil},
		{"degradedgrpc", func(b *testing.B) grpc.UnaryServerInterceptor {
			return degradedgrpc.UnaryServerInterceptor(followingClient(b, "Major"), degradedgrpc.PriorityFromMetadata("x-priority", 50))
		}},
		{"failsafegrpc.bulkhead", func(*testing.B) grpc.UnaryServerInterceptor {
			return failsafegrpc.NewUnaryServerInterceptor[any](bulkhead.New[any](1 << 16))
		}},
		{"failsafegrpc.prioritized-limiter", func(*testing.B) grpc.UnaryServerInterceptor {
			limiter := adaptivelimiter.NewBuilder[any]().WithLimits(1<<16, 1<<16, 1<<16).BuildPrioritized(adaptivelimiter.NewPrioritizer())
			return chain(failsafegrpc.NewUnaryServerInterceptorWithLevel(true), failsafegrpc.NewUnaryServerInterceptorWithExecutor(failsafe.With[any](limiter)))
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			call := func() { _, _ = handler(ctx, 1) }
			if bc.setup != nil {
				icpt := bc.setup(b)
				call = func() { _, _ = icpt(ctx, 1, info, handler) }
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				call()
			}
		})
	}
}
