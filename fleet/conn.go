package fleet

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// ErrUnavailable is wrapped by the error of an etcd operation that failed
// or took longer than the dial timeout: etcd cannot be reached. The API
// answers it with 503.
var ErrUnavailable = errors.New("etcd unavailable")

// ErrAuth is wrapped, beside ErrUnavailable, when etcd refused the
// credentials (fleet.etcd.username and password_file) or the user's
// permissions.
var ErrAuth = errors.New("etcd refused the credentials")

// ErrTLS is wrapped, beside ErrUnavailable, when the TLS handshake with
// etcd failed (an unknown CA, a rejected or unreadable client
// certificate, https:// to a plaintext member).
var ErrTLS = errors.New("TLS handshake with etcd failed")

// ErrTooLarge is wrapped, beside ErrUnavailable, when etcd's answer was
// over Options.MaxRecvBytes or a request over etcd's own limit: the keys
// under the fleet's prefix hold more than instances write (written by
// hand?), not a failing member, so no session ends for it.
var ErrTooLarge = errors.New("etcd's answer or the request is over the size limit")

// Backoff bounds of reconnection: after every member failed in a row,
// each wait is uniform in [0, d) (full jitter), d doubling from
// BackoffBase up to BackoffCap. gRPC's own reconnection backoff, within
// one client, is capped at BackoffCap too, and each session dials a
// fresh client, so a long outage never stretches the reconnection.
const (
	BackoffBase = 100 * time.Millisecond
	BackoffCap  = 5 * time.Second
)

func newID() string {
	var b [8]byte
	_, _ = crand.Read(b[:]) // never fails on Linux (crypto/rand's own contract)
	return hex.EncodeToString(b[:])
}

// newClient dials a client to one member. With a username it
// authenticates at once, so that refused credentials show here.
func (f *Fleet) newClient(endpoint string) (*clientv3.Client, error) {
	tlsCfg := f.o.TLS
	if tlsCfg == nil && f.o.TLSFiles != nil {
		var err error
		if tlsCfg, err = f.o.TLSFiles.config(); err != nil {
			return nil, fmt.Errorf("%w: %w: %w", ErrUnavailable, ErrTLS, err)
		}
	}
	dialer := f.o.Dial
	if dialer == nil {
		dialer = func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		}
	}
	dial := []grpc.DialOption{
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: BackoffBase, Multiplier: 1.6, Jitter: 0.2, MaxDelay: BackoffCap},
			MinConnectTimeout: f.o.DialTimeout,
		}),
		grpc.WithContextDialer(f.notingDialer(dialer)),
	}
	if tlsCfg != nil && strings.HasPrefix(endpoint, "https://") {
		// The same TLS as etcd's client would use, noting why a handshake
		// failed: gRPC reports only the deadline a call then runs into.
		dial = append(dial, grpc.WithTransportCredentials(noting{credentials.NewTLS(tlsCfg), f}))
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            []string{endpoint},
		DialTimeout:          f.attempt,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Username:             f.o.Username,
		Password:             f.o.Password,
		TLS:                  tlsCfg,
		Logger:               f.zap,
		MaxCallRecvMsgSize:   f.o.MaxRecvBytes,
		DialOptions:          dial,
	})
	if err != nil {
		return nil, classify(context.Background(), "connect to "+endpoint, err)
	}
	return cli, nil
}

// noting is TLS transport credentials that note a failed handshake.
type noting struct {
	credentials.TransportCredentials
	f *Fleet
}

func (n noting) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, info, err := n.TransportCredentials.ClientHandshake(ctx, authority, conn)
	if err != nil {
		n.f.noteAttempt(ctx, err, true)
		return c, info, err
	}
	return alertConn{c, n.f}, info, nil
}

// alertConn notes a TLS alert read after the handshake: with TLS 1.3 a
// server that refuses the client's certificate says so only then.
type alertConn struct {
	net.Conn
	f *Fleet
}

func (c alertConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && strings.Contains(err.Error(), "remote error: tls:") {
		c.f.noteConn(err, true)
	}
	return n, err
}

func (n noting) Clone() credentials.TransportCredentials {
	return noting{n.TransportCredentials.Clone(), n.f}
}

// connNote is the last connection attempt that failed, and how.
type connNote struct {
	err error
	tls bool
	at  time.Time
}

// notingDialer is dial noting why a connection attempt failed.
func (f *Fleet) notingDialer(dial func(context.Context, string) (net.Conn, error)) func(context.Context, string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := dial(ctx, addr)
		if err != nil {
			f.noteAttempt(ctx, err, false)
		}
		return c, err
	}
}

// noteAttempt notes err, the failure of a connection attempt made with
// ctx, unless ctx was canceled: gRPC cancels the dials and handshakes of
// a client being closed, and that says nothing of etcd. (Noted, such a
// cancel after a failed handshake would replace it, and a PUT that timed
// out on the handshake would be answered "etcd cannot be reached".) A ctx
// past its deadline is noted: the dial timed out, etcd did not answer.
func (f *Fleet) noteAttempt(ctx context.Context, err error, tls bool) {
	if !errors.Is(ctx.Err(), context.Canceled) {
		f.noteConn(err, tls)
	}
}

