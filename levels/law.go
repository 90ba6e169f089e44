package levels

import (
	"fmt"
	"maps"
	"math"
	"slices"
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
	// the service is idle (every signal below a quarter of its lowest
	// threshold), or quiet (below half) with the ceiling a drain's floor
	// opened: the capacity was measured low (a transient, a starved host,
	// a dependency that has recovered) or has grown.
	probeRate = 0.5
	// maxDrain bounds how far below the capacity the law admits while a
	// queue drains: at most half as much, however far behind it is.
	maxDrain = 2.0
	// probeAfter is how long after the last overload the creep may take
	// the estimate past the capacity that overload measured; an idle
	// service (every signal below a quarter of its lowest threshold) is
	// probed at once, at probeRate.
	probeAfter = time.Minute
	// creepRate is how fast, per second, the capacity estimate grows back
	// while the law sheds and no signal is over its lowest threshold (to
	// the capacity last measured, and past it only probeAfter after the
	// last overload), and edgeCut how far it steps back, per second of
	// reports, when a latency or sampled signal crosses its threshold
	// without saturating the service (a report shorter than a second cuts
	// less: each change of the fraction cuts the clients' interval short,
	// and cut per report, the quarter-second reports after a cut, each
	// still carrying the queue before it, cut 189/s to 175/s in 0.6 s in
	// degbench overload's cpu3x).
	creepRate = 0.02
	edgeCut   = 0.03
	// saturation is how much more the clients must admit than the service
	// completes for it to count as saturated.
	saturation = 0.03
	// probeReach is how far above what the service completed a probe may
	// take the target in one decision.
	probeReach = 0.1
	// shortCut is the most one saturated report shorter than minRateSpan
	// may lower the capacity estimate by, and so how far over the ceiling
	// a drain's floor read over such a report must be to open it (decide).
	shortCut = 0.25
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
	// fractionStep is the least change worth a new state document, as a
	// share of the target (the fraction times the band changes by at least
	// this much of it), and the least fraction of a band readmitted after
	// it was shed whole beyond fractionLow; partialEvery is the least time
	// between two changes.
	fractionStep = 0.02
	partialEvery = 250 * time.Millisecond
	// tailProof is how far edge cuts must take the capacity estimate, and
	// tailFall how far the latency must fall meanwhile, for the latency to
	// count as the load's. A queue at the edge shortens by much more when
	// the admission falls by a tenth; a latency that does not is a tail
	// the load does not cause (a runtime's pauses, a scheduler that runs
	// woken goroutines late, a slow dependency), and cutting on would shed
	// capacity for nothing. (With 2% of requests 150 ms late whatever the
	// load, over a 100 ms threshold, the cuts took the estimate from 800/s
	// to 344/s in 35 s at 3x, and goodput to 60-65%, in the simulation; in
	// degbench overload's cpu3x, whose p99 sat at 150-200 ms with the core
	// half idle, the level held Severe for 19 s, admitting 80/s of a
	// 190/s core.) tailSlack is how much over that tail the latency may
	// go before it is pressure again.
	tailProof = 0.1
	tailFall  = 0.25
	tailSlack = 1.5
	// peakFor is how long a capacity measurement sizes the steps up of the
	// level after it, however far later ones fall (law.peak): a level is
	// held for its dwell, a measurement of a saturated stack is not.
	peakFor = 2 * time.Second
)

