package levels

import (
	"fmt"
	"math"
	"time"
)

// The admission law's constants. They were chosen with `degbench overload`
// (docs/design.md, "The admission law"); none is a config key, since a user
// should need to know only admission.mode.
const (
	// headroom is the share of the measured capacity the law admits: the
	// rest keeps the queue short enough for latency to stay low.
	headroom = 0.95
	// probeRate is how fast, per second, the capacity estimate grows while
	// every signal is quiet (below half its lowest threshold): the capacity
	// was measured low (a transient, a dependency that has recovered) or
	// has grown. Near the capacity a signal is not quiet, so the probe
	// stops short of it.
	probeRate = 0.5
	// probeAfter is how long after the last overload the capacity it
	// measured stands before a quiet service is probed for more; an idle
	// one (every signal below a quarter of its lowest threshold) is probed
	// at once.
	probeAfter = 30 * time.Second
	// probeReach is how far above the admitted load the probe may take
	// the capacity estimate.
	probeReach = 0.2
	// stepMargin is the dead band at a band's edges: the law steps up a
	// level only when the level below it would admit more than target x
	// (1 + stepMargin), and down only when the level below fits within
	// target x (1 - stepMargin).
	stepMargin = 0.05
	// fractionLow and fractionTop bound a published fraction: below
	// fractionLow the band is shed whole (partial null), and fractionTop is
	// the top a fraction goes to before a step down (1 would be the level
	// below).
	fractionLow = 0.05
	fractionTop = 0.95
	// fractionStep is the least change of the fraction worth a new state
	// document, and partialEvery the least time between two changes.
	fractionStep = 0.02
	partialEvery = 250 * time.Millisecond
)

// law is the graduated admission law's state (DESIGN.md "Overload
// control"). It estimates the service's capacity from what the clients
// report: the requests they were offered by priority, and the completions
// and latencies of the requests admitted since the last change. While a
// signal says the service is overloaded, the completions it manages are
// its capacity; while every signal is quiet, the capacity may be more. The
// law admits headroom x capacity, highest priority first: the level whose
// threshold cuts there, and a fraction of the band below it.
//
// It never reacts to a saturated number's size, only to whether the
// service is overloaded and how much it completes, so a latency at the
// queue's timeout cannot carry the level past the point where capacity is
// used; and it judges only reports made after its last change, so every
// step rests on evidence of the previous one.
type law struct {
	reporters map[string]reporter // by id; replaced, never changed in place
	// capacity is the completions per second the service was seen to
	// carry, known once it was seen overloaded; target is what the law
	// admits, headroom x capacity (everything while capacity is unknown).
	capacity, target float64
	known            bool
	// decidedAt is when fresh evidence last updated them, and over what it
	// said of the load.
	decidedAt time.Time
	over      bool
	overAt    time.Time // when fresh evidence last said overloaded
	// changedAt is when the automatic admission (level or partial) last
	// changed: reports judged before it are not evidence of it.
	changedAt time.Time
	// partial is the automatic level's partial admission, partialAt when
	// it last changed.
	partial   *Partial
	partialAt time.Time
	level     int // the automatic level partial belongs to
	// sized says the last evaluation could size a step: some live reporter
	// counts its offered load by priority.
	sized   bool
	offered map[int]float64
	// fresh accumulates the reports judged wholly after changedAt.
	fresh freshCounts
}

// decide updates the capacity and the target from fresh evidence.
func (l *law) decide(ev evidence, now time.Time) {
	l.sized, l.offered = ev.sized, ev.offered
	if !ev.fresh || !ev.sized {
		return
	}
	dt := min(now.Sub(l.decidedAt).Seconds(), 1)
	switch {
	case ev.over:
		l.capacity, l.known, l.overAt = ev.success, true, now
	case !l.known:
	case ev.admitted > l.capacity:
		l.capacity = ev.admitted // it carried this much without overload
	case ev.idle || ev.quiet && now.Sub(l.overAt) >= probeAfter:
		// Probe, but no further than a step above what the service was seen
		// to carry: a level that sheds most of the load cannot test more.
		l.capacity = max(l.capacity, min(l.capacity*(1+probeRate*dt), ev.admitted*(1+probeReach)))
	}
	l.target = headroom * l.capacity
	l.decidedAt, l.over = now, ev.over
}

// verdictRecent is how long the last fresh verdict on the load stands for
// evaluations without fresh reports of their own.
const verdictRecent = 3 * time.Second

// underloaded reports whether recent fresh evidence says the service is
// not overloaded.
func (l *law) underloaded(now time.Time) bool {
	return !l.decidedAt.IsZero() && !l.over && now.Sub(l.decidedAt) <= verdictRecent
}

