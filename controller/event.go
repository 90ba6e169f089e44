package controller

import (
	"context"
	"time"

	"github.com/degraded/degraded/levels"
)

// eventSpacing is the least time between two event-driven evaluations: a
// storm of reports is evaluated at most once per millisecond.
const eventSpacing = time.Millisecond

// Reported tells the controller that an outcome report reached the error
// window, or that a pushed value arrived. If that makes a signal exceed a
// more severe level's threshold, the automatic level escalates at once instead of at the next
// tick: an error burst is shed within milliseconds. See DESIGN.md
// "Transitions": an event evaluates the automatic level only, upward only,
// only when escalate_after is 1 and the level has been held
// escalation_delay; it is not a tick for streaks or recovery. It refreshes
// the window's signals and the pushed ones in the published signals and
// wakes sample followers.
//
// The evaluation runs in the caller (it may wait for a health check in
// progress); reports that arrive while one is due, or within a millisecond
// of the last evaluation, are folded into one evaluation a millisecond
// later, on a timer that Run stops when it ends. It is safe for concurrent
// use.
func (c *Controller) Reported(levels.Report) {
	if c.eventDue.Swap(true) {
		return // one evaluation is already due; it will read this report
	}
	wait := eventSpacing - time.Since(time.Unix(0, c.lastEvent.Load()))
	if wait <= 0 {
		c.evaluateEvent()
		return
	}
	c.timerMu.Lock()
	defer c.timerMu.Unlock()
	if !c.stopped {
		c.eventTimer = time.AfterFunc(wait, c.evaluateEvent)
	}
}

// stopEvents cancels a scheduled event evaluation and refuses new timers:
// Run calls it as it ends, so nothing runs after it.
func (c *Controller) stopEvents() {
	c.timerMu.Lock()
	defer c.timerMu.Unlock()
	c.stopped = true
	if c.eventTimer != nil {
		c.eventTimer.Stop()
	}
}

// evaluateEvent runs one event-driven evaluation.
func (c *Controller) evaluateEvent() {
	c.evalMu.Lock()
	defer c.evalMu.Unlock()
	c.eventDue.Store(false)
	now := time.Now()
	c.lastEvent.Store(now.UnixNano())

	c.mu.Lock()
	o, ready, errSince, sample := c.opts, c.ready, c.errSince, c.signals.Clone()
	c.mu.Unlock()
	if !ready {
		return
	}
	// Read the sources and the window, and log failures, outside c.mu.
	var readings []levels.Reading
	for _, src := range o.Sources {
		if in, ok := src.(Instant); ok {
			readings = append(readings, in.Read(context.Background(), now)...)
		}
	}
	c.apply(sample, readings)
	sample = sampleWindow(o, errSince, now, sample)
	sample.SampledAt = now.UTC()
	counts := c.latencyCounts(o, now)

	c.mu.Lock()
	c.signals = sample
	before := c.seq
	moves := c.moveAuto(now, sample, levels.Event)
	st := c.publishLocked(now, SourceAuto, "automatic level now "+c.opts.Table.Level(c.auto.Level).Name)
	c.mu.Unlock()

	c.recordLine(now, levels.TriggerEvent, st, counts)
	_ = c.announce(moves, st.Sequence != before) // a failed save is logged and retried on the next tick
	c.sampleCh.broadcast()
}
