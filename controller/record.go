package controller

import (
	"time"

	"github.com/degraded/degraded/levels"
)

// Recorder receives the timeline: one line per input of the level machine
// (DESIGN.md "Timeline and replay"): each health check (trigger start for
// the first of a run, then tick), event-driven evaluation (event), override
// change (override), fleet update (fleet) and reload (reload). Record is
// called from the controller's goroutine, outside any lock, and must not
// block: a recorder that cannot keep up drops lines rather than slow the
// controller.
type Recorder interface {
	Record(l levels.Line)
}

// record hands the recorder a line.
func (c *Controller) record(l levels.Line) {
	if c.recorder != nil {
		c.recorder.Record(l)
	}
}

// evalLine is the line of an evaluation: its sample, window and reports.
// The caller completes it with outcomeLine once the machine took it.
func (c *Controller) evalLine(in levels.Input, w levels.Window) levels.Line {
	if c.recorder == nil {
		return levels.Line{}
	}
	l := levels.NewLine(in.At, in.Trigger, in.Sample)
	l.Window.LatencyCounts, l.Window.Fleet = w.Latency, w.Fleet
	l.Reports = levels.LineReports(in.Reports)
	return c.outcomeLine(l)
}

// inputLine is the line of an input that is not an evaluation: the last
// sample's signals, by actor.
func (c *Controller) inputLine(at time.Time, trigger, actor string) levels.Line {
	if c.recorder == nil {
		return levels.Line{}
	}
	l := levels.NewLine(at, trigger, c.run.m.Published().Signals)
	l.Actor = actor
	return l
}

// outcomeLine completes a line with what the machine publishes after it
// and the digest of the config in force.
func (c *Controller) outcomeLine(l levels.Line) levels.Line {
	if c.recorder == nil {
		return l
	}
	m := &c.run.m
	p := m.Published()
	t := m.Config().Table
	l.Published, l.Recommended, l.Source, l.JitterR = t.Level(p.Index).Name, t.Level(p.Recommended).Name, p.Source, p.JitterR
	l.Override, l.Partial = levels.LineOf(p.Override), p.Partial
	if p.Fleet != nil {
		l.FleetOverride = levels.LineOf(&p.Fleet.Override)
	}
	l.ConfigDigest = m.Config().Digest()
	return l
}