// admittedFrom is the offered load at priorities >= threshold.
func (l *law) admittedFrom(threshold int) float64 {
	var sum float64
	for p, v := range l.offered {
		if p >= threshold {
			sum += v
		}
	}
	return sum
}

// fits reports whether admitting everything from level i's threshold
// fits within the target times scale.
func (l *law) fits(t *Table, i int, scale float64) bool {
	return !l.known || l.admittedFrom(t.Level(i).PriorityThreshold) <= l.target*scale
}

// fitLevel is the least severe level whose threshold sheds enough, with the
// dead band: the level below it would admit more than target x (1 +
// stepMargin).
func (l *law) fitLevel(t *Table) int {
	for i := range t.Len() {
		if l.fits(t, i, 1+stepMargin) {
			return i
		}
	}
	return t.Len() - 1
}

// limit adjusts a move the table rule made (a to mv) to the law: a step up
// goes no further than the level whose admission fits the target (and not
// at all when the current one fits), and a step down waits until the band
// below is admitted in full and the level below fits with margin. Without
// reports counting offered load the table rule stands: the coarser law.
func (l *law) limit(t *Table, from Auto, a Auto, mv Move, s Sample, ev evidence, now time.Time) (Auto, Move) {
	if !l.sized {
		return a, mv
	}
	hold := func() (Auto, Move) {
		a.Level, a.Since, a.JitterR, a.NotBefore = from.Level, from.Since, from.JitterR, from.NotBefore
		return a, Move{From: mv.From, To: mv.From}
	}
	if mv.To > mv.From && !l.known {
		// No capacity measured yet: the table rule stands, unless fresh
		// reports say the service is not overloaded (the window lags).
		if l.underloaded(now) {
			return hold()
		}
		return a, mv
	}
	if mv.To > mv.From {
		to := min(mv.To, max(mv.From, l.fitLevel(t)))
		if to == mv.From {
			return hold()
		}
		if to < mv.To {
			a.Level = to
			mv.To, mv.Reason = to, l.stepReason(t, s, to, ev)
		}
		return a, mv
	}
	band := l.admittedFrom(t.Level(mv.To).PriorityThreshold) - l.admittedFrom(t.Level(mv.From).PriorityThreshold)
	atTop := band <= 0 || l.partial != nil && l.partial.Fraction >= fractionTop
	if !atTop || !l.fits(t, mv.To, 1-stepMargin) {
		return hold()
	}
	return a, mv
}

// stepReason names what exceeds level to's thresholds, and what the law
// admits there.
func (l *law) stepReason(t *Table, s Sample, to int, ev evidence) string {
	why := ev.why
	if tr, ok := t.triggerAt(s, to); ok {
		why = tr.String()
	}
	return fmt.Sprintf("%s; capacity %.0f/s of %.0f/s offered", why, l.capacity, l.admittedFrom(0))
}

// partialFor is the partial admission the law gives level i: the share
// of its band that brings the admitted load to the target, nil below
// fractionLow, at most fractionTop; nil at Normal and without an estimate.
func (l *law) partialFor(t *Table, i int) *Partial {
	if i <= 0 || !l.sized {
		return nil
	}
	from, to := t.Level(i-1).PriorityThreshold, t.Level(i).PriorityThreshold
	band := l.admittedFrom(from) - l.admittedFrom(to)
	if band <= 0 {
		return nil
	}
	f := 1.0
	if l.known {
		f = (l.target - l.admittedFrom(to)) / band
	}
	switch {
	case f < fractionLow:
		return nil
	case f > fractionTop:
		f = fractionTop
	}
	return &Partial{From: from, Fraction: math.Round(f*100) / 100}
}

// setPartial publishes p as the partial admission of the automatic
// level, level. A new level takes it at once; within a level it changes at
// most once per partialEvery, not for less than fractionStep unless it
// reaches the top, and a band shed whole is readmitted only from
// fractionLow + fractionStep (hysteresis at the band's bottom edge).
func (l *law) setPartial(p *Partial, level int, now time.Time) {
	old := l.partial
	if samePartial(old, p) && level == l.level {
		return
	}
	if level == l.level {
		switch {
		case now.Sub(l.partialAt) < partialEvery:
			return
		case old == nil && p.Fraction < fractionLow+fractionStep:
			return
		case old != nil && p != nil && math.Abs(p.Fraction-old.Fraction) < fractionStep && p.Fraction < fractionTop:
			return
		}
	}
	if !samePartial(old, p) {
		l.partialAt, l.changedAt = now, now
	}
	l.partial, l.level = p, level
}
