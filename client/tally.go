package client

import (
	"math"
	"slices"
	"strconv"
	"sync/atomic"
	"time"
)

// tallySlots is how many distinct priorities one interval counts apart:
// the daemon takes at most 64 keys in "admission.offered".
const tallySlots = 64

// tally counts the admission decisions of one interval: those judged
// against one state (one sequence) and reported together. Each view
// points at the tally of its interval, so a decision counts in the
// interval of the state it was judged against. Counting is lock-free: a
// probe of a small open-addressed table keyed by priority and one atomic
// add.
//
// A priority beyond the 64th distinct one of an interval is counted under
// the nearest higher priority already counted; above all of them, it
// takes over the highest one's slot, whose counts it inherits. Either
// way a request is only ever counted under a priority at least its own,
// so the daemon's law over-estimates the load it would admit at a
// threshold, never under-estimates it.
type tally struct {
	// seq is the sequence of the state the decisions are judged
	// against; judged is false when there was no state (the fail mode
	// decided before the first one), and such counts are never reported.
	seq    uint64
	judged bool
	start  time.Time // when the interval began; its monotonic reading is used
	end    time.Time // when it ended; set under Client.mu as it is ended
	slots  [tallySlots]tallySlot
	// waits counts the requests Middleware timed from a proxy's start
	// stamp (WithRequestStart); firstWaits holds the waits before the
	// middleware of the interval's first waitGroup of them, lastWaits of
	// its last waitGroup (a ring), in nanoseconds. How the wait moved over
	// the interval is how the queue before the middleware did (arrival).
	waits      atomic.Int64
	firstWaits [waitGroup]atomic.Int64
	lastWaits  [waitGroup]atomic.Int64
}

// tallySlot counts one priority's decisions.
type tallySlot struct {
	key atomic.Uint32 // priority+1; 0: free
	n   [numDecisions]atomic.Int64
}

func newTally(st *State, now time.Time) *tally {
	t := &tally{start: now}
	if st != nil {
		t.seq, t.judged = st.Sequence, true
	}
	return t
}

// count counts one decision about a request of priority p (0..PriorityCritical).
func (t *tally) count(p int, d decision) {
	k := uint32(p) + 1
	h := (k * 0x9e3779b9) >> (32 - 6) // Fibonacci hashing onto 64 slots
	for i := range uint32(tallySlots) {
		s := &t.slots[(h+i)&(tallySlots-1)]
		key := s.key.Load()
		if key == 0 {
			if s.key.CompareAndSwap(0, k) {
				key = k
			} else {
				key = s.key.Load()
			}
		}
		if key == k {
			s.n[d].Add(1)
			return
		}
	}
	t.overflow(k, d)
}

// overflow counts a decision whose priority finds no slot: every slot is
// taken by another priority. It counts under the smallest key above k,
// else moves the highest slot up to k (only ever up: what the slot
// counted stays counted under a priority at least its own).
func (t *tally) overflow(k uint32, d decision) {
	for {
		var above, top *tallySlot
		var aboveKey, topKey uint32
		for i := range t.slots {
			s := &t.slots[i]
			key := s.key.Load()
			if key == k {
				s.n[d].Add(1)
				return
			}
			if key > k && (above == nil || key < aboveKey) {
				above, aboveKey = s, key
			}
			if key > topKey {
				top, topKey = s, key
			}
		}
		if above != nil {
			above.n[d].Add(1)
			return
		}
		if top.key.CompareAndSwap(topKey, k) {
			top.n[d].Add(1)
			return
		}
		// Another priority took the top slot meanwhile: look again.
	}
}

// waited notes the wait before the middleware of a request the interval
// counts, in nanoseconds (negative when the proxy's clock is ahead): an
// atomic add and one or two stores, no lock.
func (t *tally) waited(w int64) {
	n := t.waits.Add(1) - 1
	if n < waitGroup {
		t.firstWaits[n].Store(w)
	}
	t.lastWaits[n%waitGroup].Store(w)
}

// Bounds of the arrival span a report gives. waitGroup is how many waits
// each end of an interval is read from, by their median, so that one
// request stamped long before it reached the proxy's upstream (a proxy
// that buffers an upload stamps it when the headers came) moves nothing.
// A report gives the span when the interval timed at least two groups
// and the span differs from the interval by more than arrivalDiffers;
// it is held within a factor arrivalMost of the interval. Without a queue
// before the middleware the requests arrive over the interval itself,
// and the report leaves the span out (an older daemon refuses it:
// Client.arrivalRefused).
const (
	waitGroup      = 7
	arrivalDiffers = 0.1
	arrivalMost    = 8
)

