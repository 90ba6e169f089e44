package degradedgrpc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/degraded/degraded/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The tests run a real grpc-go server and client on loopback, with the
// standard health service as the API: Check is a unary call, Watch a
// server stream. The service's name in the request tells the test server
// what to do: "" answers SERVING, "panic" panics, "internal" and
// "notfound" answer that code, "hop" calls the next server first.

// service is the test server's health service.
type service struct {
	grpc_health_v1.UnimplementedHealthServer
	next grpc_health_v1.HealthClient // for "hop"; nil on the last server

	mu   sync.Mutex
	seen []int // the priority in each call's context; -1 without one
}

func (s *service) saw(ctx context.Context) {
	p, ok := client.PriorityFrom(ctx)
	if !ok {
		p = -1
	}
	s.mu.Lock()
	s.seen = append(s.seen, p)
	s.mu.Unlock()
}

func (s *service) priorities() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.seen...)
}

func (s *service) act(ctx context.Context, what string) error {
	switch what {
	case "panic":
		panic("boom")
	case "internal":
		return status.Error(codes.Internal, "broken")
	case "notfound":
		return status.Error(codes.NotFound, "no such thing")
	case "hop":
		_, err := s.next.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
		return err
	case "hop-stream":
		w, err := s.next.Watch(ctx, &grpc_health_v1.HealthCheckRequest{})
		if err != nil {
			return err
		}
		_, err = w.Recv()
		return err
	}
	return nil
}

func (s *service) Check(ctx context.Context, req *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	s.saw(ctx)
	if err := s.act(ctx, req.Service); err != nil {
		return nil, err
	}
	return &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}, nil
}

func (s *service) Watch(req *grpc_health_v1.HealthCheckRequest, stream grpc_health_v1.Health_WatchServer) error {
	s.saw(stream.Context())
	if err := s.act(stream.Context(), req.Service); err != nil {
		return err
	}
	return stream.Send(&grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING})
}

// serve runs svc behind the server interceptors of c on loopback and
// returns its address.
func serve(t *testing.T, c *client.Client, svc *service, opts ...Option) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	prio := PriorityFromMetadata("x-priority", 50)
	opts = append([]Option{WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(UnaryServerInterceptor(c, prio, opts...)),
		grpc.ChainStreamInterceptor(StreamServerInterceptor(c, prio, opts...)))
	grpc_health_v1.RegisterHealthServer(srv, svc)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// dial returns a health client of addr whose calls carry the context's
// priority.
func dial(t *testing.T, addr string) grpc_health_v1.HealthClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(StreamClientInterceptor()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return grpc_health_v1.NewHealthClient(conn)
}

// at returns ctx with x-priority p in its outgoing metadata; p < 0 sends
// none.
func at(p int) context.Context {
	if p < 0 {
		return context.Background()
	}
	return metadata.AppendToOutgoingContext(context.Background(), "x-priority", strconv.Itoa(p))
}

// check makes a unary call and returns its code and trailer.
func check(t *testing.T, h grpc_health_v1.HealthClient, p int, what string) (codes.Code, metadata.MD) {
	t.Helper()
	var trailer metadata.MD
	_, err := h.Check(at(p), &grpc_health_v1.HealthCheckRequest{Service: what}, grpc.Trailer(&trailer))
	return status.Code(err), trailer
}

// watch opens a stream, reads to its end and returns its code and
// trailer.
func watch(t *testing.T, h grpc_health_v1.HealthClient, p int, what string) (codes.Code, metadata.MD) {
	t.Helper()
	s, err := h.Watch(at(p), &grpc_health_v1.HealthCheckRequest{Service: what})
	if err != nil {
		return status.Code(err), nil
	}
	for {
		if _, err = s.Recv(); err != nil {
			break
		}
	}
	if err == io.EOF {
		err = nil
	}
	return status.Code(err), s.Trailer()
}

// checkShed checks a shed call's trailers: the pushback until the
// level's earliest recovery (90s away) and the level.
func checkShed(t *testing.T, what string, code codes.Code, tr metadata.MD, level string) {
	t.Helper()
	if code != codes.ResourceExhausted {
		t.Errorf("%s: %v, want ResourceExhausted", what, code)
		return
	}
	ms, err := strconv.Atoi(first(tr, PushbackKey))
	if err != nil || ms < 85_000 || ms > 90_000 {
		t.Errorf("%s: %s %q, want the milliseconds until the earliest recovery (about 90000)", what, PushbackKey, first(tr, PushbackKey))
	}
	if got := first(tr, LevelKey); got != level {
		t.Errorf("%s: %s %q, want %q", what, LevelKey, got, level)
	}
}

func first(md metadata.MD, key string) string {
	if vs := md.Get(key); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

var errPlain = errors.New("plain")

func statusErr(c codes.Code) error { return status.Error(c, c.String()) }

// Metadata priorities are clamped to 0..PriorityCritical whatever their
// size; only a value that is not an integer gets the fallback.
func TestPriorityFromMetadataClamps(t *testing.T) {
	prio := PriorityFromMetadata("x-priority", 50)
	for _, tc := range []struct {
		value string
		want  int
	}{
		{"60", 60},
		{"-5", 0},
		{"-99999999999999999999", 0},
		{"2147483648", client.PriorityCritical},
		{"99999999999999999999", client.PriorityCritical},
		{"high", 50},
	} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-priority", tc.value))
		if got := prio(ctx); got != tc.want {
			t.Errorf("x-priority %q: %d, want %d", tc.value, got, tc.want)
		}
	}
}
