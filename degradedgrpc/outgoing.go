package degradedgrpc

import (
	"context"
	"strconv"

	"github.com/degraded/degraded/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// UnaryClientInterceptor sets the x-priority metadata of outgoing unary
// calls from the context's priority (client.PriorityFrom), which the
// server interceptors and client.Middleware with WithPropagation put
// there. A call whose outgoing metadata already has x-priority keeps it:
// the caller's choice wins; a context without a priority sends none.
func UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(withPriority(ctx), method, req, reply, cc, opts...)
	}
}

// StreamClientInterceptor is UnaryClientInterceptor for streams.
func StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(withPriority(ctx), desc, cc, method, opts...)
	}
}

// withPriority adds x-priority to the outgoing metadata from the
// context's priority, unless there is none or the metadata has one.
func withPriority(ctx context.Context) context.Context {
	p, ok := client.PriorityFrom(ctx)
	if !ok {
		return ctx
	}
	if md, ok := metadata.FromOutgoingContext(ctx); ok && len(md.Get(PriorityKey)) > 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, PriorityKey, strconv.Itoa(p))
}
