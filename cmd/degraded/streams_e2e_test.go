package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writePair writes a self-signed certificate for 127.0.0.1 named cn and
// its key to certFile and keyFile, each by a rename (as cert-manager and
// Vault agents rotate them).
func writePair(t *testing.T, certFile, keyFile, cn string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for path, b := range map[string][]byte{
		certFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyFile:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}),
	} {
		if err := os.WriteFile(path+".new", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
}

// servedCN dials the daemon over TLS and returns its certificate's name.
func servedCN(t *testing.T, addr string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // the test compares the name itself
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// TestTLSStreamsEndToEnd: against the real binary serving TLS, a
// subscriber that stops reading is dropped about sse.write_timeout after
// the events stop draining (counted as write_timeout), as over plain HTTP,
// while a reading one stays; and the certificate files replaced under the
// running daemon are served to the next connection, no restart.
func TestTLSStreamsEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writePair(t, certFile, keyFile, "first")
	cfg := writeConfig(t, dir, fmt.Sprintf(fastConfig, "", "100ms")+
		fmt.Sprintf("tls: {cert_file: %q, key_file: %q}\nsse: {write_timeout: 1s, heartbeat: 1s}\n", certFile, keyFile))
	d := start(t, "serve", "--config", cfg)
	addr := strings.TrimPrefix(d.url, "https://")
	client := &tls.Config{InsecureSkipVerify: true} // the certificate changes under the test
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: client}}
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := newRequest(method, d.url+path, "admin-secret", body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	metric := func(series string) float64 {
		_, body := do("GET", "/metrics", "")
		return sampleOf(body, series)
	}

	open := func(rcvbuf int) *tls.Conn {
		t.Helper()
		dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
			if rcvbuf == 0 {
				return nil
			}
			return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf) })
		}}
		conn, err := tls.DialWithDialer(dialer, "tcp", addr, client)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if _, err := io.WriteString(conn, "GET /v1/level/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	reading := open(0)
	go func() { _, _ = io.Copy(io.Discard, reading) }()
	open(1024) // never reads
	until(t, 10*time.Second, "two subscribers", func() bool { return metric("degraded_sse_subscribers") == 2 })

	reason := strings.Repeat("r", 400)
	for i := range 300 {
		body := fmt.Sprintf(`{"level":%q,"mode":"pin","ttl":"1h","reason":"%s-%d"}`, []string{"Minor", "Major"}[i%2], reason, i)
		if code, b := do("PUT", "/v1/override", body); code != 200 {
			t.Fatalf("override %d: %d %s", i, code, b)
		}
	}
	last := time.Now()
	until(t, 15*time.Second, "the stuck TLS subscriber dropped for write_timeout", func() bool {
		return metric(`degraded_sse_dropped_total{reason="write_timeout"}`) == 1
	})
	took := time.Since(last)
	t.Logf("the stuck TLS subscriber was dropped %v after the last change", took)
	if took > 5*time.Second { // about 1.25s: write_timeout and a check interval, with room for a loaded machine
		t.Errorf("dropped %v after the last change, want about sse.write_timeout (1s)", took)
	}
	if got := metric("degraded_sse_subscribers"); got != 1 {
		t.Errorf("degraded_sse_subscribers = %v, want 1: the reading subscriber stays", got)
	}
	hc.CloseIdleConnections()

	if got := servedCN(t, addr); got != "first" {
		t.Fatalf("served %q, want first", got)
	}
	writePair(t, certFile, keyFile, "second")
	if got := servedCN(t, addr); got != "second" {
		t.Errorf("after replacing the files: served %q, want second (no restart)", got)
	}
	waitLog(t, d, "tls: certificate reloaded")
	if code := d.stop(t); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}
}

// TestGhostSubscribersEndToEnd: against the real binary with
// sse.max_subscribers: 100, 100 subscribers that send a byte and close are
// noticed within 2s, so a real subscriber is served (they used to stay
// counted for 27-30 s, locking real ones out with 503).
func TestGhostSubscribersEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := start(t, "serve", "--config", writeConfig(t, dir, fmt.Sprintf(fastConfig, "", "100ms")+"sse: {max_subscribers: 100}\n"))
	addr := strings.TrimPrefix(d.url, "http://")
	var ghosts []net.Conn
	for range 100 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET /v1/level/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("subscriber %d: %v %v", len(ghosts), resp, err)
		}
		ghosts = append(ghosts, conn)
	}
	if resp, _ := d.request(t, "GET", "/v1/level/stream", "", ""); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a 101st subscriber: %d, want 503", resp.StatusCode)
	}
	for _, c := range ghosts {
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	start := time.Now()
	until(t, 10*time.Second, "the ghosts gone", func() bool { return d.metric(t, "degraded_sse_subscribers") == 0 })
	took := time.Since(start)
	t.Logf("100 ghosts gone %v after they closed", took)
	if took > 2*time.Second {
		t.Errorf("the ghosts stayed counted %v, want under 2s", took)
	}
	req, _ := http.NewRequest("GET", d.url+"/v1/level/stream", nil)
	resp, err := shortClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("a real subscriber after the ghosts: %d, want 200", resp.StatusCode)
	}
}
