//go:build !linux

package api

import (
	"errors"
	"net"
)

// socketsSupported: without SIOCOUTQ a stuck subscriber could not be seen,
// so streams keep their goroutine here.
const socketsSupported = false

// socket is unused where socketsSupported is false.
type socket struct{}

func newSocket(net.Conn) (socket, error) { return socket{}, errors.New("no hub on this platform") }

func (socket) setSendBuffer(int) error     { return nil }
func (socket) write(p []byte) (int, error) { return 0, errors.New("no hub on this platform") }
func (socket) peerClosed() bool            { return true }
func (socket) unsent() int                 { return 0 }
