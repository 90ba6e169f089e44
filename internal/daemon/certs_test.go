package daemon

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pemPair returns a self-signed certificate named cn and its key, PEM.
func pemPair(t *testing.T, cn string) (cert, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// replace writes b to path by a rename, as cert-manager and Vault agents do.
func replace(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func servedName(t *testing.T, c *certFiles) string {
	t.Helper()
	pair, err := c.get(&tls.ClientHelloInfo{})
	if err != nil || pair == nil || pair.Leaf == nil {
		t.Fatalf("get: %v %v", pair, err)
	}
	return pair.Leaf.Subject.CommonName
}

// TestCertificateRotation: the listener's certificate files are re-read
// when they change; a pair that does not load (half rotated, or gone for a
// moment) keeps the one in force, logged once.
func TestCertificateRotation(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	certA, keyA := pemPair(t, "first")
	replace(t, certPath, certA)
	replace(t, keyPath, keyA)
	var log bytes.Buffer
	c, err := newCertFiles(certPath, keyPath, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if got := servedName(t, c); got != "first" {
		t.Fatalf("served %q, want first", got)
	}

	certB, keyB := pemPair(t, "second")
	replace(t, certPath, certB) // the certificate first: it does not match the key yet
	for range 3 {
		if got := servedName(t, c); got != "first" {
			t.Fatalf("half rotated: served %q, want first until the key follows", got)
		}
	}
	if n := strings.Count(log.String(), "do not load"); n != 1 {
		t.Errorf("the half-rotated pair was logged %d times, want once:\n%s", n, log.String())
	}
	replace(t, keyPath, keyB)
	if got := servedName(t, c); got != "second" {
		t.Errorf("after the rotation: served %q, want second", got)
	}
	if !strings.Contains(log.String(), "certificate reloaded") {
		t.Errorf("the rotation was not logged:\n%s", log.String())
	}

	if err := os.Remove(keyPath); err != nil {
		t.Fatal(err)
	}
	if got := servedName(t, c); got != "second" {
		t.Errorf("with the key file gone for a moment: served %q, want second", got)
	}
	if _, err := newCertFiles(certPath, keyPath, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "load tls key pair") {
		t.Errorf("a start without the key: %v, want an error naming the key pair", err)
	}
}
