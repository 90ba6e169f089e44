package daemontest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Server is an httptest.Server that can cut every connection it
// accepted, including event streams the API hijacked (which
// httptest.Server.CloseClientConnections no longer sees), as a dying
// daemon would.
type Server struct {
	*httptest.Server
	ln *trackingListener
}

// NewServer serves h on a loopback address until the test ends.
func NewServer(t testing.TB, h http.Handler) *Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	ln := &trackingListener{Listener: srv.Listener, conns: map[net.Conn]struct{}{}}
	srv.Listener = ln
	srv.Start()
	s := &Server{Server: srv, ln: ln}
	t.Cleanup(func() {
		s.CutConnections()
		srv.Close()
	})
	return s
}

// CutConnections closes every connection the server accepted so far.
func (s *Server) CutConnections() { s.ln.closeAll() }

// trackingListener remembers the connections it accepted.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.conns[c] = struct{}{}
	l.mu.Unlock()
	return c, nil
}

func (l *trackingListener) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		c.Close()
	}
	clear(l.conns)
}