// law is the graduated admission law's state (DESIGN.md "Overload
// control"; docs/design.md "The admission law"). It estimates the
// service's capacity from what the clients report: the requests they were
// offered by priority and admitted, and the completions and latencies of
// the requests admitted since the last change. While the service is
// saturated, what it completes is its capacity (decide). The law admits
// headroom x capacity, highest priority first: the level whose threshold
// cuts there, and a fraction of the band below it.
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
	// ceiling is the capacity last measured (or probed while idle): the
	// creep goes no further. opened says a drain's floor over it opened
	// it (decide), until a measurement or a warm report closes it.
	ceiling float64
	opened  bool
	// measured is the estimate the last measurement left (a saturation, a
	// queue, a restart's saved estimate). What the probe, the creep and a
	// drain's floor add to it is untested, and the next measurement is
	// averaged with it, not with them (decide). (Averaged with a probe's
	// 886/s, a saturation completing 797/s left the estimate at 831/s, and
	// a queue of 100 ms stood for 3 s: TestLawSimulationStarvedStep.)
	measured float64
	// peak is the highest capacity estimate since peakAt, at most peakFor
	// ago, never below capacity (decide and restore set both): a step up
	// of the level fits the target it gives (fitLevel). A
	// stack starved of CPU completes in bursts, and its measurements
	// whipsaw: in degbench overload's crash3x, with four systems loading
	// two cores, 665/s, 508/s and 380/s within 1.8 s, then 803/s. Read at
	// the low point, the level stepped past the one that fits, to Severe,
	// and its dwell held the admission to 466/s for 10 s while the service
	// answered everything in 20-45 ms. The fraction still follows the
	// estimate at once, and a capacity that stays low moves the level
	// peakFor later.
	peak   float64
	peakAt time.Time
	// restoredAt is the time of the estimate a start restored (law.restore),
	// zero otherwise: saved's time until the law decides again.
	restoredAt time.Time
	// drain (at most 1) scales the fraction until drainUntil, when the
	// queue a saturation left is expected to be empty: it drains only at
	// the share of the capacity not admitted, so the law admits less of the
	// band until then. It never moves the level: the level is a regime, the
	// drain a moment. It ends at that time, or sooner at a fresh report
	// without pressure, or one whose median is under a quarter of the
	// threshold while its p99 is under twice it (decide): a tail, not a
	// queue. The fresh latency lags the queue by a report, so a report
	// still past twice the threshold does not end it early.
	drain      float64
	drainUntil time.Time
	// drainFrom and drainFor are the start of a drain not sized yet and
	// the latency of the queue it drains (seconds): its length depends on
	// what the level it happens at admits, which is known only once the
	// level has moved (partialFor sizes it).
	drainFrom time.Time
	drainFor  float64
	// decidedAt is when fresh evidence last updated them, and judged what
	// it said of the load (its over, its latency quantile).
	decidedAt time.Time
	judged    verdict
	// full says the last fresh decision saw a queue past twice the
	// threshold that the clients kept full (decide: standing).
	full   bool
	overAt time.Time // when fresh evidence last said overloaded
	// changedAt is when the automatic admission (level or partial) last
	// changed: reports judged before it are not evidence of it.
	changedAt time.Time
	// partial is the automatic level's partial admission, partialAt when
	// it last changed.
	partial   *Partial
	partialAt time.Time
	level     int // the automatic level partial belongs to
	// readmit is the target at which the band the automatic level sheds
	// whole would be readmitted, as the level reads the load (without a
	// short report's step: reporter.jump), 0 when it sheds none whole.
	readmit float64
	// band is the offered load in the automatic level's band, floor the
	// load its threshold admits, when partialFor last looked.
	band, floor float64
	// sized says the last evaluation could size a step: some live reporter
	// counts its offered load by priority.
	sized bool
	// offered is the offered load by priority as the level reads it,
	// rates as the fraction does (evidence).
	offered, rates map[int]float64
	// priorities are offered's keys in order (decide), ids the live
	// reporters' ids in order (observe): the law sums in these orders.
	priorities []int
	ids        []string
	// edge says the estimate is falling under a latency over its
	// threshold (checkTail): edgeCapacity was the estimate when the check
	// began, edgeLatency the latency. tail is a latency the fall did not
	// lower (tailProof), found at tailAt, 0 when none is known: up to
	// tailSlack over it, a latency is not pressure.
	edge                      bool
	edgeCapacity, edgeLatency float64
	tail                      float64
	tailAt                    time.Time
	// failLevel is the level the last fresh decision's failures call for
	// when the load does not explain them (verdict.failLevel), 0 when
	// none: the table's level is the regime for a failing dependency, as
	// it is without a capacity. A step up goes as far as the error rate
	// takes it (failureStep), and up to failLevel a level sheds what the
	// table says, no partial admission (partialFor).
	failLevel int
	// overruled says a step down on fresh reports overruled the window's
	// latency (recoverOnFresh), and the window may still hold the answers
	// it overruled (ruleSample).
	overruled bool
	// overflowed counts the reporters forgotten because more than
	// maxReporters reported (forget), for the controller's warning.
	overflowed uint64
	// fresh accumulates the reports judged wholly after changedAt, recent
	// the last second or so of reports, fresh or not.
	fresh  freshCounts
	recent recentCounts
}

