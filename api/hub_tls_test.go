package api

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/degraded/degraded/controller"
)

// testTLS returns a server config with a certificate for 127.0.0.1 and a
// client config that trusts it.
func testTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12},
		&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// tlsServer serves h over TLSListener, under the connection limit, as the
// daemon does.
func tlsServer(t *testing.T, h http.Handler) (*httptest.Server, *tls.Config) {
	t.Helper()
	server, client := testTLS(t)
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = TLSListener(LimitListener(srv.Listener, 1000, nil), server)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, client
}

// tlsStream opens GET /v1/level/stream over TLS, with control adjusting
// the socket before it connects.
func tlsStream(t *testing.T, srv *httptest.Server, config *tls.Config, control func(fd uintptr)) *tls.Conn {
	t.Helper()
	d := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		if control != nil {
			return c.Control(control)
		}
		return nil
	}}
	conn, err := tls.DialWithDialer(d, "tcp", srv.Listener.Addr().String(), config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write([]byte("GET /v1/level/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestTLSStreamThroughTheHub: a stream over TLSListener is the hub's (its
// head says Connection: close, which net/http's would not), carries every
// change, and a subscriber that closes is noticed at once.
func TestTLSStreamThroughTheHub(t *testing.T) {
	r := newRig(t, Deps{SSE: SSE{Heartbeat: time.Hour}})
	srv, config := tlsServer(t, r.h)
	conn := tlsStream(t, srv, config, nil)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !resp.Close || len(resp.TransferEncoding) != 1 {
		t.Fatalf("head %d, close %v, %v; want the hub's: 200, Connection: close, chunked", resp.StatusCode, resp.Close, resp.TransferEncoding)
	}
	events := make(chan sseEvent, 8)
	go readEvents(bufio.NewReader(resp.Body), events)
	if st := state(t, next(t, events, isLevel)); st.Level != "Normal" {
		t.Errorf("initial state %+v, want Normal", st)
	}
	if _, err := r.c.SetOverride(controller.OverrideRequest{Level: "Major", Mode: controller.ModePin, TTL: time.Minute, Reason: "x"}); err != nil {
		t.Fatal(err)
	}
	if st := state(t, next(t, events, isLevel)); st.Level != "Major" {
		t.Errorf("state after the override %+v, want Major", st)
	}
	conn.Close() // a close_notify, then FIN: bytes before the close
	start := time.Now()
	eventually(t, 5*time.Second, "the TLS subscriber that left no longer counted", func() bool {
		return gaugeValue(t, r, "degraded_sse_subscribers") == 0
	})
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("noticed after %v, want within 2s", took)
	}
}

// TestTLSStuckSubscriberDropped: a TLS subscriber that stops reading is
// dropped about WriteTimeout after its unsent bytes stopped draining, and
// counted as write_timeout, although the changes it was sent (200 of
// 1 KiB) would all have fitted in the kernel's default send buffer (once,
// 50 such subscribers held 77 MB and stayed connected). A reading TLS
// subscriber beside it stays.
func TestTLSStuckSubscriberDropped(t *testing.T) {
	const writeTimeout = 300 * time.Millisecond
	r := newRig(t, Deps{SSE: SSE{WriteTimeout: writeTimeout, Heartbeat: 50 * time.Millisecond}})
	srv, config := tlsServer(t, r.h)
	reading := tlsStream(t, srv, config, nil)
	go func() { // reads until the end of the test
		buf := make([]byte, 4096)
		for {
			if _, err := reading.Read(buf); err != nil {
				return
			}
		}
	}()
	tlsStream(t, srv, config, func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024)
	})
	eventually(t, 5*time.Second, "two subscribers counted", func() bool { return gaugeValue(t, r, "degraded_sse_subscribers") == 2 })
	reason := strings.Repeat("r", 500) // ~1 KiB per event
	for i := range 200 {
		if _, err := r.c.SetOverride(controller.OverrideRequest{Level: []string{"Minor", "Major"}[i%2], Mode: controller.ModePin, TTL: time.Minute, Reason: reason}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	eventually(t, 10*time.Second, "the stuck TLS subscriber counted as dropped for write_timeout", func() bool {
		return droppedTotal(t, r, dropWriteTimeout) == 1
	})
	// About WriteTimeout after its bytes stopped draining, plus a check
	// interval; the bound leaves room for a loaded machine.
	if took := time.Since(start); took > 10*writeTimeout {
		t.Errorf("dropped %v after the last change, want about WriteTimeout (%v)", took, writeTimeout)
	}
	if got := gaugeValue(t, r, "degraded_sse_subscribers"); got != 1 {
		t.Errorf("degraded_sse_subscribers = %v after the drop, want 1 (the reading one)", got)
	}
}
