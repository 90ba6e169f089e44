package levels

import (
	"fmt"
	"time"
)

// MaxWindowBuckets is the most buckets an error window may have
// (error_rate_window_buckets), and MinWindowBucket the narrowest bucket
// (error_rate_window / buckets).
const (
	MaxWindowBuckets = 10000
	MinWindowBucket  = time.Millisecond
)

// Window is the error window at an evaluation: what the error rate and
// the latency signals are read from.
type Window struct {
	// Attempts and Failures are this instance's window's counts.
	Attempts, Failures int64
	// Latency holds the window's latency counts (LatencyBounds); nil when
	// the window keeps none, which leaves the latency signal alone.
	Latency []int64
	// Fleet, when set, is the fleet's window the error rate is read from
	// (error_rate_scope: fleet); Local says why the local window is read
	// instead ("fleet unreachable"), for the reason.
	Fleet *LineFleetWindow
	Local string
	// Warming says the window has not yet covered one error_rate_window
	// since it came into use.
	Warming bool
}

// ReadWindow sets the error rate and latency signals of s from w, as a
// health check reads them: a rate needs MinThroughput attempts (a
// quantile as many latencies), warming stays warming (with a value once
// there are enough), and otherwise the signal is available or absent.
// Built-in signals that no level has a threshold for are turned off. s
// must own its maps (Sample.Clone).
func (t *Table) ReadWindow(s *Sample, w Window, minThroughput int64) {
	state := func(enough bool) SignalState {
		switch {
		case w.Warming:
			return Warming
		case enough:
			return Available
		}
		return Absent
	}
	s.WindowAttempts, s.WindowFailures = w.Attempts, w.Failures
	a, f := w.Attempts, w.Failures
	switch {
	case w.Fleet != nil:
		a, f = w.Fleet.Attempts, w.Fleet.Failures
		s.ErrorRateLabel, s.ErrorRateNote = "fleet error_rate", fmt.Sprintf(" over %d instances", w.Fleet.Instances)
	case w.Local != "":
		s.ErrorRateNote = " (local: " + w.Local + ")"
	}
	enough := a > 0 && a >= minThroughput
	delete(s.Values, ErrorRate)
	if enough {
		s.Values[ErrorRate] = float64(f) / float64(a) * 100
	}
	s.States[ErrorRate] = state(enough)
	if w.Latency != nil {
		ms, n := QuantileOf(w.Latency, t.quantile)
		s.LatencyObservations = n
		enough := n > 0 && n >= minThroughput
		delete(s.Values, Latency)
		if enough {
			s.Values[Latency] = ms
		}
		s.States[Latency] = state(enough)
	}
	for _, sig := range t.signals {
		if sig.Builtin() && !t.Uses(sig) {
			s.States[sig] = Off
			delete(s.Values, sig)
			delete(s.Recovery, sig)
		}
	}
}
