package fleet_test

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/degraded/degraded/fleet"
	"github.com/degraded/degraded/fleet/fleettest"
)

// TestTLSFilesFollowARotation: the client certificate offered at a
// handshake is the one in the files now, not the one read at start; a
// half-written rotation keeps the previous pair.
func TestTLSFilesFollowARotation(t *testing.T) {
	dir := t.TempDir()
	ca, err := fleettest.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	files, err := ca.WriteFiles(dir, "", "first")
	if err != nil {
		t.Fatal(err)
	}
	tf := &fleet.TLSFiles{CAFile: files.CA, CertFile: files.Cert, KeyFile: files.Key}
	if err := tf.Check(); err != nil {
		t.Fatal(err)
	}
	cfg, err := fleet.TLSConfig(tf)
	if err != nil {
		t.Fatal(err)
	}
	offered := func() string {
		t.Helper()
		c, err := cfg.GetClientCertificate(&tls.CertificateRequestInfo{})
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf.Subject.CommonName
	}
	if got := offered(); got != "first" {
		t.Fatalf("offered %q, want the first certificate", got)
	}
	if _, err := ca.WriteFiles(dir, "", "second"); err != nil {
		t.Fatal(err)
	}
	if got := offered(); got != "second" {
		t.Errorf("after the rotation: offered %q, want the second certificate", got)
	}
	if err := fleettest.Replace(files.Key, []byte("not a key")); err != nil {
		t.Fatal(err)
	}
	if got := offered(); got != "second" {
		t.Errorf("with the key half-rotated: offered %q, want the second certificate kept", got)
	}
}
