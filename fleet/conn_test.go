package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// TestClassify: refused credentials and failed TLS handshakes are named
// as such; everything else is plain "unavailable".
func TestClassify(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		err  error
		kind error
	}{
		{"wrong password", rpctypes.ErrAuthFailed, ErrAuth},
		{"no permission", fmt.Errorf("txn: %w", rpctypes.ErrPermissionDenied), ErrAuth},
		{"unknown CA", errors.New(`rpc error: code = Unavailable desc = connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`), ErrTLS},
		{"https to plaintext", errors.New(`rpc error: code = Unavailable desc = connection error: desc = "transport: authentication handshake failed: tls: first record does not look like a TLS handshake"`), ErrTLS},
		{"refused connection", errors.New(`rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`), nil},
		{"deadline", context.DeadlineExceeded, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := classify(ctx, "write", c.err)
			if !errors.Is(err, ErrUnavailable) {
				t.Errorf("%v does not wrap ErrUnavailable", err)
			}
			for _, k := range []error{ErrAuth, ErrTLS} {
				if errors.Is(err, k) != (k == c.kind) {
					t.Errorf("%v: wraps %v = %v, want %v", err, k, errors.Is(err, k), k == c.kind)
				}
			}
		})
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := classify(canceled, "write", fmt.Errorf("rpc: %w", context.Canceled)); err != context.Canceled {
		t.Errorf("the caller's own end: %v, want context.Canceled unchanged", err)
	}
}

// TestCauseNamesTheHandshakeDuringTheBackoff: an operation that ran out
// of time while gRPC waited out its reconnection backoff names the TLS
// handshake that failed before the try began (within a backoff and a
// dial of it), but not one older than that, nor one etcd has answered
// since.
func TestCauseNamesTheHandshakeDuringTheBackoff(t *testing.T) {
	start := time.Now()
	handshake := errors.New("x509: certificate signed by unknown authority")
	for _, c := range []struct {
		name    string
		noteAgo time.Duration
		okAfter bool
		want    bool
	}{
		{"a handshake 3 s before the try", 3 * time.Second, false, true},
		{"older than a backoff and a dial", BackoffCap + 2*time.Second, false, false},
		{"etcd answered since", 3 * time.Second, true, false},
	} {
		f := &Fleet{o: Options{DialTimeout: time.Second}}
		f.conn = connNote{err: handshake, tls: true, at: start.Add(-c.noteAgo)}
		if c.okAfter {
			f.lastOK.Store(start.Add(-c.noteAgo + time.Second).UnixNano())
		}
		err := f.cause(context.DeadlineExceeded, start)
		if got := errors.Is(err, ErrTLS); got != c.want {
			t.Errorf("%s: %v names the TLS handshake: %v, want %v", c.name, err, got, c.want)
		}
	}
}

// TestCanceledAttemptsKeepTheHandshake: the dial of a client being closed
// is canceled, and that cancel does not replace the failed handshake
// before it as the cause of a timeout; a dial that timed out, or failed
// on its own, does.
func TestCanceledAttemptsKeepTheHandshake(t *testing.T) {
	handshake := errors.New("x509: certificate signed by unknown authority")
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		tls  bool
	}{
		{"a canceled dial", canceled, context.Canceled, true},
		{"a dial past its deadline", expired, errors.New("dial tcp 127.0.0.1:2379: i/o timeout"), false},
		{"a refused dial", context.Background(), errors.New("dial tcp 127.0.0.1:2379: connect: connection refused"), false},
	} {
		f := &Fleet{o: Options{DialTimeout: time.Second}}
		f.noteConn(handshake, true)
		dial := f.notingDialer(func(context.Context, string) (net.Conn, error) { return nil, c.err })
		if _, err := dial(c.ctx, "127.0.0.1:2379"); err != c.err {
			t.Fatalf("%s: the dialer returned %v, want %v", c.name, err, c.err)
		}
		err := f.cause(context.DeadlineExceeded, time.Now())
		if got := errors.Is(err, ErrTLS); got != c.tls {
			t.Errorf("%s: %v names the TLS handshake: %v, want %v", c.name, err, got, c.tls)
		}
	}
}
