package api

import (
	"crypto/tls"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// socketsSupported: the hub serves streams on this platform.
const socketsSupported = true

// socket is the raw TCP socket of a hijacked stream. Its calls never
// block: the descriptor is non-blocking, as Go's netpoller leaves it.
type socket struct{ raw syscall.RawConn }

// newSocket finds the TCP socket under conn, through TLSListener's TLS
// (returning the tlsBase under it) and the connection limit's wrapper.
func newSocket(conn net.Conn) (socket, *tlsBase, error) {
	var base *tlsBase
	if tc, ok := conn.(*tls.Conn); ok {
		if base, ok = tc.NetConn().(*tlsBase); !ok {
			return socket{}, nil, fmt.Errorf("hijacked TLS connection is over a %T", tc.NetConn())
		}
		conn = base.Conn
	}
	if lc, ok := conn.(*limitConn); ok {
		conn = lc.Conn
	}
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return socket{}, nil, fmt.Errorf("hijacked connection is a %T", conn)
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return socket{}, nil, err
	}
	return socket{raw: raw}, base, nil
}

// setSendBuffer sets SO_SNDBUF, which bounds the bytes a subscriber that
// stops reading holds in the kernel.
func (s socket) setSendBuffer(n int) error {
	var err error
	if cerr := s.raw.Control(func(fd uintptr) {
		err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, n)
	}); cerr != nil {
		return cerr
	}
	return err
}

// write writes what the socket takes now of p; a full buffer is no error.
func (s socket) write(p []byte) (int, error) {
	var n int
	var err error
	if cerr := s.raw.Write(func(fd uintptr) bool {
		n, err = unix.Write(int(fd), p)
		return true
	}); cerr != nil {
		return 0, cerr
	}
	if err == unix.EAGAIN || err == unix.EINTR {
		return 0, nil
	}
	return max(n, 0), err
}

// peerClosed says whether the subscriber closed or reset its end. It
// polls for POLLRDHUP, which a close raises even when bytes the
// subscriber sent before closing are still unread (a MSG_PEEK would see
// those bytes, not the close).
func (s socket) peerClosed() bool {
	var closed bool
	if cerr := s.raw.Control(func(fd uintptr) {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		n, err := unix.Poll(p, 0)
		closed = err == nil && n > 0 && p[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
	}); cerr != nil {
		return true
	}
	return closed
}

// unsent is the number of bytes in the send queue not yet acknowledged by
// the subscriber (SIOCOUTQ).
func (s socket) unsent() int {
	var n int
	var err error
	if cerr := s.raw.Control(func(fd uintptr) {
		n, err = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
	}); cerr != nil || err != nil {
		return 0
	}
	return n
}
