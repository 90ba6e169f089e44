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
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "degraded test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestTLSEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key, pool := selfSigned(t, dir)
	cfg := writeConfig(t, dir, fmt.Sprintf(fastConfig, "", "100ms")+fmt.Sprintf("tls: {cert_file: %q, key_file: %q}\n", cert, key))
	d := start(t, "serve", "--config", cfg)
	if !strings.HasPrefix(d.url, "https://") {
		t.Fatalf("daemon announced %s, want https", d.url)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Get(d.url + "/v1/level")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET over TLS: %v %v", resp, err)
	}
	resp.Body.Close()
	if resp, err := c.Get(strings.Replace(d.url, "https://", "http://", 1) + "/v1/level"); err == nil && resp.StatusCode == 200 {
		t.Error("plain HTTP must not be served on the TLS port")
	}
	d.stop(t)
}

// TestSlowlorisIsCutOff trickles a request's headers: the daemon must close
// the connection at its ReadHeaderTimeout (5s) instead of holding it open.
func TestSlowlorisIsCutOff(t *testing.T) {
	t.Parallel()
	d := start(t, "serve", "--config", writeConfig(t, t.TempDir(), fmt.Sprintf(fastConfig, "", "100ms")))
	conn, err := net.Dial("tcp", strings.TrimPrefix(d.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprint(conn, "GET /v1/level HTTP/1.1\r\nHost: x\r\n")
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, bufio.NewReader(conn))
		done <- err
	}()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			// A close or a reset both end the connection; what matters is
			// that the server ended it, and at the header timeout.
			if took := time.Since(start); took > 10*time.Second || isDeadline(err) {
				t.Fatalf("connection ended after %v with %v; want it closed at the header timeout", took, err)
			}
			return
		case <-tick.C:
			fmt.Fprint(conn, "X-Slow: 1\r\n") // keep trickling, never finish
		}
	}
}

func TestTokensNeverLogged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("file-secret-123\n"), 0o600)
	cfg := writeConfig(t, dir, strings.Replace(fmt.Sprintf(fastConfig, "", "100ms"), `auth: {token: "admin-secret"}`,
		fmt.Sprintf(`auth: {token_file: %q, report_token: "report-secret-456"}`, tokenFile), 1)+"log: {level: debug}\n")
	d := start(t, "serve", "--config", cfg)
	if resp, _ := d.request(t, "PUT", "/v1/override", "file-secret-123", `{"level":"Minor","ttl":"1m","reason":"r"}`); resp.StatusCode != 200 {
		t.Fatalf("token from token_file: %d, want 200", resp.StatusCode)
	}
	if resp, _ := d.request(t, "POST", "/v1/outcomes", "", `{"success":1}`); resp.StatusCode != 401 {
		t.Fatalf("outcomes without the report token: %d, want 401", resp.StatusCode)
	}
	if resp, _ := d.request(t, "POST", "/v1/outcomes", "wrong-guess", `{"success":1}`); resp.StatusCode != 401 {
		t.Fatalf("outcomes with a wrong token: %d, want 401", resp.StatusCode)
	}
	d.stop(t)
	for _, secret := range []string{"file-secret-123", "report-secret-456", "wrong-guess"} {
		if strings.Contains(d.logs.String(), secret) {
			t.Errorf("a token (%s) appeared in the logs", secret)
		}
	}
}

func isDeadline(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