func (f *Fleet) noteConn(err error, tls bool) {
	f.mu.Lock()
	f.conn = connNote{err: err, tls: tls, at: time.Now()}
	f.mu.Unlock()
}

// cause adds to err, an operation's failure that only says it ran out of
// time, why the last connection attempt failed (refused, a TLS handshake),
// if one did since the last answer from etcd and within a reconnection
// backoff and a dial of since: gRPC may be waiting out its backoff during
// the whole try, and the failure it waits on is still the cause. (Bounded
// by since alone, a PUT in that wait was answered "etcd cannot be
// reached" instead of naming the TLS handshake, one run in three.)
func (f *Fleet) cause(err error, since time.Time) error {
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	f.mu.Lock()
	n := f.conn
	f.mu.Unlock()
	switch {
	case n.err == nil || n.at.Before(since.Add(-BackoffCap-f.o.DialTimeout)) || n.at.UnixNano() < f.lastOK.Load():
		return err
	case n.tls:
		return fmt.Errorf("%w: %w (the last connection's handshake: %w)", ErrTLS, err, n.err)
	}
	return fmt.Errorf("%w (the last connection attempt: %w)", err, n.err)
}

// classify wraps an etcd error as ErrUnavailable, and ErrAuth or ErrTLS
// when it is one of those, keeping ctx's own end.
func classify(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return ctx.Err()
	}
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	switch kind := errorKind(err); kind {
	case nil:
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
	default:
		return fmt.Errorf("%w: %w: %s: %w", ErrUnavailable, kind, what, err)
	}
}

// errorKind is ErrAuth or ErrTLS when err is such a failure, else nil.
// gRPC flattens a handshake failure into its status message, so TLS is
// recognised by the words crypto/tls and crypto/x509 use.
func errorKind(err error) error {
	for _, auth := range []error{rpctypes.ErrAuthFailed, rpctypes.ErrPermissionDenied, rpctypes.ErrUserEmpty,
		rpctypes.ErrInvalidAuthToken, rpctypes.ErrInvalidAuthMgmt, rpctypes.ErrUserNotFound} {
		if errors.Is(err, auth) {
			return ErrAuth
		}
	}
	if errors.Is(err, ErrTLS) {
		return ErrTLS
	}
	if errors.Is(err, ErrTooLarge) || status.Code(err) == codes.ResourceExhausted || errors.Is(err, rpctypes.ErrRequestTooLarge) {
		return ErrTooLarge
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "authentication failed"), strings.Contains(msg, "permission denied"):
		return ErrAuth
	case strings.Contains(msg, "x509:"), strings.Contains(msg, "tls:"), strings.Contains(msg, "authentication handshake failed"),
		strings.Contains(msg, "does not look like a TLS handshake"):
		return ErrTLS
	}
	return nil
}

// retryable says whether an operation that failed with err may succeed
// on another member: not when etcd answered that the request itself is
// wrong or not allowed.
func retryable(err error) bool {
	kind := errorKind(err)
	return !errors.Is(kind, ErrAuth) && !errors.Is(kind, ErrTooLarge)
}

// ok notes that etcd answered.
func (f *Fleet) ok() { f.lastOK.Store(time.Now().UnixNano()) }

// current returns the session's client and generation, and a channel
// closed when they change; cli is nil between sessions.
func (f *Fleet) current() (*clientv3.Client, uint64, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cli, f.gen, f.genCh
}

// failover ends the session of generation gen, if it is still the
// current one, so that the next one moves to another member.
func (f *Fleet) failover(gen uint64, err error) {
	f.mu.Lock()
	end := f.endOf
	if f.gen != gen || end == nil {
		end = nil
	}
	f.mu.Unlock()
	if end != nil {
		end(err)
	}
}

// do runs one etcd operation for a caller (an override change, a read of
// the view or the history) within DialTimeout: each try, on the
// session's member, is bounded by the attempt timeout; a try that fails
// or hangs moves the session to the next member and the operation tries
// again there. With one member there is none to move to, and a try may
// take the whole dial timeout: a loaded etcd that answers a PUT in 1.2s
// is slow, not hung, and a try cut at half the dial timeout only started
// again on the same member, short of time. Its error wraps
// ErrUnavailable (and ErrAuth or ErrTLS) when etcd could not be used,
// naming the last cause.
func (f *Fleet) do(ctx context.Context, what string, op func(ctx context.Context, cli *clientv3.Client) error) error {
	octx, cancel := context.WithTimeout(ctx, f.o.DialTimeout)
	defer cancel()
	try := f.attempt
	if len(f.o.Endpoints) == 1 {
		try = f.o.DialTimeout
	}
	var last error
	for {
		cli, gen, changed := f.current()
		if cli != nil {
			start := time.Now()
			actx, acancel := context.WithTimeout(octx, try)
			err := f.cause(op(actx, cli), start)
			acancel()
			if err == nil {
				f.ok()
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			last = err
			if !retryable(err) {
				return classify(ctx, what, err)
			}
			f.failover(gen, classify(ctx, what, err))
		}
		select {
		case <-changed:
		case <-octx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if last == nil {
				last = f.whyDown()
			}
			return classify(ctx, what, last)
		}
	}
}

// whyDown is the last session error, or a plain "not connected".
func (f *Fleet) whyDown() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lastErr != nil {
		return f.lastErr
	}
	return errors.New("not connected to etcd")
}
