package main

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// stampConn is a TCP connection that reads with recvmsg and keeps the
// kernel's software receive time of the newest bytes each read returned
// (SO_TIMESTAMPING, Linux). That is when the data reached this socket: a
// measurement taken from it does not include how long the reading
// process waited for a core, which on a saturated machine can dwarf what
// is measured.
type stampConn struct {
	*net.TCPConn
	raw     syscall.RawConn
	oob     []byte
	arrived int64 // Unix ns of the last read's newest bytes; 0: the kernel gave none
}

// newStampConn turns on receive timestamps for c.
func newStampConn(c *net.TCPConn) (*stampConn, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPING,
			unix.SOF_TIMESTAMPING_RX_SOFTWARE|unix.SOF_TIMESTAMPING_SOFTWARE)
	}); err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, serr
	}
	return &stampConn{TCPConn: c, raw: raw, oob: make([]byte, 256)}, nil
}

// Read reads like net.Conn's Read (deadlines included) and records the
// receive time.
func (s *stampConn) Read(b []byte) (int, error) {
	var n, oobn int
	var rerr error
	err := s.raw.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), b, s.oob, 0)
		return !errors.Is(rerr, unix.EAGAIN)
	})
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		return 0, rerr
	case n == 0 && len(b) > 0:
		return 0, io.EOF
	}
	if at, ok := receiveTime(s.oob[:oobn]); ok {
		s.arrived = at
	}
	return n, nil
}

// receiveTime finds the software timestamp in recvmsg's control data: a
// struct scm_timestamping, whose first timespec is the software one.
func receiveTime(oob []byte) (int64, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_SOCKET || m.Header.Type != unix.SCM_TIMESTAMPING || len(m.Data) < 16 {
			continue
		}
		sec := int64(binary.NativeEndian.Uint64(m.Data[0:8]))
		nsec := int64(binary.NativeEndian.Uint64(m.Data[8:16]))
		if sec == 0 && nsec == 0 {
			continue
		}
		return time.Unix(sec, nsec).UnixNano(), true
	}
	return 0, false
}
