package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// The fan-out subscribers are raw non-blocking sockets read by one epoll
// loop per core, so that the measuring side costs about one socket and
// 100 bytes per subscriber and no goroutine: at 19,000 subscribers the
// subscriber process must not be what is measured.

// lineSub is one subscriber's parse state: the bytes of a line not yet
// complete (at most maxCarry; longer lines, the data, are skipped) and
// what the current event has said so far.
type lineSub struct {
	fd       int
	idx      int
	carry    []byte
	skipping bool
	started  bool // the first line (status line, or Redis reply) was seen
	// SSE: the id and whether the event is a level event.
	id    uint64
	level bool
	// Redis: 0 outside a message, 1 after "message", 2 after the
	// channel's length, 3 after the channel, 4 after the payload's length
	// (the next line is the key).
	rstate int
}

const maxCarry = 48

// epollSubs reads every subscriber's socket and calls got(i, key) when
// subscriber i holds the event or message with key.
type epollSubs struct {
	kind  string
	subs  []*lineSub
	epfds []int
	got   func(i int, key uint64, at int64)
	fail  func(i int, err error)
}

func newEpollSubs(kind string, got func(int, uint64, int64), fail func(int, error)) (*epollSubs, error) {
	e := &epollSubs{kind: kind, got: got, fail: fail}
	for range runtime.GOMAXPROCS(0) {
		fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			e.close()
			return nil, err
		}
		e.epfds = append(e.epfds, fd)
	}
	return e, nil
}

// dial connects subscriber i to addr (blocking), sends hello, and adds it
// to an epoll loop.
func (e *epollSubs) dial(i int, addr netip.AddrPort, hello []byte) (*lineSub, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	sa := &unix.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}
	if err := unix.Connect(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("connect %s: %w", addr, err)
	}
	for p := hello; len(p) > 0; {
		n, err := unix.Write(fd, p)
		if err != nil {
			unix.Close(fd)
			return nil, err
		}
		p = p[n:]
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	s := &lineSub{fd: fd, idx: i, carry: make([]byte, 0, maxCarry)}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}
	if err := unix.EpollCtl(e.epfds[i%len(e.epfds)], unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return s, nil
}

// start starts one reading loop per epoll instance, once every subscriber
// is dialled. The loops end with the process (a closed epoll descriptor
// does not wake a waiting loop).
func (e *epollSubs) start() {
	byFD := make(map[int32]*lineSub, len(e.subs))
	for _, s := range e.subs {
		byFD[int32(s.fd)] = s
	}
	for _, epfd := range e.epfds {
		go func() {
			events := make([]unix.EpollEvent, 256)
			buf := make([]byte, 64<<10)
			for {
				n, err := unix.EpollWait(epfd, events, -1)
				if errors.Is(err, unix.EINTR) {
					continue
				}
				if err != nil {
					return // closed
				}
				for _, ev := range events[:n] {
					s := byFD[ev.Fd]
					if s == nil {
						continue
					}
					m, err := unix.Read(s.fd, buf)
					switch {
					case errors.Is(err, unix.EAGAIN):
					case err != nil || m == 0:
						_ = unix.EpollCtl(epfd, unix.EPOLL_CTL_DEL, s.fd, nil)
						e.fail(s.idx, fmt.Errorf("connection ended (%v)", err))
					default:
						e.feed(s, buf[:m])
					}
				}
			}
		}()
	}
}

// feed parses what subscriber s read.
func (e *epollSubs) feed(s *lineSub, b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if !s.skipping && len(s.carry)+len(b) <= maxCarry {
				s.carry = append(s.carry, b...)
			} else {
				s.skipping, s.carry = true, s.carry[:0]
			}
			return
		}
		line := b[:i]
		b = b[i+1:]
		// A line whose start was skipped is long, however short its tail:
		// read as empty it would end the event one read early.
		long := s.skipping || i >= maxCarry
		if s.skipping {
			s.skipping = false
			line = nil
		} else if len(s.carry) > 0 {
			line = append(s.carry, line...)
			s.carry = s.carry[:0]
		}
		e.line(s, bytes.TrimSuffix(line, []byte("\r")), long)
	}
}

// line handles one complete line; long says it was longer than maxCarry
// (the data of an event, the payload of a message).
func (e *epollSubs) line(s *lineSub, line []byte, long bool) {
	if !s.started {
		s.started = true
		if e.kind == "sse" && !bytes.HasPrefix(line, []byte("HTTP/1.1 200")) {
			e.fail(s.idx, fmt.Errorf("stream answered %q", line))
		}
		return
	}
	if e.kind == "sse" {
		switch {
		case long:
		case len(line) == 0:
			if s.level {
				e.got(s.idx, s.id, now())
			}
			s.id, s.level = 0, false
		case bytes.HasPrefix(line, []byte("id: ")):
			s.id, _ = strconv.ParseUint(string(line[4:]), 10, 64)
		case string(line) == "event: level":
			s.level = true
		}
		return
	}
	switch {
	case s.rstate == 4:
		key, _ := strconv.ParseUint(string(line), 10, 64)
		e.got(s.idx, key, now())
		s.rstate = 0
	case long:
		s.rstate = 0
	case string(line) == "message":
		s.rstate = 1
	case s.rstate == 1 || s.rstate == 2 || s.rstate == 3:
		s.rstate++ // the channel's length, the channel, the payload's length
	default:
		s.rstate = 0
	}
}

func (e *epollSubs) close() {
	for _, s := range e.subs {
		unix.Close(s.fd)
	}
	for _, fd := range e.epfds {
		unix.Close(fd)
	}
}
