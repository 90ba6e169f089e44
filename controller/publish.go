package controller

import (
	"runtime"
	"time"

	"github.com/degraded/degraded/levels"
)

// holdLogEvery is how often holding at the sequence ceiling is logged.
const holdLogEvery = time.Minute

// changed completes an input of the machine: the line recorded, the new
// state published (each history entry is one sequence step, a change of
// the partial admission alone one more), and a durable change saved. A
// save that fails is logged and retried on the next health check, not at
// every evaluation meanwhile (on a full disk, the reports' four a second
// tried it six times a second, each a temp file created and removed).
func (c *Controller) changed(now time.Time, out levels.Output, l levels.Line) {
	c.noteOverflow(now)
	c.record(l)
	c.publish(now, out)
	if len(out.Entries) > 0 {
		c.run.dirty = true
	}
	if !c.run.unsaved && (c.run.dirty || c.reserveDue() || c.capacityDue()) {
		_ = c.save(false) // save logs
	}
}

// capacitySaveEvery is how much newer than the saved one the admission
// law's capacity estimate gets before it is saved while nothing else is: a
// start restores an estimate at most ten minutes old (levels), and a
// steady overload changes no level, so its estimate was saved only at the
// level change that began it and let go by a restart ten minutes in.
const capacitySaveEvery = time.Minute

// capacityDue reports whether the capacity estimate should be saved: it
// has moved on by capacitySaveEvery since the last save. A save that
// failed is retried on the health check, not here.
func (c *Controller) capacityDue() bool {
	r := &c.run
	at := r.m.CapacityAt()
	return c.store != nil && !r.unsaved && !at.IsZero() && at.Sub(r.capacityAt) >= capacitySaveEvery
}

// numbered turns entries into history entries numbered from seq + 1 at
// now, and returns them with the sequence the document then has (one
// step more for a change of the partial admission alone).
func numbered(seq uint64, now time.Time, out levels.Output) ([]Transition, uint64) {
	ts := make([]Transition, len(out.Entries))
	for i, e := range out.Entries {
		seq++
		ts[i] = Transition{Sequence: seq, From: e.From, To: e.To, Source: e.Source, Reason: e.Reason, Actor: e.Actor, At: now.UTC()}
	}
	if len(ts) == 0 && out.Admission {
		seq++
	}
	return ts, seq
}

// publish stores the state document after an input. A change of the
// document takes sequence steps; while those would pass the reserved
// ceiling (saves are failing), the published state is held, with an ERROR
// each minute, and the change waits for the next save that succeeds: a
// sequence a reader has seen never names another state after a restart.
func (c *Controller) publish(now time.Time, out levels.Output) {
	r := &c.run
	steps := len(out.Entries)
	if steps == 0 && out.Admission {
		steps = 1
	}
	if steps > 0 || r.heldSteps > 0 {
		ts, _ := numbered(0, now, out)
		r.held = append(r.held, ts...)
		r.heldSteps += steps
		if r.seq+uint64(r.heldSteps) > r.ceiling {
			c.held.Store(true)
			if now.Sub(r.holdLog) >= holdLogEvery {
				r.holdLog = now
				c.log.Error("state not published: the state file cannot be saved, and publishing would pass the reserved sequence ceiling",
					"sequence", r.seq, "ceiling", r.ceiling, "changes_held", r.heldSteps)
			}
			if st := c.state.Load(); st != nil && !st.ready && r.m.Ready() {
				// Held since the start (startHeld): the first health check
				// has run, and /readyz says so; the document is unchanged.
				held := *st
				held.ready = true
				c.state.Store(&held)
			}
			return
		}
	}
	prev := c.state.Load()
	moves := c.flushHeld()
	st := c.build()
	c.state.Store(st)
	c.held.Store(false)
	if prev == nil || st.Sequence != prev.Sequence {
		c.levelCh.broadcast()
		// The woken streams' writer is queued on this goroutine's P, and
		// what follows (the announcement, then changed's save and its
		// fsync) holds that P for milliseconds unless another P is free
		// to steal it. Yielding lets the writer put the event on the wire
		// first (bench/findings.md F5).
		runtime.Gosched()
	}
	c.announce(st, moves)
}

// flushHeld numbers the held changes and adds them to the history,
// returning them.
func (c *Controller) flushHeld() []Transition {
	r := &c.run
	if r.heldSteps == 0 {
		return nil
	}
	moves := r.held
	for i := range moves {
		r.seq++
		moves[i].Sequence = r.seq
	}
	r.seq += uint64(r.heldSteps - len(moves))
	r.held, r.heldSteps = nil, 0
	c.mu.Lock()
	c.history = append(c.history, moves...)
	if len(c.history) > HistoryLimit {
		c.history = append(c.history[:0], c.history[len(c.history)-HistoryLimit:]...)
	}
	c.mu.Unlock()
	return moves
}

// announce tells the observer and the log about a published state and
// the history entries it made.
func (c *Controller) announce(st *State, moves []Transition) {
	if c.observer != nil {
		c.observer.Published(st)
	}
	for _, m := range moves {
		if m.From != m.To {
			c.log.Info("level changed", "from", m.From, "to", m.To, "source", m.Source, "reason", m.Reason, "actor", m.Actor, "sequence", m.Sequence)
			if c.observer != nil {
				c.observer.Transition(m.From, m.To, m.Source)
			}
		} else {
			c.log.Info("state changed", "level", m.To, "source", m.Source, "reason", m.Reason, "actor", m.Actor, "sequence", m.Sequence)
		}
	}
}

// build assembles the state document from the machine.
func (c *Controller) build() *State {
	r := &c.run
	t := r.opts.Table
	p := r.m.Published()
	l := t.Level(p.Index)
	st := &State{
		Level:              l.Name,
		Index:              p.Index,
		PriorityThreshold:  l.PriorityThreshold,
		DisabledFeatures:   t.DisabledFeatures(p.Index),
		Source:             p.Source,
		Recommended:        t.Level(p.Recommended).Name,
		Reason:             p.Reason,
		Since:              p.Since.UTC(),
		EarliestRecoveryAt: p.EarliestRecoveryAt,
		Sequence:           r.seq,
		Override:           p.Override,
		Partial:            p.Partial,
		Shadow:             p.Shadow,
		Signals:            p.Signals,
		Blind:              p.Blind,
		JitterR:            p.JitterR,
		ready:              r.m.Ready(),
		fleetOvr:           p.Fleet,
	}
	if fi := r.opts.Fleet; fi != nil {
		st.Fleet = &FleetState{Name: fi.Name, Instance: fi.Instance, Override: p.Fleet}
		if fi.Connected != nil {
			st.Fleet.Connected = fi.Connected()
		}
	}
	return st
}

// overflowLogEvery is how often the admission law's forgetting reporters
// is logged while it goes on.
const overflowLogEvery = time.Minute

// noteOverflow logs, at most once per overflowLogEvery, that the admission
// law forgot reporters because more clients reported than it tracks.
func (c *Controller) noteOverflow(now time.Time) {
	r := &c.run
	n := r.m.ReportersOverflowed()
	if n == r.overflowSeen || now.Sub(r.overflowLog) < overflowLogEvery {
		return
	}
	c.log.Warn("more clients report admission counts than the admission law tracks (256): it forgets the least recently heard and reads the offered load low, so it may admit more than the capacity; give fewer clients to each daemon",
		"reporters_forgotten", n-r.overflowSeen)
	r.overflowSeen, r.overflowLog = n, now
}