// decide updates the capacity and the target from fresh evidence.
//
// The capacity is measured while the service is saturated: a latency or
// a sampled signal over half its threshold, the clients admitting more
// than it completes. Then what it completes is what it can
// carry. Under pressure without saturation the queue is draining (a
// latency far over its threshold: the capacity stands; one the clients
// keep full is drained as a saturation's is, standing below) or the load
// is at the edge (the capacity is cut by edgeCut per second of the
// reports). While every signal is quiet
// (below half its threshold), a law that sheds creeps the capacity up
// (creepRate), so that it settles between half the threshold and the
// threshold rather than below, and an idle service is probed fast
// (probeRate), as is a quiet one whose last measurement a drain's floor
// proved low (law.opened). A measurement after a probe is averaged with
// the last measurement, not with the probe (law.measured). A failure
// rate alone moves nothing: the table's level is the regime for a
// failing dependency, and shedding does not cure it. Nor does a latency
// the cuts did not lower (checkTail): within tailSlack of it, it is
// neither pressure nor warmth.
func (l *law) decide(ev evidence, now time.Time) {
	l.sized, l.offered, l.rates, l.priorities = ev.sized, ev.offered, ev.rates, slices.Sorted(maps.Keys(ev.offered))
	if !ev.fresh || !ev.sized {
		return
	}
	dt := min(now.Sub(l.decidedAt).Seconds(), 1)
	if l.decidedAt.IsZero() {
		dt = 0
	}
	// From here on the verdict is what the load explains (untail); the
	// tail's check and the table's step read it as it was.
	raw := ev.verdict
	ev.verdict = l.untail(raw, now)
	l.failLevel = ev.failLevel
	saturated := ev.warm && ev.demand > ev.success*(1+saturation)
	draining := ev.pressure && (ev.backlog >= 2 || ev.demand < ev.success*(1-saturation))
	// queued: with no capacity measured yet, a latency past twice its
	// threshold is a queue, and a service with a queue runs flat out, so
	// what it completed is its capacity, even though the clients did not
	// admit more than it completed: the queue can be before them, where
	// the requests wait for a saturated core (the kernel's socket buffers,
	// the goroutines not yet run), and only a latency timed from the proxy
	// in front shows it (the client's WithRequestStart). Read as no
	// measurement, the table's rule took the level to Emergency for its
	// 10 s dwell at the first report of a 3x step, admitting 15% of the
	// capacity (degbench overload, cpu3x).
	queued := !l.known && ev.pressure && ev.backlog >= 2 && ev.success > 0
	// long says the fresh evidence covers enough time to probe fast on:
	// in a quarter second a service at 95% of its capacity often has no
	// queue at all, and a probe of probeRate from there overshoots
	// (measured: two 11% probes a minute, each a second of late answers
	// at 3x). A shorter span probes at creepRate.
	long := ev.seconds >= minRateSpan.Seconds()
	capBefore := l.capacity
	switch {
	case saturated && l.known && !long:
		// Saturated again, over a short span: a saturated core completes
		// in bursts (measured on one core: 0 completions in 0.4 s, then
		// 414/s for 0.34 s), so what it completed is read over the recent
		// reports when they were saturated too (recentCounts), and the
		// average moves by at most shortCut down and probeReach up.
		measured := ev.success
		if ev.recent > 0 {
			measured = ev.recent
		}
		base := l.tested(measured)
		l.capacity = min(max((base+measured)/2, base*(1-shortCut)), base*(1+probeReach))
		l.ceiling, l.overAt = l.capacity, now
	case saturated && l.known:
		// Saturated again: average the measurement in, against noise and
		// against a span that began before the saturation did; it
		// completed ev.success, so the capacity is at least that.
		base := l.tested(ev.success)
		l.capacity = max(ev.success, (base+ev.success)/2)
		l.ceiling, l.overAt = l.capacity, now
	case saturated:
		c := max(ev.success, ev.completed)
		l.capacity, l.ceiling, l.known, l.overAt = c, c, true, now
	case queued:
		// A floor, not a measurement: the span may have begun before the
		// queue did, so the creep may take the estimate past it.
		l.capacity, l.ceiling, l.known, l.overAt = max(ev.success, ev.completed), math.Inf(1), true, now
	case !l.known:
	case draining:
		// A queue draining runs the service flat out: what it completes is
		// a floor of the capacity. A floor over the last measurement
		// proves that measurement low, and the ceiling opens, as a
		// queue's does, until a measurement or the first warm report
		// closes it (below): the measurement was read while a flood
		// starved the host, and its ceiling held the creep at the floor.
		// (In degbench overload's step10x, measured at 546/s and 490/s,
		// then a drain completing 697/s: the estimate stayed at 697/s for
		// 6 s with the service quiet, the band below Severe at 0.20 where
		// 0.30 fits.) Only a report of minRateSpan or
		// more opens it, or a shorter one over it by more than shortCut, as
		// far as one short report may lower the estimate: a queue drains in
		// bursts, and a quarter second of one completed 805/s of an 800/s
		// service in spike12x, 6% over its ceiling; but a third of a second
		// completing 745/s over a ceiling of 483/s, where a short report of
		// the starved host had cut it, proved it low in step10x, and held as
		// the ceiling, the floor kept the band at 0.23-0.26 for 16 s.
		if ev.success > l.ceiling*(1+saturation) && (long || ev.success > l.ceiling*(1+shortCut)) {
			l.ceiling, l.opened = math.Inf(1), true
		}
		l.capacity, l.overAt = max(l.capacity, ev.success), now
		l.ceiling = max(l.ceiling, l.capacity)
	case ev.pressure && ev.admitted < l.target*(1-2*edgeCut):
		l.overAt = now // a latency the load cannot explain: the capacity stands
	case ev.pressure:
		l.capacity, l.overAt = min(l.capacity, ev.admitted/headroom)*(1-edgeCut*min(ev.seconds, 1)), now
	case ev.over:
		// A failure rate alone: the capacity stands (the table's level is
		// the regime for a failing dependency).
	case ev.idle || l.opened && ev.quiet:
		// Idle, or quiet with the ceiling a drain's floor opened (the last
		// measurement proven low): probed, from what it carried when that
		// is more than the estimate. (Read as quiet, a service the flood
		// of degbench overload's step10x kept at a p99 of 40-50 ms, never
		// idle, crept at 2% a second from 559/s to 800/s in 10 s; and an
		// idle report completing more than the estimate raised it only to
		// that, no probe.)
		rate := probeRate
		if !long {
			rate = creepRate
		}
		l.capacity = max(l.capacity, ev.success, min(l.capacity*(1+rate*dt), l.reach(ev)))
		l.ceiling = max(l.ceiling, l.capacity)
	case ev.success > l.capacity:
		l.capacity = ev.success // it carried this much without overload
		l.ceiling = max(l.ceiling, l.capacity)
	case l.level > 0:
		// Shedding without an overload: back to the capacity last measured
		// (after an edge cut), and past it only probeAfter after the last
		// overload. Near its capacity a service's signals are noisy, and a
		// quiet reading is often the luck of a short queue.
		limit := l.ceiling
		if now.Sub(l.overAt) >= probeAfter {
			limit = max(limit, l.reach(ev))
		}
		l.capacity = max(l.capacity, min(l.capacity*(1+creepRate*dt), limit))
		l.ceiling = max(l.ceiling, l.capacity)
	}
	if l.opened && (!math.IsInf(l.ceiling, 1) || ev.warm && !draining) {
		// Opened by a drain's floor: closed by the next measurement, or
		// at the estimate the first warm report finds, the service near
		// its capacity. (Left open, the creep walked the estimate from
		// 805/s to about 915/s in degbench overload's spike12x, no
		// saturation measured on the way, until a queue put every answer
		// past the SLO for 3 s.)
		l.ceiling, l.opened = min(l.ceiling, l.capacity), false
	}
	if saturated || queued {
		l.measured = l.capacity
	}
	l.checkTail(raw, capBefore, saturated && long, now)
	l.target = headroom * l.capacity
	if l.known && (l.capacity >= l.peak || now.Sub(l.peakAt) >= peakFor) {
		l.peak, l.peakAt = l.capacity, now
	}
	// standing: a queue past twice the threshold that the clients keep
	// full, admitting about what the service completes, is not draining,
	// and the capacity that stands under it keeps it standing; it is
	// drained as a saturation's queue is. It takes two fresh decisions in
	// a row, since the first report after a drain still carries the tail
	// of the queue it drained. (Read as draining, in degbench overload's
	// cpu3x, one run in about ten: a hiccup of the core left a queue of
	// 200-400 ms, the band stayed admitted at 200/s of a 200/s core, and
	// for 5 s every answer, the top class's too, came past the SLO.)
	full := l.known && !saturated && ev.pressure && ev.backlog >= 2 && l.drain == 1 && ev.demand >= ev.success*(1-saturation)
	standing := full && l.full
	l.full = full
	switch {
	case saturated || queued || standing:
		l.startDrain(ev, now)
	case l.drain < 1 && (!ev.pressure || ev.latencyJudged && ev.backlog < 2 && ev.median < ev.threshold/4):
		// Drained before its time: requests admitted after the drain began
		// came out within the lowest latency threshold, so the queue they
		// waited in is shorter than that. (Ended by its expected time
		// alone, the drain after cpu3x's step shed the band for 4 s, 2 s
		// after the answers were on time again: 65/s of a 200/s core idle.
		// Ended at twice the threshold, the noise of a busy queue, it
		// readmitted the band into a queue still behind: the simulation's
		// least stream at 3x served 97.0% of the top class.) Or their
		// median came out within a quarter of the threshold while their
		// tail did not pass twice it: a queue delays every request, so a
		// p99 over the threshold with the median on time is a tail, not
		// a queue. (Ended only by a report without pressure, cpu3x's
		// drain, whose p99 the core's scheduler keeps over 100 ms, shed
		// the band for 2.4 s after the answers were on time again.)
		l.drain, l.drainUntil, l.drainFrom = 1, now, time.Time{}
	}
	if !now.Before(l.drainUntil) {
		l.drain = 1
	}
	l.decidedAt, l.judged = now, raw
}

