package controller

import (
	"time"

	"github.com/degraded/degraded/levels"
)

// Recorder receives the timeline: one line per health check (trigger
// start for the first of a run, then tick), per event-driven evaluation
// (event) and per reload (reload). Record is called outside the
// controller's lock, from the evaluating goroutine, and must not block:
// a recorder that cannot keep up drops lines rather than slow the health
// loop.
type Recorder interface {
	Record(l levels.Line)
}

// LatencyCounter is an error window that exposes its latency counts, one
// per latency bucket (errwindow.LatencyBounds). When Options.Errors
// implements it, timeline lines carry the counts, so that a replay can
// compute another quantile.
type LatencyCounter interface {
	LatencyCounts(now time.Time) [14]int64
}

// latencyCounts reads the window's latency counts for a timeline line:
// nil without a recorder or without latencies.
func (c *Controller) latencyCounts(o Options, now time.Time) []int64 {
	lc, ok := o.Errors.(LatencyCounter)
	if c.recorder == nil || !ok {
		return nil
	}
	counts := lc.LatencyCounts(now)
	return counts[:]
}

// recordLine hands the recorder the line of an evaluation at `at` that
// published st. Call it outside c.mu.
func (c *Controller) recordLine(at time.Time, trigger string, st *State, counts []int64) {
	if c.recorder == nil {
		return
	}
	l := levels.NewLine(at, trigger, st.Signals)
	l.Window.LatencyCounts = counts
	l.Published, l.Recommended, l.Source, l.JitterR = st.Level, st.Recommended, st.Source, st.JitterR
	l.Override = lineOverride(st.Override)
	if st.Fleet != nil && st.Fleet.Override != nil {
		l.FleetOverride = lineOverride(&st.Fleet.Override.Override)
	}
	c.recorder.Record(l)
}

// lineOverride is o as a timeline line holds it; nil for nil.
func lineOverride(o *Override) *levels.LineOverride {
	if o == nil {
		return nil
	}
	return &levels.LineOverride{Level: o.Level, Mode: string(o.Mode), Reason: o.Reason, SetAt: o.SetAt, ExpiresAt: o.ExpiresAt}
}
