//go:build !linux

package api

import (
	"errors"
	"log/slog"
	"net"
)

// socketsSupported: without SIOCOUTQ a stuck subscriber could not be seen,
// so streams keep their goroutine here.
const socketsSupported = false

// socket is unused where socketsSupported is false.
type socket struct{}

func newSocket(net.Conn) (socket, *tlsBase, error) {
	return socket{}, nil, errors.New("no hub on this platform")
}

func (socket) setSendBuffer(int) error     { return nil }
func (socket) write(p []byte) (int, error) { return 0, errors.New("no hub on this platform") }
func (socket) peerClosed() bool            { return true }
func (socket) unsent() int                 { return 0 }

// hangups is unused where socketsSupported is false.
type hangups struct{}

func newHangups(chan<- struct{}, *slog.Logger) *hangups { return nil }
func (*hangups) add(*hubConn)                           {}
func (*hangups) remove(*hubConn)                        {}
func (*hangups) close()                                 {}
