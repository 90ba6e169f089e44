package api

import (
	"crypto/tls"
	"net"
	"sync/atomic"
)

// TLSListener serves TLS over ln (wrap LimitListener's listener, so that
// a connection's slot is freed when it closes) with config, such that the
// hub can serve its event streams as it serves plain ones: with a 16 KiB
// send buffer, writes that never block, and the stuck-subscriber rule
// (DESIGN.md "Stuck subscribers"). tls.NewListener's connections would
// keep a goroutine each and the kernel's default send buffer, which a
// subscriber that stops reading fills with megabytes, its writes never
// blocking long enough to be dropped.
func TLSListener(ln net.Listener, config *tls.Config) net.Listener {
	return &tlsListener{Listener: ln, config: config}
}

type tlsListener struct {
	net.Listener
	config *tls.Config
}

func (l *tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tls.Server(&tlsBase{Conn: c}, l.config), nil
}

// tlsBase is the connection under a TLS stream. Until the hub adopts the
// stream it passes every call through. Once adopted, Write never blocks:
// it writes what the socket takes now and keeps the rest in pending,
// which the hub flushes on later rounds, just as it keeps the unsent tail
// of a plain stream's event. The hub writes a new event only once nothing
// is pending, so pending never holds more than one encrypted event.
type tlsBase struct {
	net.Conn
	adopted atomic.Bool
	sock    socket // set before adopted; used by the hub's goroutines only
	pending []byte
}

// tlsAddr is the local address of a connection TLSListener accepted: it
// tells the hub, before it hijacks a TLS stream, that the stream's
// connection is one it can serve.
type tlsAddr struct{ *net.TCPAddr }

func (b *tlsBase) LocalAddr() net.Addr {
	a := b.Conn.LocalAddr()
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tlsAddr{tcp}
	}
	return a
}

func (b *tlsBase) Write(p []byte) (int, error) {
	if !b.adopted.Load() {
		return b.Conn.Write(p)
	}
	rest := p
	if len(b.pending) == 0 {
		n, err := b.sock.write(p)
		if err != nil {
			return n, err
		}
		rest = p[n:]
	}
	b.pending = append(b.pending, rest...)
	return len(p), nil
}

// adopt makes Write non-blocking over sock, the connection's TCP socket.
func (b *tlsBase) adopt(sock socket) {
	b.sock = sock
	b.adopted.Store(true)
}

// flush writes what the socket takes of pending.
func (b *tlsBase) flush() error {
	n, err := b.sock.write(b.pending)
	b.pending = b.pending[n:]
	if len(b.pending) == 0 {
		b.pending = nil // the next event starts a fresh buffer
	}
	return err
}