// untail forgets a tail that is gone (the latency quiet, another signal
// over it, or the tail a minute old, to be checked again) and returns v as
// the load explains it: a latency within tailSlack of a tail the cuts did
// not lower (checkTail) is neither pressure, nor over, nor warm. (Read as
// warm, it made every short report whose completions lagged what was
// admitted by 3% a saturation, and the estimate fell with them.)
func (l *law) untail(v verdict, now time.Time) verdict {
	if v.quiet || v.pressure && !v.latencyOnly || now.Sub(l.tailAt) >= probeAfter {
		l.tail = 0
	}
	if l.tail == 0 || !v.latencyJudged || v.latency > l.tail*tailSlack {
		return v
	}
	if v.pressure && v.latencyOnly {
		v.pressure = false
		v.over = v.errorOver
	}
	v.warm = v.warmOther
	return v
}

// checkTail checks that the latency falls as the capacity estimate does
// while the latency alone is over its threshold and no queue is past
// twice the threshold: every tailProof the estimate has fallen since
// before (edge cuts, and saturations over reports shorter than
// minRateSpan, which a latency that is always warm makes of the noise of
// a quarter second's counts), the latency must have fallen by tailFall.
// If it did not, it is a tail the load does not cause (tailProof), and
// the estimate goes back to before. A saturation measured over a longer
// report is a measurement, and the check starts again after it.
func (l *law) checkTail(ev verdict, before float64, measured bool, now time.Time) {
	switch {
	case measured || ev.quiet || ev.backlog >= 2 || ev.pressure && !ev.latencyOnly:
		l.edge = false
	case !l.known || !ev.pressure || !ev.latencyJudged:
	case !l.edge:
		l.edge, l.edgeCapacity, l.edgeLatency = true, before, ev.latency
	case l.capacity > l.edgeCapacity*(1-tailProof):
	case ev.latency >= l.edgeLatency*(1-tailFall):
		l.tail, l.tailAt = max(ev.latency, l.edgeLatency), now
		l.capacity, l.edge = max(l.capacity, l.edgeCapacity), false
	default:
		l.edgeCapacity, l.edgeLatency = l.capacity, ev.latency
	}
}

