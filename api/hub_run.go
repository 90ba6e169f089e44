package api

import (
	"bytes"
	"runtime"
	"sync"
	"time"
)

// frames is what one wake-up of the hub sends, each event framed once.
type frames struct {
	now   time.Time
	ping  bool   // a heartbeat: ": ping" to every stream
	check bool   // look for departed peers and unsent bytes
	seq   uint64 // sequence of level
	level []byte // the current level event; sent to the streams behind seq
	// sample is the sample event after a health check, for the streams
	// that asked for samples; nil if no check ran.
	sample []byte
}

// run is the hub's goroutine: it ends on Shutdown, closing every stream,
// or once no stream is left (adopt starts the next one).
func (h *hub) run(done chan<- struct{}) {
	defer close(done)
	s := h.s
	ctrl := s.Controller
	ping := time.NewTicker(s.Heartbeat)
	defer ping.Stop()
	check := time.NewTicker(h.checkEvery())
	defer check.Stop()
	levelCh, sampleCh := ctrl.LevelChanged(), ctrl.Sampled()
	var f frames
	for {
		f.ping, f.check, f.sample = false, false, nil
		select {
		case <-s.Shutdown:
		case <-ping.C:
			f.ping, f.check = true, true
		case <-check.C:
			f.check = true
		case <-levelCh:
		case <-sampleCh:
		}
		if isClosed(s.Shutdown) {
			h.shutdown()
			return
		}
		sampled := isClosed(sampleCh)
		levelCh, sampleCh = ctrl.LevelChanged(), ctrl.Sampled()
		st := ctrl.State()
		if f.level == nil || st.Sequence != f.seq {
			ev, err := s.levelEvent(st)
			if err != nil {
				s.Logger.Error("SSE level event not encoded", "err", err)
				continue
			}
			f.level, f.seq = chunk(ev), st.Sequence
		}
		if sampled {
			var b bytes.Buffer
			if err := encodeEvent(&b, "sample", st.Sequence, st.Signals); err != nil {
				s.Logger.Error("SSE sample event not encoded", "err", err)
			} else {
				f.sample = chunk(b.Bytes())
			}
		}
		f.now = time.Now()
		if !h.deliver(&f) {
			return
		}
	}
}

// deliver serves f to every stream from up to GOMAXPROCS writers, then
// drops the streams that ended. It says whether any stream is left; when
// none is, run must end (adopt will start another).
func (h *hub) deliver(f *frames) bool {
	h.mu.Lock()
	conns := h.conns
	h.mu.Unlock()
	workers := max(1, min(runtime.GOMAXPROCS(0), (len(conns)+perWriter-1)/perWriter))
	ended := make([][]*hubConn, workers)
	wt := h.s.WriteTimeout
	serve := func(w int, part []*hubConn) {
		for _, c := range part {
			if c.serve(f, wt) {
				ended[w] = append(ended[w], c)
			}
		}
	}
	if workers == 1 {
		serve(0, conns)
	} else {
		size := (len(conns) + workers - 1) / workers
		var wg sync.WaitGroup
		for w := range workers {
			part := conns[min(w*size, len(conns)):min((w+1)*size, len(conns))]
			wg.Go(func() { serve(w, part) })
		}
		wg.Wait()
	}

	n := 0
	for _, e := range ended {
		n += len(e)
	}
	h.mu.Lock()
	if n > 0 {
		kept := h.conns[:0]
		for _, c := range h.conns {
			if !c.ended {
				kept = append(kept, c)
			}
		}
		clear(h.conns[len(kept):])
		h.conns = kept
	}
	left := len(h.conns) > 0
	h.running = left
	h.mu.Unlock()
	for _, e := range ended {
		for _, c := range e {
			h.drop(c, c.reason)
		}
	}
	return left
}

// shutdown closes every stream, counted as dropped for shutdown, and
// refuses new ones.
func (h *hub) shutdown() {
	h.mu.Lock()
	conns := h.conns
	h.conns, h.closed, h.running = nil, true, false
	h.mu.Unlock()
	for _, c := range conns {
		h.drop(c, dropShutdown)
	}
}

// serve sends c what f holds for it: first what is still pending, then a
// ping, the level event if c is behind and the sample if c wants samples,
// each only once nothing is pending. It reports true, with c.reason set
// ("" for a peer that left), when c must end.
func (c *hubConn) serve(f *frames, writeTimeout time.Duration) (end bool) {
	if f.check && c.sock.peerClosed() {
		return c.end("")
	}
	if len(c.pending) > 0 {
		n, err := c.sock.write(c.pending)
		if err != nil {
			return c.failed()
		}
		c.pending = c.pending[n:]
	}
	put := func(p []byte) bool {
		if len(c.pending) > 0 {
			return false
		}
		n, err := c.sock.write(p)
		if err != nil {
			return c.failed()
		}
		if n < len(p) {
			c.pending = p[n:]
		}
		return false
	}
	if f.ping && put(pingFrame) {
		return true
	}
	if c.seq < f.seq && len(c.pending) == 0 {
		c.seq = f.seq
		if put(f.level) {
			return true
		}
	}
	if c.samples && f.sample != nil && put(f.sample) {
		return true
	}

	unsent := len(c.pending) > 0
	if !unsent && !f.check {
		return false // only a check can tell that the kernel's buffer drained
	}
	if !unsent {
		unsent = c.sock.unsent() > 0
	}
	switch {
	case !unsent:
		c.stuck = time.Time{}
	case c.stuck.IsZero():
		c.stuck = f.now
	case f.now.Sub(c.stuck) >= writeTimeout:
		return c.end(dropWriteTimeout)
	}
	return false
}

// failed ends c after a failed write: a peer that left is not a drop.
func (c *hubConn) failed() bool {
	if c.sock.peerClosed() {
		return c.end("")
	}
	return c.end(dropWriteError)
}

func (c *hubConn) end(reason string) bool {
	c.ended, c.reason = true, reason
	return true
}
