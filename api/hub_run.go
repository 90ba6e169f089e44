package api

import (
	"bytes"
	"context"
	"runtime"
	"sync"
	"sync/atomic"
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
	// preempt, for a round that brings no new level, closes when the level
	// changes: the round then stops where it is, and the next one carries
	// the level and what was left of this one (see deliver).
	preempt <-chan struct{}
}

// serve is Server.Run's: it runs the rounds of streams until ctx ends,
// then ends every waiting long-poll and stream and returns once the
// round's goroutines have exited.
func (h *hub) serve(ctx context.Context) {
	watch := h.rounds(ctx)
	close(h.s.shutdown) // ends the long-polls and the streams served by their handler
	h.shutdown()
	watch.close() // after the streams it watched are dropped
}

// rounds runs a round from the first stream that arrives (adopt asks
// through start) to the last one, and again, until ctx ends. It returns
// the watcher of the round ctx ended, nil if none was running.
func (h *hub) rounds(ctx context.Context) *hangups {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-h.start:
		}
		// The watcher exists only during a round: it holds two descriptors
		// and a goroutine, which an idle daemon need not keep.
		watch := newHangups(h.wake, h.s.Logger) // nil if it cannot be had: the checks still see departures
		h.mu.Lock()
		h.watch = watch
		for _, c := range h.conns {
			watch.add(c)
		}
		levelCh, sampleCh := h.levelCh, h.sampleCh
		h.mu.Unlock()
		if h.run(ctx, levelCh, sampleCh) {
			return watch
		}
		watch.close() // the round's streams are gone
	}
}

// run is one round: it serves the streams until none is left (adopt
// then asks for the next round) and reports false, or until ctx ends,
// when it reports true. levelCh and sampleCh are the controller's
// channels as they were before the round's first stream read the state.
func (h *hub) run(ctx context.Context, levelCh, sampleCh <-chan struct{}) (stopped bool) {
	s := h.s
	ctrl := s.Controller
	set := s.sse.Load()
	ping := time.NewTicker(set.Heartbeat)
	defer ping.Stop()
	check := time.NewTicker(set.checkEvery())
	defer check.Stop()
	var f frames
	var delivered uint64 // the sequence every stream has been served
	for {
		select {
		case <-ctx.Done():
		case <-set.changed: // a reload: the next ping is one new heartbeat away
			set = s.sse.Load()
			ping.Reset(set.Heartbeat)
			check.Reset(set.checkEvery())
			continue
		case <-ping.C:
			f.ping, f.check = true, true
		case <-check.C:
			f.check = true
		case <-h.wake: // deliver drops the streams whose subscriber left
		case <-levelCh:
		case <-sampleCh:
		}
		if ctx.Err() != nil {
			return true
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
		f.preempt = nil
		if st.Sequence == delivered {
			f.preempt = levelCh
		}
		left, preempted := h.deliver(&f)
		if !left {
			return false
		}
		if !preempted {
			f.ping, f.check, f.sample = false, false, nil
			delivered = f.seq
		}
	}
}

// deliver serves f to every stream from up to GOMAXPROCS writers, then
// drops the streams that ended. It says whether any stream is left (when
// none is, the round must end: adopt will ask for another), and whether f.preempt
// stopped the round early. A heartbeat or a check of 10,000 streams takes
// tens of milliseconds; a level change must not wait behind it. Serving
// a stream twice in a row is harmless, so the next round, which carries
// the new level, also redoes the ping, check and sample for every stream.
func (h *hub) deliver(f *frames) (left, preempted bool) {
	h.mu.Lock()
	conns := h.conns
	h.mu.Unlock()
	workers := max(1, min(runtime.GOMAXPROCS(0), (len(conns)+perWriter-1)/perWriter))
	ended := make([][]*hubConn, workers)
	wt := h.s.sse.Load().WriteTimeout
	var stopped atomic.Bool
	serve := func(w int, part []*hubConn) {
		for i, c := range part {
			if f.preempt != nil && i%preemptEvery == 0 && isClosed(f.preempt) {
				stopped.Store(true)
				return
			}
			if c.serve(f, wt) {
				ended[w] = append(ended[w], c)
			}
		}
	}
	if workers == 1 {
		serve(0, conns)
	} else {
		size := (len(conns) + workers - 1) / workers
		part := func(w int) []*hubConn { return conns[min(w*size, len(conns)):min((w+1)*size, len(conns))] }
		var wg sync.WaitGroup
		for w := 1; w < workers; w++ {
			wg.Go(func() { serve(w, part(w)) })
		}
		// The first part is served here, at once: a goroutine just started
		// may wait milliseconds for a free P on a busy machine.
		serve(0, part(0))
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
	left = len(h.conns) > 0
	h.running = left
	if !left {
		h.watch = nil // the next round's streams go to the next round's watcher
	}
	h.mu.Unlock()
	for _, e := range ended {
		for _, c := range e {
			h.drop(c, c.reason)
		}
	}
	return left, stopped.Load()
}

// shutdown closes every stream, counted as dropped for shutdown, and
// refuses new ones.
func (h *hub) shutdown() {
	h.mu.Lock()
	conns := h.conns
	h.conns, h.closed, h.running, h.watch = nil, true, false, nil
	h.mu.Unlock()
	for _, c := range conns {
		h.drop(c, dropShutdown)
	}
}

// serve sends c what f holds for it: first what is still pending, then a
// ping, the level event if c is behind and the sample if c wants samples,
// each only once nothing is pending. A check first judges what earlier
// rounds left unsent (bytes just written are always unsent for a moment,
// so a check after this round's writes would find every stream stuck). It
// reports true, with c.reason set ("" for a peer that left), when c must
// end.
func (c *hubConn) serve(f *frames, writeTimeout time.Duration) (end bool) {
	if c.hangup.Load() {
		return c.end("")
	}
	if f.check {
		if c.sock.peerClosed() {
			return c.end("")
		}
		switch unsent := c.hasPending() || c.sock.unsent() > 0; {
		case !unsent:
			c.stuck = time.Time{}
		case c.stuck.IsZero():
			c.stuck = f.now
		case f.now.Sub(c.stuck) >= writeTimeout:
			return c.end(dropWriteTimeout)
		}
	}
	if c.hasPending() {
		if err := c.flush(); err != nil {
			return c.failed()
		}
	}
	put := func(p []byte) bool {
		if c.hasPending() {
			return false
		}
		if err := c.send(p); err != nil {
			return c.failed()
		}
		return false
	}
	if f.ping && put(pingFrame) {
		return true
	}
	if c.seq < f.seq && !c.hasPending() {
		c.seq = f.seq
		if put(f.level) {
			return true
		}
	}
	return c.samples && f.sample != nil && put(f.sample)
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
