package daemon

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"
)

// certFiles serves the listener's certificate, re-reading its files when
// they change, so that a certificate rotated by cert-manager or Vault is
// served without a restart (DESIGN.md "Security"). Every handshake looks
// at both files (two stat calls, beside a handshake's signatures); a pair
// that does not load (a rotation half done, a key that does not match) is
// logged once and the certificate in force is kept until one does.
type certFiles struct {
	cert, key string
	log       *slog.Logger

	mu     sync.Mutex
	in     *tls.Certificate
	stamp  [2]fileStamp // of the files in force
	failed [2]fileStamp // of the last pair that did not load
}

// fileStamp tells a changed file: a rename puts a new inode in place, an
// in-place write changes the time or size.
type fileStamp struct {
	ino   uint64
	size  int64
	mtime time.Time
}

func stampOf(path string) (fileStamp, error) {
	info, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	st := fileStamp{size: info.Size(), mtime: info.ModTime()}
	if sys, ok := info.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st, nil
}

// newCertFiles loads the pair; the daemon does not start without one.
func newCertFiles(cert, key string, log *slog.Logger) (*certFiles, error) {
	c := &certFiles{cert: cert, key: key, log: log}
	stamp, err := c.stamps()
	if err == nil {
		c.in, err = c.load()
	}
	if err != nil {
		return nil, fmt.Errorf("load tls key pair: %w", err)
	}
	c.stamp = stamp
	return c, nil
}

func (c *certFiles) stamps() ([2]fileStamp, error) {
	var s [2]fileStamp
	var err error
	if s[0], err = stampOf(c.cert); err == nil {
		s[1], err = stampOf(c.key)
	}
	return s, err
}

func (c *certFiles) load() (*tls.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(c.cert, c.key)
	if err != nil {
		return nil, err
	}
	return &pair, nil
}

// get is tls.Config.GetCertificate: the pair in force, re-read first if
// its files changed.
func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	stamp, err := c.stamps()
	if err != nil || stamp == c.stamp || stamp == c.failed {
		return c.in, nil // a file missing for a moment mid-rotation: keep serving
	}
	pair, err := c.load()
	if err != nil {
		c.failed = stamp
		c.log.Warn("tls: the certificate files changed but do not load; still serving the previous certificate",
			"cert_file", c.cert, "key_file", c.key, "err", err)
		return c.in, nil
	}
	c.in, c.stamp, c.failed = pair, stamp, [2]fileStamp{}
	attrs := []any{"cert_file", c.cert}
	if pair.Leaf != nil {
		attrs = append(attrs, "not_after", pair.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	c.log.Info("tls: certificate reloaded", attrs...)
	return c.in, nil
}