// arrival is the span, in seconds, over which the requests of an
// interval of seconds arrived at the proxy in front, read from how their
// wait before the middleware moved over it: the span is the interval
// less what the wait grew by. 0 when the interval timed fewer than two
// groups of waits. The requests of a queue that grows before the
// middleware reach it at the rate the service lets them through, and
// their wait grows by as much as the load is over that rate (at 3x, a
// load of 600/s reached a saturated core's middleware at 178/s); those of
// a queue that drains reach it faster than they came, and their wait
// shrinks. The groups' medians lie waitGroup-1 requests short of the
// interval's ends, so the change between them is scaled by n/(n-waitGroup).
func (t *tally) arrival(seconds float64) float64 {
	return t.arrivalOf(t.waits.Swap(0), seconds)
}

// arrivalSoFar is arrival for the interval under way, which it leaves
// counting: the span over which the requests it has counted so far, over
// seconds, arrived (surged).
func (t *tally) arrivalSoFar(seconds float64) float64 {
	return t.arrivalOf(t.waits.Load(), seconds)
}

// arrivalOf is arrival over n timed waits.
func (t *tally) arrivalOf(n int64, seconds float64) float64 {
	if n < 2*waitGroup {
		return 0
	}
	grew := float64(median(&t.lastWaits)-median(&t.firstWaits)) / 1e9 * float64(n) / float64(n-waitGroup)
	return seconds - grew
}

// heldArrival is the arrival span a held to within a factor arrivalMost
// of the interval's seconds and to at least a millisecond: the bounds the
// daemon accepts in a report.
func heldArrival(a, seconds float64) float64 {
	return min(max(a, seconds/arrivalMost, 1e-3), seconds*arrivalMost)
}

// median is the median of a group of waits.
func median(g *[waitGroup]atomic.Int64) int64 {
	var v [waitGroup]int64
	for i := range g {
		v[i] = g[i].Load()
	}
	slices.Sort(v[:])
	return v[waitGroup/2]
}

// decisions is how many decisions the tally has counted so far.
func (t *tally) decisions() int64 {
	var n int64
	for i := range t.slots {
		s := &t.slots[i]
		if s.key.Load() == 0 {
			continue
		}
		for d := range numDecisions {
			n += s.n[d].Load()
		}
	}
	return n
}

// admissionReport is an outcome report's "admission" object: one
// interval's decisions.
type admissionReport struct {
	Sequence    uint64           `json:"sequence"`
	Admitted    int64            `json:"admitted"`
	ShedPartial int64            `json:"shed_partial"`
	ShedBelow   int64            `json:"shed_below"`
	Seconds     float64          `json:"seconds"`
	Arrival     float64          `json:"arrival_seconds,omitempty"`
	Reporter    string           `json:"reporter"`
	Offered     map[string]int64 `json:"offered"`
}

// report takes the tally's counts (a decision racing the take, a few
// nanoseconds wide, may be left out) as the interval ending at end. It
// returns nil when there is nothing to report: no decision, or none
// judged against a state.
func (t *tally) report(end time.Time, reporter string) *admissionReport {
	if !t.judged {
		return nil
	}
	r := &admissionReport{Sequence: t.seq, Reporter: reporter,
		// The daemon takes [0.001, 3600] seconds; an interval is ended by
		// every report, so only a report interval above an hour, or a
		// fake clock, leaves these bounds.
		Seconds: min(max(end.Sub(t.start).Seconds(), 1e-3), 3600)}
	for i := range t.slots {
		s := &t.slots[i]
		key := s.key.Load()
		if key == 0 {
			continue
		}
		var offered int64
		for d := range numDecisions {
			n := s.n[d].Swap(0)
			offered += n
			switch d {
			case admitted:
				r.Admitted += n
			case shedPartial:
				r.ShedPartial += n
			case shedBelow:
				r.ShedBelow += n
			}
		}
		if offered > 0 {
			if r.Offered == nil {
				r.Offered = make(map[string]int64, tallySlots)
			}
			r.Offered[strconv.FormatUint(uint64(key-1), 10)] = min(offered, maxRetained)
		}
	}
	if r.Offered == nil {
		return nil
	}
	if a := t.arrival(r.Seconds); a != 0 && math.Abs(a/r.Seconds-1) > arrivalDiffers {
		r.Arrival = heldArrival(a, r.Seconds)
	}
	r.Admitted, r.ShedPartial, r.ShedBelow = min(r.Admitted, maxRetained), min(r.ShedPartial, maxRetained), min(r.ShedBelow, maxRetained)
	return r
}

// clampPriority maps a priority to 0..PriorityCritical, as every decision
// takes it.
func clampPriority(p int) int { return min(max(p, 0), math.MaxInt32) }
