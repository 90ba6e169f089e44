package fleet

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// TLSFiles names the etcd client's TLS files: a CA to verify the members
// (empty: the system's roots) and a client certificate and key (both or
// neither). They are read when a session dials, and the key pair again
// at any handshake after either file changed, so that a rotation (by
// cert-manager, Vault) takes effect without a restart. The zero value
// reads nothing. Safe for concurrent use.
type TLSFiles struct {
	CAFile, CertFile, KeyFile string

	mu   sync.Mutex
	pair *tls.Certificate
	seen [2]fileStamp // of CertFile and KeyFile when pair was read
}

// fileStamp is what tells that a file changed.
type fileStamp struct {
	mod  time.Time
	size int64
}

func stamp(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size()}, nil
}

// Check reads every file once and reports the first problem, naming it.
func (t *TLSFiles) Check() error {
	if _, err := t.roots(); err != nil {
		return err
	}
	if t.CertFile == "" {
		return nil
	}
	_, err := t.keyPair()
	return err
}

// TLSConfig is the client TLS configuration t gives now (what a session
// dials with): the CA read now, and a GetClientCertificate that re-reads
// the key pair when its files change.
func TLSConfig(t *TLSFiles) (*tls.Config, error) { return t.config() }

// config builds a client TLS configuration from the files as they are
// now; the key pair is re-read at a later handshake if it changed.
func (t *TLSFiles) config() (*tls.Config, error) {
	roots, err := t.roots()
	if err != nil {
		return nil, err
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
	if t.CertFile != "" {
		if _, err := t.keyPair(); err != nil {
			return nil, err
		}
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return t.keyPair() }
	}
	return c, nil
}

// roots reads CAFile; nil (the system's roots) when it is not set.
func (t *TLSFiles) roots() (*x509.CertPool, error) {
	if t.CAFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, fmt.Errorf("fleet.etcd.tls.ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("fleet.etcd.tls.ca_file: no PEM certificate in %s", t.CAFile)
	}
	return pool, nil
}

// keyPair returns the client key pair, read again when either file
// changed since it was last read. A pair that cannot be read while an
// older one is held keeps the older one (a rotation writes the two files
// one after the other).
func (t *TLSFiles) keyPair() (*tls.Certificate, error) {
	c, err1 := stamp(t.CertFile)
	k, err2 := stamp(t.KeyFile)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := errors.Join(err1, err2); err != nil {
		if t.pair != nil {
			return t.pair, nil
		}
		return nil, fmt.Errorf("fleet.etcd.tls: %w", err)
	}
	if t.pair != nil && t.seen == [2]fileStamp{c, k} {
		return t.pair, nil
	}
	pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		if t.pair != nil {
			return t.pair, nil
		}
		return nil, fmt.Errorf("fleet.etcd.tls: load key pair: %w", err)
	}
	t.pair, t.seen = &pair, [2]fileStamp{c, k}
	return t.pair, nil
}