// tested is the estimate a new measurement is averaged with: the last
// measurement's, or what this one completed (at most the estimate) when
// that is more, so that what a probe or the creep added since, never
// tested, does not hold the estimate over what the service carries.
func (l *law) tested(completed float64) float64 {
	if l.capacity <= l.measured {
		return l.capacity
	}
	return max(l.measured, min(completed, l.capacity))
}

// reach is how far the probe of an idle service (or a quiet one whose
// ceiling is open) may take the capacity estimate: a step above what the
// service completed, or to the target that readmits a band shed whole,
// so that a level that sheds most of the load cannot claim more than it
// tested, and a band is never stuck shed below its readmission point.
// The readmission point is not stepped past: a band shed whole leaves the
// service idle, and a probe a step past the point, with the point read
// from a short report's step, took the estimate from 800/s, measured a
// second before, to 930/s in degbench overload's square wave, and
// readmitted the band at 0.334 where about 0.2 fitted: two seconds of
// answers past the SLO (TestLawProbesNoFurtherThanTheReadmission).
func (l *law) reach(ev evidence) float64 {
	return max(ev.success*(1+probeReach), l.readmit) / headroom
}

// startDrain starts the drain of the queue a saturation left: a latency
// somewhat over its threshold is the noise of a busy queue, and the
// capacity measurement handles it; one past twice the threshold is a
// backlog, which drains faster the less is admitted (at most maxDrain
// times less, and no less than the level's threshold admits). sizeDrain
// sets its length once the level is known.
func (l *law) startDrain(ev evidence, now time.Time) {
	l.drain = 1 / min(max(ev.backlog/2, 1), maxDrain)
	if l.drain == 1 {
		return
	}
	l.drainFrom, l.drainFor = now, ev.backlog*ev.threshold/1000
	l.drainUntil = now.Add(maxDrainFor) // until sizeDrain knows the level
}

// sizeDrain sets the length of a drain just started, at a level whose
// threshold admits floor: the queue holds about latency x capacity
// requests and drains at the capacity not admitted. (Sized before the
// level moved, a saturation that took the level from Normal to Moderate
// was drained as if Normal's empty floor applied: 0.9 s where Moderate's
// 76% needed 2 s, and the band readmitted into a queue still 200 ms
// behind.)
func (l *law) sizeDrain(floor float64) {
	if l.drainFrom.IsZero() {
		return
	}
	admitted := max(floor, l.drain*l.target)
	if admitted >= l.capacity {
		l.drain = 1
	} else {
		secs := min(l.drainFor*l.capacity/(l.capacity-admitted), maxDrainFor.Seconds())
		l.drainUntil = l.drainFrom.Add(time.Duration(secs * float64(time.Second)))
	}
	l.drainFrom = time.Time{}
}

// Capacity is the admission law's capacity estimate as a restart keeps it
// (Saved.Capacity, state.json's "capacity").
type Capacity struct {
	// PerSecond is the completions per second the service was measured to
	// carry.
	PerSecond float64 `json:"per_second"`
	// OverAt is when fresh evidence last said the service was overloaded:
	// the creep takes the estimate past PerSecond only probeAfter after it.
	OverAt time.Time `json:"over_at,omitzero"`
	// At is when fresh evidence last updated the estimate: a restart
	// keeps it for capacityKeep after that.
	At time.Time `json:"at"`
}

// capacityKeep is how long after the last evidence a saved capacity
// estimate is restored: a daemon restarted within it comes back to the
// service it left, mid-overload perhaps, and one down for longer may find
// it redeployed or rescaled, so it measures again. (Without the estimate,
// a restart in a 3x overload published the level without partial, shed
// the whole band while its window warmed, then stepped down into the
// overload and back up: two level changes, and the simulation's goodput
// over the next 30 s fell from 93.5% to 67.4%, the top class's within the
// SLO from 99.95% to 82.5%: TestLawKeepsItsCapacityAcrossARestart.)
const capacityKeep = 10 * time.Minute

