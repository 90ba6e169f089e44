package replay

import (
	"time"
)

// track follows one sequence of published levels (the replayed or the
// recorded one): its transitions, time at each level and flaps, counted
// only within the range.
type track struct {
	flapWindow  time.Duration
	from        time.Time // the start of the range (zero: open)
	level       string
	at          time.Time // when the time at level was last accounted
	left        map[string]time.Time
	transitions []Transition
	flaps       int
	time        map[string]Duration
}

func newTrack(flapWindow time.Duration, from time.Time) *track {
	return &track{flapWindow: flapWindow, from: from, left: map[string]time.Time{}, time: map[string]Duration{}}
}

// begin sets the level at the first line.
func (t *track) begin(at time.Time, level string) { t.level, t.at = level, at }

// advance accounts the time from the last call to now to the level held,
// when now is in range (from the range's start at most).
func (t *track) advance(now time.Time, inRange bool) {
	if start := later(t.at, t.from); inRange && start.Before(now) {
		t.time[t.level] += Duration(now.Sub(start))
	}
	t.at = now
}

// set records the level at `at`, a transition when it changed.
func (t *track) set(at time.Time, level, source, reason string, inRange bool) {
	if level == t.level {
		return
	}
	if inRange {
		t.transitions = append(t.transitions, Transition{At: at, From: t.level, To: level, Source: source, Reason: reason})
		if left, ok := t.left[level]; ok && at.Sub(left) <= t.flapWindow {
			t.flaps++
		}
	}
	t.left[t.level] = at
	t.level = level
}

// done returns what the track found.
func (t *track) done() ([]Transition, int, map[string]Duration) {
	if t.transitions == nil {
		t.transitions = []Transition{}
	}
	return t.transitions, t.flaps, t.time
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
