package fleettest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority of one self-signed ECDSA certificate.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, PEM-encoded: what a ca_file holds.
	PEM []byte
}

// nextSerial is a random serial number: certificates issued in one test
// run never share one.
func nextSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

// NewCA makes a CA valid for a day, named name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issue makes a certificate signed by the CA for common name cn, valid
// for a day, usable by a server on 127.0.0.1 and localhost and by a
// client; it returns the certificate and its key, PEM-encoded.
func (ca *CA) Issue(cn string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	k, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k}), nil
}

// Files are the paths of one party's TLS files.
type Files struct{ CA, Cert, Key string }

// WriteFiles issues a certificate for cn and writes the CA, the
// certificate and the key as dir/<prefix>ca.pem, <prefix>cert.pem and
// <prefix>key.pem, replacing each file by a rename (as cert-manager and
// Vault agents do), so that a reader never sees half a file.
func (ca *CA) WriteFiles(dir, prefix, cn string) (Files, error) {
	cert, key, err := ca.Issue(cn)
	if err != nil {
		return Files{}, err
	}
	f := Files{CA: filepath.Join(dir, prefix+"ca.pem"), Cert: filepath.Join(dir, prefix+"cert.pem"), Key: filepath.Join(dir, prefix+"key.pem")}
	for path, b := range map[string][]byte{f.CA: ca.PEM, f.Cert: cert, f.Key: key} {
		if err := Replace(path, b); err != nil {
			return Files{}, err
		}
	}
	return f, nil
}

// Replace writes b to path by a rename of a temporary file beside it.
func Replace(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}