// maxCapacity bounds a restored estimate: more is not a rate of requests.
const maxCapacity = 1e12

// saved is the law's estimate for Saved, nil before one is measured (or
// when what was measured is no rate: a saturation that completed nothing).
// Until the law decides again, a restored estimate keeps its own time, so
// that a daemon restarting twice in a row keeps it too.
func (l *law) saved() *Capacity {
	at := l.savedAt()
	if at.IsZero() {
		return nil
	}
	return &Capacity{PerSecond: l.capacity, OverAt: l.overAt.UTC(), At: at}
}

// savedAt is the time saved gives the estimate, zero when it saves none.
func (l *law) savedAt() time.Time {
	if !l.known || !(l.capacity > 0) {
		return time.Time{}
	}
	if l.decidedAt.IsZero() {
		return l.restoredAt.UTC()
	}
	return l.decidedAt.UTC()
}

// restore adopts a saved estimate at a start now, or says why not: one
// older than capacityKeep is let go (the law measures again; nil error),
// and one that is not a rate is refused. The creep's ceiling is the
// estimate itself, so a restart does not take the admission past what
// was measured.
func (l *law) restore(c Capacity, now time.Time) error {
	switch {
	case !(c.PerSecond > 0 && c.PerSecond <= maxCapacity):
		return fmt.Errorf("the saved capacity estimate %g/s is not a rate in (0, %g]: measured again", c.PerSecond, float64(maxCapacity))
	case c.At.IsZero() || now.Sub(c.At) > capacityKeep:
		return nil
	}
	l.capacity, l.ceiling, l.measured, l.known = c.PerSecond, c.PerSecond, c.PerSecond, true
	l.target = headroom * l.capacity
	l.peak, l.peakAt = l.capacity, now
	l.overAt, l.restoredAt = clampPast(c.OverAt, now), clampPast(c.At, now)
	// The admission changed at the start (partial null): a report whose
	// interval began before it is not evidence of what is published now.
	l.changedAt = now
	return nil
}

// maxDrainFor bounds a drain's length.
const maxDrainFor = 5 * time.Second

// verdictRecent is how long the last fresh verdict on the load stands for
// evaluations without fresh reports of their own.
const verdictRecent = 3 * time.Second

// underloaded reports whether recent fresh evidence says the service is
// not overloaded.
func (l *law) underloaded(now time.Time) bool {
	return !l.decidedAt.IsZero() && !l.judged.over && now.Sub(l.decidedAt) <= verdictRecent
}

// admittedFrom is the offered load at priorities >= threshold.
func (l *law) admittedFrom(threshold int) float64 {
	return l.offeredIn(threshold, math.MaxInt)
}

// offeredIn is the offered load at priorities in [lo, hi), as the level
// reads it: exactly 0 when none is offered there.
func (l *law) offeredIn(lo, hi int) float64 {
	return l.sumIn(l.offered, lo, hi)
}

// sumIn is the sum of m, a rate by priority, at priorities in [lo, hi), in
// the order of l.priorities.
func (l *law) sumIn(m map[int]float64, lo, hi int) float64 {
	var sum float64
	for _, p := range l.priorities {
		if p >= lo && p < hi {
			sum += m[p]
		}
	}
	return sum
}

