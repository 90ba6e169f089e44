package client

import (
	"math"
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
	r.Admitted, r.ShedPartial, r.ShedBelow = min(r.Admitted, maxRetained), min(r.ShedPartial, maxRetained), min(r.ShedBelow, maxRetained)
	return r
}

// clampPriority maps a priority to 0..PriorityCritical, as every decision
// takes it.
func clampPriority(p int) int { return min(max(p, 0), math.MaxInt32) }
