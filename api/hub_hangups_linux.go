package api

import (
	"errors"
	"log/slog"
	"sync"

	"golang.org/x/sys/unix"
)

// hangups watches the hub's sockets for subscribers that close or reset
// their end (EPOLLRDHUP, EPOLLHUP, EPOLLERR in an epoll set of its own),
// so that one that leaves is noticed at once, not at the next check, and
// never holds a subscriber slot: a subscriber that sends a byte and closes
// used to stay counted until a write failed, 27-30 s, and 100 of them
// locked out the real ones under max_subscribers: 100. One goroutine,
// blocked in epoll_wait, costs nothing while no one leaves. A nil
// *hangups watches nothing; the hub's checks still see departures.
type hangups struct {
	ep, stop int             // the epoll set, and an eventfd in it that ends wait
	wake     chan<- struct{} // told when a subscriber left
	log      *slog.Logger
	done     chan struct{} // closed when wait returns

	mu   sync.Mutex
	byID map[uint64]*hubConn
	next uint64 // the last id given; id 0 is the eventfd
}

// newHangups starts a watcher that marks a departed subscriber's stream
// (hubConn.hangup) and sends on wake. It returns nil, having logged why,
// when the kernel refuses an epoll set or an eventfd (out of files).
func newHangups(wake chan<- struct{}, log *slog.Logger) *hangups {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		log.Warn("SSE: no epoll set to watch for departed subscribers; the checks will find them", "err", err)
		return nil
	}
	stop, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err == nil {
		err = unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, stop, &unix.EpollEvent{Events: unix.EPOLLIN})
	}
	if err != nil {
		_ = unix.Close(ep)
		if stop >= 0 {
			_ = unix.Close(stop)
		}
		log.Warn("SSE: no eventfd to watch for departed subscribers; the checks will find them", "err", err)
		return nil
	}
	w := &hangups{ep: ep, stop: stop, wake: wake, log: log, done: make(chan struct{}), byID: map[uint64]*hubConn{}}
	go w.wait()
	return w
}

// add watches c's socket.
func (w *hangups) add(c *hubConn) {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.next++
	id := w.next
	w.byID[id] = c
	w.mu.Unlock()
	ev := unix.EpollEvent{Events: unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: int32(id), Pad: int32(id >> 32)}
	var err error
	if cerr := c.sock.raw.Control(func(fd uintptr) { err = unix.EpollCtl(w.ep, unix.EPOLL_CTL_ADD, int(fd), &ev) }); cerr != nil {
		err = cerr
	}
	if err != nil {
		w.mu.Lock()
		delete(w.byID, id)
		w.mu.Unlock()
		return // the checks will see it go
	}
	c.watch, c.id = w, id
}

// remove stops watching c's socket; call it before closing the socket.
func (w *hangups) remove(c *hubConn) {
	if w == nil || c.watch != w {
		return
	}
	w.mu.Lock()
	delete(w.byID, c.id)
	w.mu.Unlock()
	_ = c.sock.raw.Control(func(fd uintptr) { _ = unix.EpollCtl(w.ep, unix.EPOLL_CTL_DEL, int(fd), nil) })
	c.watch = nil
}

// wait marks the streams whose subscriber left until close.
func (w *hangups) wait() {
	defer close(w.done)
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(w.ep, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			w.log.Error("SSE: watching for departed subscribers stopped; the checks will find them", "err", err)
			return
		}
		left := false
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if id == 0 {
				return // close
			}
			w.mu.Lock()
			c := w.byID[id]
			w.mu.Unlock()
			if c != nil {
				c.hangup.Store(true)
				left = true
			}
		}
		if left {
			select {
			case w.wake <- struct{}{}:
			default: // a wake-up is already waiting
			}
		}
	}
}

// close ends the watcher and releases its descriptors.
func (w *hangups) close() {
	if w == nil {
		return
	}
	var one [8]byte
	one[0] = 1
	_, _ = unix.Write(w.stop, one[:])
	<-w.done
	_ = unix.Close(w.ep)
	_ = unix.Close(w.stop)
}