// steadyFrom is the live reporters' steady offered load at priorities >=
// threshold.
func (l *law) steadyFrom(threshold int) float64 {
	var sum float64
	for _, id := range l.ids {
		rep := l.reporters[id]
		for _, p := range rep.keys {
			if p >= threshold {
				sum += rep.steady(p)
			}
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
// stepMargin), the target of the highest capacity measured within peakFor
// (law.peak). From a level that sheds part of the load it reads the
// offered load halfway between its average and the last report's rate
// (reporter.steady), not the higher of the two (which the fraction follows): a
// level is held for its dwell, and on a saturated core the requests reach
// the middleware in bursts, as its goroutines get the core. (A report
// offering 900/s of a steady 600/s took the level from Major, the level
// that fits, to Severe for its 10 s dwell in degbench overload's cpu3x;
// the average alone lagged a step by 2 s, at Moderate admitting 300/s of
// a 200/s core, every answer late.) From a level that sheds nothing yet it
// reads the higher (reporter.levelRate), so that a step of the load is
// read at once. It never reads a short report's step, which only the
// fraction reads (reporter.jump).
func (l *law) fitLevel(t *Table, from int) int {
	load := l.admittedFrom
	if l.offeredIn(0, t.Level(from).PriorityThreshold) > 0 {
		load = l.steadyFrom
	}
	target := headroom * l.peak
	for i := range t.Len() {
		if !l.known || load(t.Level(i).PriorityThreshold) <= target*(1+stepMargin) {
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
		// reports say the service is not overloaded (the window lags), and
		// as the law reads the signals (tableStep).
		if l.underloaded(now) {
			return hold()
		}
		to, why := l.tableStep(t, s, mv, now)
		if to == mv.From {
			return hold()
		}
		if to < mv.To {
			a.Level = to
			mv.To, mv.Reason = to, why
		}
		return a, mv
	}
	if mv.To > mv.From {
		to := min(mv.To, max(mv.From, l.fitLevel(t, mv.From)))
		if f, why := l.failureStep(t, s, mv); f > to {
			a.Level = f
			mv.To, mv.Reason = f, why
			return a, mv
		}
		if to == mv.From {
			return hold()
		}
		if to < mv.To {
			a.Level = to
			mv.To, mv.Reason = to, l.stepReason(t, s, to, ev)
		}
		return a, mv
	}
	band := l.offeredIn(t.Level(mv.To).PriorityThreshold, t.Level(mv.From).PriorityThreshold)
	atTop := band <= 0 || !l.known || l.failLevel >= mv.From || l.partial != nil && l.partial.Fraction >= fractionTop
	if !atTop || !l.fits(t, mv.To, 1-stepMargin) {
		return hold()
	}
	return a, mv
}

// tableStep is the most severe level of the move from mv.From to mv.To
// whose thresholds a signal exceeds in s as the law reads it, and that
// signal; mv.From if none does. It reads no CPU (judgeCPU: a core in use
// is not an overload; without a capacity, a CPU step at the first health
// check after a 3x step took a CPU-bound service to Severe, past Major,
// the level that fit, for 14 s). It reads the latency the law last judged
// in fresh reports, when it did within verdictRecent, for the window's:
// the window holds the reports received since the last step that began
// before it, and a step up rests on evidence of the previous one. (In
// degbench overload's cpu3x the first report after the step, 198 ms
// against 100 ms, took the level to Minor; at the next health check a
// report the client cut short at the change put the window's p99 over
// Emergency's threshold, and the level went there, the capacity
// unmeasured, for its 10 s dwell, admitting the top class alone.) For
// the same reason, after a first step up, the window's error rate steps
// it no further than the level whose threshold the failure ratio of those
// fresh reports exceeds too, as failureStep does once a capacity is
// known; the first step after a threshold is crossed happens at once, on
// the window (DESIGN.md, "Graduated mode, precisely"). (Read alone, the
// queue's timeouts at cpu3x's step, 7.97%, 23.44% and 25.55% on reports
// that began before the step to Minor, took the level to Severe in
// 1.3 s, past Major, the level that fit, and its dwell held the admission
// to 110/s of a 195/s core for 10 s.)
func (l *law) tableStep(t *Table, s Sample, mv Move, now time.Time) (int, string) {
	_, cpu := s.Value(CPU)
	_, lat := s.Value(Latency)
	_, failing := s.Value(ErrorRate)
	latency, fresh := l.freshLatency(now)
	// After a first step, the next rests on the failures of fresh reports
	// too; the first step after a threshold is crossed happens at once.
	failing = failing && mv.From > 0 && l.judgedRecently(now)
	fresh = fresh && lat
	if !cpu && !fresh && !failing {
		return mv.To, mv.Reason
	}
	failTo, failWhy := mv.From, ""
	if failing {
		failTo, failWhy = errorStep(t, s, mv, l.judged.errorLevel)
	}
	s = s.Clone()
	delete(s.Values, CPU)
	if fresh {
		s.Values[Latency] = latency
	}
	if failing {
		delete(s.Values, ErrorRate)
	}
	for i := mv.To; i > failTo; i-- {
		if tr, ok := t.triggerAt(s, i); ok {
			return i, tr.String()
		}
	}
	return failTo, failWhy
}

// recoverOnFresh is the table rule's step down (Next) at a health check
// with the latency the law last judged in fresh reports in place of the
// window's, when the level held and that latency may be what holds it:
// judged within verdictRecent, with no pressure, and under the window's.
// The window holds the answers of the last error_rate_window, and a burst
// of late answers near the end of an overload kept its p99 over the
// level's threshold for that long after the load had gone. (In degbench
// overload's cpu3x, four runs in 36: a hiccup of the core made 21-166
// answers late in the seconds before the 3x phase ended, and with the
// load down to 0.5x and the band admitted at 0.95, Major held until the
// window's 10 s had passed, shedding 40% of the requests of a service
// half idle; with the default 1m window, a minute.) The step
// still goes one level, after the dwell and its jitter, and limit then
// holds it until the band is admitted at the top and the level below
// fits. Its reason names both latencies. ok is false when there is no
// such step.
func (l *law) recoverOnFresh(from Auto, c Config, in Input) (down Auto, mv Move, ok bool) {
	window, lat := in.Sample.Value(Latency)
	latency, fresh := l.freshLatency(in.At)
	if !lat || !fresh || from.Level == 0 || l.judged.pressure || latency >= window {
		return from, mv, false
	}
	s := in.Sample.Clone()
	s.Values[Latency] = latency
	delete(s.Recovery, Latency)
	down, mv = Next(from, c.Table, s, in.At, c.Rules)
	if mv.To >= mv.From {
		return from, mv, false
	}
	label := "latency " + QuantileLabel(c.Table.LatencyQuantile())
	mv.Reason += fmt.Sprintf("; %s %.0fms in fresh reports (%.0fms over the window)", label, latency, window)
	return down, mv, true
}

// freshLatency is the latency the law last judged in fresh reports, when
// it judged one within verdictRecent: it stands, for the table's rule, in
// place of the window's, which holds older answers (tableStep,
// recoverOnFresh, ruleSample).
func (l *law) freshLatency(now time.Time) (float64, bool) {
	return l.judged.latency, l.judged.latencyJudged && l.judgedRecently(now)
}

// judgedRecently says the law judged fresh reports within verdictRecent of now.
func (l *law) judgedRecently(now time.Time) bool {
	return !l.decidedAt.IsZero() && now.Sub(l.decidedAt) <= verdictRecent
}

// ruleSample is the sample the table's rule reads: s, but while the
// window's latency is one the law overruled (recoverOnFresh) and no fresh
// verdict stands (verdictRecent), without the latency. The window still
// holds the late answers the step down overruled, and read again when the
// clients fell silent they took the level from Normal to Emergency on
// answers 20 s old (a driver on the real binary that stopped reporting
// after the recovery). While reports come, the window is read as it is:
// new answers come only with them, and a fresh verdict judges them. The
// overruling ends once the window's latency is under its lowest threshold
// (those answers are gone), or a fresh verdict says the service is under
// pressure again.
func (l *law) ruleSample(t *Table, s Sample, now time.Time) Sample {
	if !l.overruled {
		return s
	}
	v, ok := s.Value(Latency)
	th, _ := t.lowestThreshold(Latency)
	_, fresh := l.freshLatency(now)
	if !ok || v <= th || fresh && l.judged.pressure {
		l.overruled = false
		return s
	}
	if fresh {
		return s
	}
	s = s.Clone()
	delete(s.Values, Latency)
	delete(s.Recovery, Latency)
	s.States[Latency] = Absent
	return s
}

// failureStep is the most severe level of the move from mv.From to mv.To,
// up to the level the fresh failures call for (failLevel), whose error
// rate threshold the window's error rate exceeds too, and that trigger;
// mv.From if none. (Capped by the level the load fits, a dependency's
// 30% failures after any overload the daemon had measured left the level
// at Normal: the load fitted the capacity, so no step up was needed.)
func (l *law) failureStep(t *Table, s Sample, mv Move) (int, string) {
	return errorStep(t, s, mv, l.failLevel)
}

// errorStep is the most severe level of the move from mv.From to mv.To,
// and at most upTo, whose error rate threshold the window's error rate in
// s exceeds, and that trigger; mv.From if none does.
func errorStep(t *Table, s Sample, mv Move, upTo int) (int, string) {
	e, ok := s.Value(ErrorRate)
	if !ok {
		return mv.From, ""
	}
	only := s.Clone()
	only.Values = map[Signal]float64{ErrorRate: e}
	for i := min(mv.To, upTo); i > mv.From; i-- {
		if tr, ok := t.triggerAt(only, i); ok {
			return i, tr.String()
		}
	}
	return mv.From, ""
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
// It notes the target that would readmit a band it sheds whole
// (law.readmit).
func (l *law) partialFor(t *Table, i int) *Partial {
	if i <= 0 || !l.sized {
		return nil
	}
	from, to := t.Level(i-1).PriorityThreshold, t.Level(i).PriorityThreshold
	band := l.sumIn(l.rates, from, to)
	if band <= 0 {
		return nil
	}
	if !l.known || l.failLevel >= i {
		return nil // no capacity measured, or failures the load does not explain: the table's level is exact
	}
	l.readmit, l.band, l.floor = 0, band, l.sumIn(l.rates, to, math.MaxInt)
	l.sizeDrain(l.floor)
	f := (l.target*min(l.drain, 1) - l.floor) / band
	switch {
	case math.IsNaN(f) || math.IsInf(band, 0):
		// Rates out of any range (the API bounds what a report may say,
		// and a recorded timeline may hold what an older one let in): a
		// state document cannot carry NaN, so the band is shed whole.
		return nil
	case f < fractionLow:
		l.readmit = l.admittedFrom(to) + l.offeredIn(from, to)*(fractionLow+fractionStep)
		return nil
	case f > fractionTop:
		f = fractionTop
	}
	return &Partial{From: from, Fraction: math.Round(f*1000) / 1000}
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
		case old != nil && p != nil && math.Abs(p.Fraction-old.Fraction)*l.band < fractionStep*l.target && p.Fraction < fractionTop:
			return
		}
	}
	if !samePartial(old, p) {
		l.partialAt, l.changedAt = now, now
	}
	l.partial, l.level = p, level
}
