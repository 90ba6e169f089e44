package degradedgrpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/degraded/degraded/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Metadata keys.
const (
	// PriorityKey is the metadata key that carries a call's priority
	// between services: the client interceptors set it,
	// PriorityFromMetadata(PriorityKey, ...) reads it.
	PriorityKey = "x-priority"
	// PushbackKey is gRFC A6's trailer: how many milliseconds a client's
	// retry policy waits before retrying.
	PushbackKey = "grpc-retry-pushback-ms"
	// LevelKey is the trailer naming the level that shed a call.
	LevelKey = "x-degraded-level"
)

// PriorityFromMetadata returns a priority function for the server
// interceptors that reads the call's priority from the named incoming
// metadata key (e.g. "x-priority"; keys are case-insensitive), using
// fallback when it is missing or not an integer, and clamping it to
// 0..client.PriorityCritical. Set such a key only at a trusted edge: a
// caller that can set it can exempt itself from shedding.
func PriorityFromMetadata(key string, fallback int) func(context.Context) int {
	key = strings.ToLower(key) // once, not per call
	return func(ctx context.Context) int {
		vs := metadata.ValueFromIncomingContext(ctx, key)
		if len(vs) == 0 || vs[0] == "" {
			return fallback
		}
		p, err := strconv.ParseInt(vs[0], 10, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return fallback // not an integer; one out of range is clamped
		}
		return int(min(max(p, 0), math.MaxInt32))
	}
}

// Option configures the server interceptors.
type Option func(*options)

type options struct {
	exempt []string
	log    *slog.Logger
}

// WithExempt exempts the methods whose full name ("/package.Service/Method")
// starts with one of the prefixes: they are neither shed nor recorded,
// and their context gets no priority. Nothing is exempt by default, health
// checks included: exempt them by name when a load balancer must keep
// seeing them, e.g. WithExempt("/grpc.health.v1.Health/").
func WithExempt(prefixes ...string) Option {
	return func(o *options) { o.exempt = append(o.exempt, prefixes...) }
}

// WithLogger sets where a recovered panic is logged, at ERROR with its
// stack (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

func newOptions(opts []Option) *options {
	o := &options{log: slog.Default()}
	for _, f := range opts {
		f(o)
	}
	return o
}

func (o *options) exempted(method string) bool {
	for _, p := range o.exempt {
		if strings.HasPrefix(method, p) {
			return true
		}
	}
	return false
}

// UnaryServerInterceptor sheds the unary calls the current level does not
// admit and records the outcome and latency of the others. A call's
// priority is priority(ctx) (PriorityFromMetadata); it is admitted as
// client.Client.Admit decides, which counts the decision for the daemon's
// admission report. A call that is not admitted is answered
// codes.ResourceExhausted, with the trailers grpc-retry-pushback-ms
// (milliseconds until the level could drop, at least 1000) and
// x-degraded-level, without reaching the handler and without being
// recorded: shed load must never feed the error rate that caused it.
// ResourceExhausted is not in gRPC's transparent retries, and a retry
// policy that lists it waits the pushback.
//
// An admitted call runs with its priority in its context
// (client.WithPriority). Its outcome is a failure when the handler
// returns Unknown, DeadlineExceeded, Internal, Unavailable or DataLoss
// (an error that is not a status counts as gRPC answers it: Unknown, or
// the context's code), or panics; every other code is a success. A panic
// is recovered, logged with its stack (WithLogger) and answered
// codes.Internal. The latency observed is the handler's time. In shadow
// mode (client.State.Shadow) nothing is shed.
func UnaryServerInterceptor(c *client.Client, priority func(context.Context) int, opts ...Option) grpc.UnaryServerInterceptor {
	o := newOptions(opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		if o.exempted(info.FullMethod) {
			return handler(ctx, req)
		}
		p := priority(ctx)
		t := c.Admit(p)
		if !t.Admitted() {
			_ = grpc.SetTrailer(ctx, shedTrailer(t)) // fails only outside a server call
			return nil, shedError(t)
		}
		start := time.Now()
		defer func() {
			if r := recover(); r != nil {
				t.Observe(false, time.Since(start))
				err = o.recovered(info.FullMethod, r)
			}
		}()
		resp, err = handler(client.WithPriority(ctx, p), req)
		t.Observe(!Failed(err), time.Since(start))
		return resp, err
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streams: the
// same shedding and trailers, the stream's context carries its priority,
// and its outcome is recorded without a latency (a long stream is not a
// slow request).
func StreamServerInterceptor(c *client.Client, priority func(context.Context) int, opts ...Option) grpc.StreamServerInterceptor {
	o := newOptions(opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		if o.exempted(info.FullMethod) {
			return handler(srv, ss)
		}
		p := priority(ss.Context())
		t := c.Admit(p)
		if !t.Admitted() {
			ss.SetTrailer(shedTrailer(t))
			return shedError(t)
		}
		defer func() {
			if r := recover(); r != nil {
				t.Done(false)
				err = o.recovered(info.FullMethod, r)
			}
		}()
		err = handler(srv, &prioritized{ServerStream: ss, ctx: client.WithPriority(ss.Context(), p)})
		t.Done(!Failed(err))
		return err
	}
}

// prioritized is a ServerStream whose context carries the priority.
type prioritized struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *prioritized) Context() context.Context { return s.ctx }

// Failed reports whether a handler's error is the server's failure, as
// the interceptors record it: codes Unknown, DeadlineExceeded, Internal,
// Unavailable and DataLoss. An error that is not a status is read as
// gRPC answers it: the context's code for a context error, else Unknown.
// A nil error is a success.
func Failed(err error) bool {
	if err == nil {
		return false
	}
	s, ok := status.FromError(err)
	if !ok {
		s = status.FromContextError(err)
	}
	switch s.Code() {
	case codes.Unknown, codes.DeadlineExceeded, codes.Internal, codes.Unavailable, codes.DataLoss:
		return true
	}
	return false
}

// shedTrailer is the trailer of a shed call.
func shedTrailer(t client.Ticket) metadata.MD {
	ms := (t.RetryAfter() + time.Millisecond - 1) / time.Millisecond
	return metadata.Pairs(PushbackKey, strconv.FormatInt(int64(ms), 10), LevelKey, t.Level())
}

// shedError is the status of a shed call.
func shedError(t client.Ticket) error {
	return status.Errorf(codes.ResourceExhausted, "shed: the service is degraded (%s), retry later", t.Level())
}

// recovered logs a recovered panic and returns the status the call is
// answered with.
func (o *options) recovered(method string, r any) error {
	o.log.Error("panic in a gRPC handler, answered Internal", slog.String("method", method),
		slog.String("panic", fmt.Sprint(r)), slog.String("stack", string(debug.Stack())))
	return status.Error(codes.Internal, "internal error")
}
