package levels

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"time"
)

// reporterTTL is how long a reporter's last account of its offered load
// counts after it arrived, at least: a client that stopped reporting
// stops counting. A reporter whose interval is longer counts for three of
// its intervals, up to maxReporterTTL: one report claiming an hour held
// the level up for three hours after the load had gone.
const (
	reporterTTL    = 3 * time.Second
	maxReporterTTL = time.Minute
)

// maxReporters bounds the reporters the law remembers; beyond it, the
// least recently heard one is forgotten (law.overflowed counts them), and
// the offered load reads low while more report.
const maxReporters = 256

// offeredTau is the time constant of a reporter's offered load: its
// reports are averaged with weights decaying by e over offeredTau, so that
// the short interval a client reports when the state changes is not read
// as the rate.
const offeredTau = 2 * time.Second

// reporter is what the law remembers of one client: the requests it was
// offered by priority and the time they cover, both decayed (offeredTau),
// and its last report's rates when that report covered at least
// minRateSpan. It is a value: a new report makes a new one.
type reporter struct {
	at      time.Time
	ttl     time.Duration
	counts  map[int]float64
	seconds float64
	last    map[int]float64
	// stepped are counts decayed as counts are, but started again from a
	// step up of the load (stepUp): rate reads them, steady reads counts.
	stepped map[int]float64
	// up says, by priority, that the last report long enough to read a
	// rate from was a step up from the stepped average (stepUp).
	up map[int]bool
	// jump is, by priority, the rate of a report too short to read a rate
	// from (minJudgeSpan to minRateSpan) whose count was a step up from the
	// stepped average, read over the longer of its span and its arrival;
	// it stands until the next report long enough to read a rate from.
	// Only the fraction reads it (rate), never the level (levelRate,
	// steady). After a step the reports are short (each change of the
	// admission cuts the clients' intervals, and the law changes it every
	// partialEvery while it follows the step), and the average lags for
	// seconds: read from it, in degbench overload's step10x, a band of
	// 1,200/s counted 700/s and was admitted at 0.61 where 0.30 fitted, a
	// second of answers past the SLO, in 6 runs of 46. Read by the level
	// too, a short report's burst (the top class at 1,610/s of 400, over
	// an arrival of 0.07 s) took the level to Emergency for its dwell.
	jump map[int]float64
	// keys are counts' priorities in order: the law sums in it (observe).
	keys []int
}

// minRateSpan is the shortest report whose rates the law reads on their
// own: a client's interval cut short by a change of state (250ms) is too
// noisy. minJudgeSpan is the shortest span of fresh reports the law judges.
const (
	minRateSpan  = 500 * time.Millisecond
	minJudgeSpan = 200 * time.Millisecond
)

// with is the reporter after a report of counts over seconds, whose
// requests arrived over arrival (Admission.arrival: shorter than seconds
// while a queue before the client grew, longer while one drained). The
// average decays by seconds, the time gone by, and reads the counts as
// offered over arrival: the requests of a queue that grows before the
// client reach it at the rate the service lets them through, not at the
// rate they come. (In degbench overload's cpu3x, the first report after
// the step to 600/s counted 178/s, what got through the saturated core
// to the middleware, and the level stepped to Moderate, which admits
// 300/s of a 196/s core, for the second until the next report.)
func (r reporter) with(at time.Time, ttl time.Duration, counts map[int]int64, seconds, arrival float64) reporter {
	w := math.Exp(-seconds / offeredTau.Seconds())
	size := max(len(r.counts), len(counts))
	n := reporter{at: at, ttl: ttl, counts: make(map[int]float64, size), stepped: make(map[int]float64, size), seconds: r.seconds*w + arrival, last: r.last, jump: r.jump}
	for p, c := range r.counts {
		n.counts[p] = c * w
	}
	for p, c := range r.stepped {
		n.stepped[p] = c * w
	}
	long := seconds >= minRateSpan.Seconds()
	if long {
		n.up = make(map[int]bool, len(counts))
	}
	jumped := false
	for p, c := range counts {
		n.counts[p] += float64(c)
		n.stepped[p] += float64(c)
		switch {
		case r.seconds == 0 || seconds < minJudgeSpan.Seconds():
			continue
		case !long:
			if span := max(seconds, arrival); stepUp(float64(c), r.stepped[p]/r.seconds*span) {
				if !jumped { // n.jump is r's until here: copied, never changed in place
					n.jump, jumped = make(map[int]float64, len(r.jump)+1), true
					maps.Copy(n.jump, r.jump)
				}
				n.jump[p] = float64(c) / span
			}
			continue
		}
		expected := r.stepped[p] / r.seconds * arrival
		switch {
		case stepUp(float64(c), expected):
			n.up[p] = true
			if r.up[p] {
				n.stepped[p] = float64(c) * n.seconds / arrival
			}
		case r.up[p] && stepDown(float64(c), expected):
			// As far down right after a step up: that report was the
			// burst a queue before the middleware let through, and this
			// one is the load (stepUp).
			n.stepped[p] = float64(c) * n.seconds / arrival
		}
	}
	n.prune()
	n.keys = slices.Sorted(maps.Keys(n.counts))
	if long {
		n.last, n.jump = make(map[int]float64, len(counts)), nil
		for p, c := range counts {
			n.last[p] = float64(c) / arrival
		}
	} else {
		n.up = r.up
	}
	return n
}

// minKept is the least decayed count of a priority a reporter keeps, and
// maxKept the most priorities it keeps, twice what one report may offer
// (the API's 64). Priorities a client no longer offers were kept for as
// long as it reported, decayed but never dropped: one reporter offering 64
// new priorities a report held 128,000 after 2,000 reports, and each
// evaluation walked them all (2,000 evaluations took 62 s).
const (
	minKept = 0.01
	maxKept = 128
)

// prune drops the priorities whose decayed count fell below minKept, then
// all but the maxKept with the most counts (of equal counts, the lower
// priorities are kept).
func (r *reporter) prune() {
	for p, c := range r.counts {
		if c < minKept {
			delete(r.counts, p)
			delete(r.stepped, p)
		}
	}
	if len(r.counts) <= maxKept {
		return
	}
	keys := slices.SortedFunc(maps.Keys(r.counts), func(a, b int) int {
		return cmp.Or(cmp.Compare(r.counts[b], r.counts[a]), cmp.Compare(a, b))
	})
	for _, p := range keys[maxKept:] {
		delete(r.counts, p)
		delete(r.stepped, p)
	}
}

// stepZ is how many standard deviations of a Poisson count a report's
// count must exceed what the average expected by to be a step of the
// load, not its noise.
const stepZ = 3

// stepUp reports whether count, over a report long enough to read a rate
// from, is a step up from expected, what the decayed average predicted
// for it. Two such reports in a row are a step of the load, and the
// average the fraction reads (reporter.stepped) starts again from the
// second (reporter.with): decayed over offeredTau it lagged a step up for
// seconds, and the fraction of a band sized from it admitted too much.
// One alone is a burst (on a saturated core the requests reach the
// middleware in bursts), which the average keeps weighing
// (TestLawStepsUpOnTheAverageOfferedLoad). The level reads the average
// that never starts again (reporter.steady): a level is held for its
// dwell, and two bursts in a row, read as a step, took a 10x step one
// level past the one that fits, to Emergency, for 9 s in one run of five.
// (Four seconds after the square wave's rise to 1.6x, the average still
// read Moderate's floor at 588/s of 640; with the last report low by
// chance too, the band was admitted at 0.268 where 0.195 fitted, the
// service took 811/s of its 800 for a second, and the queue cost 3 s of
// answers past the SLO.) A report as far below the average right after
// a step up starts it again too: on a saturated stack the requests of a
// step reach the middleware late, then all at once, and the average
// started from that burst read the floor of Severe at 587/s of a real
// 400/s in degbench overload's step10x, so the band was admitted at 0.10
// to 0.19 where 0.30 fitted, for 5 s as the burst decayed out of it.
func stepUp(count, expected float64) bool {
	return count > expected+stepZ*math.Sqrt(max(expected, 1))
}

// stepDown reports whether count is as far below expected as stepUp's
// are above it.
func stepDown(count, expected float64) bool {
	return count < expected-stepZ*math.Sqrt(max(expected, 1))
}

// rate is the reporter's offered load at priority p, as the fraction
// reads it: the higher of levelRate and a short report's step (jump), so
// that a load that just grew is read at once (the law sheds more, never
// less, while the average catches up).
func (r reporter) rate(p int) float64 {
	return max(r.levelRate(p), r.jump[p])
}

// levelRate is the reporter's offered load at priority p as a level that
// sheds nothing yet reads it (fitLevel): the higher of its stepped average
// and its last report's rate.
func (r reporter) levelRate(p int) float64 {
	return max(r.stepped[p]/r.seconds, r.last[p])
}

// steady is the reporter's offered load at priority p as the level reads
// it: halfway between its decayed average and the higher of that and its
// last report's rate, since a report's own rate can be a burst, and the
// average is never started again from one (fitLevel, stepUp).
func (r reporter) steady(p int) float64 {
	avg := r.counts[p] / r.seconds
	return (avg + max(avg, r.last[p])) / 2
}

// freshSpan bounds the fresh evidence the law accumulates: once the
// fresh reports cover more than it, they start again from the newest, so
// the law judges the last few seconds, not everything since its last
// change.
const freshSpan = 5 * time.Second

// evidence is what one evaluation's reports say.
type evidence struct {
	// offered is the live reporters' offered load, requests per second by
	// priority, as the level reads it (reporter.levelRate), and rates as
	// the fraction does (reporter.rate); sized reports whether there is
	// any, so that the law can size a step.
	offered, rates map[int]float64
	sized          bool
	// fresh reports whether the reports judged wholly after the last
	// change of the automatic admission (accumulated until there are
	// enough to judge: min_throughput) say something of the load; the
	// rest is read from them only.
	fresh bool
	// The verdict on the load: over says the service is overloaded, a
	// fresh latency or failure ratio above the lowest threshold of its
	// signal, or a sampled signal (cpu, memory, pressure, custom) above its
	// lowest threshold.
	verdict
	// success and admitted are the fresh reports' successes and
	// completions (successes and failures) per second, demand the requests
	// the clients admitted per second; seconds the time they cover.
	success, admitted, demand float64
	seconds                   float64
	// recent is the successes per second of the last second or so of
	// reports, fresh or not, over the part of it that was saturated when
	// that covers at least minRateSpan; 0 otherwise (recentCounts).
	recent float64
	// completed is the most successes per second of a half of the last
	// second or so of reports, fresh or not, that covers at least
	// minRateSpan (recentCounts.completedRate): the service carried that
	// much, so a first measurement of its capacity is no less.
	completed float64
}

// observe takes an evaluation's reports into the reporters and returns
// what they say. It replaces the reporters' map rather than changing it.
func (l *law) observe(c Config, in Input) evidence {
	var ev evidence
	fresh := l.fresh
	if fresh.start.Before(l.changedAt) {
		fresh = freshCounts{} // evidence of the state before the last change
	}
	reporters := l.reporters
	copied := false
	for _, r := range in.Reports {
		a := r.Admission
		if a == nil || !(a.Seconds > 0) {
			continue
		}
		if !copied {
			reporters, copied = maps.Clone(l.reporters), true
			if reporters == nil {
				reporters = map[string]reporter{}
			}
		}
		span := time.Duration(a.Seconds * float64(time.Second))
		reporters[a.Reporter] = reporters[a.Reporter].with(r.At, min(max(reporterTTL, 3*span), maxReporterTTL), a.Offered, a.Seconds, a.arrival())
		start := r.At.Add(-span)
		l.recent = l.recent.with(r, start, a.Reporter, a.Seconds)
		if !start.Before(l.changedAt) {
			if !fresh.start.IsZero() && r.At.Sub(fresh.start) > freshSpan {
				fresh = freshCounts{}
			}
			fresh.add(r, start, a.Reporter, a.Seconds)
		}
	}
	if copied || len(reporters) > 0 {
		reporters = l.forget(reporters, copied, in.At)
	}
	// Summed in the order of the reporters' ids and priorities: a float
	// sum in a map's order differs in its last bits from run to run, and
	// replay runs this machine again on the recorded inputs. (With no
	// offered load below a level's threshold, the band's load came out as
	// 0 or 1e-13 by the order of the sum, and the band was published as
	// admitted at 0.95 in one run and as none in another.) The ids are
	// sorted again when a report came or a reporter was forgotten.
	if copied || len(reporters) != len(l.reporters) || l.ids == nil {
		l.ids = slices.Sorted(maps.Keys(reporters))
	}
	l.reporters = reporters
	ev.offered, ev.rates = map[int]float64{}, map[int]float64{}
	var observed float64
	for _, id := range l.ids {
		rep := l.reporters[id]
		for _, p := range rep.keys {
			ev.offered[p] += rep.levelRate(p)
			ev.rates[p] += rep.rate(p)
			observed += rep.counts[p]
		}
	}
	ev.sized = observed > 0 && observed >= float64(c.Rules.MinThroughput)
	l.fresh = fresh
	if span := fresh.span(); span >= minJudgeSpan.Seconds() {
		ev.verdict = load(c, in.Sample, fresh)
		if ev.judged {
			ev.fresh = true
			ev.success, ev.admitted, ev.demand, ev.seconds = fresh.success/span, (fresh.success+fresh.failure)/span, fresh.demand/span, span
			ev.recent = l.recent.saturatedRate()
			ev.completed = l.recent.completedRate()
			l.fresh = freshCounts{} // judged: the next decision rests on new reports
		}
	}
	return ev
}

// forget drops the reporters not heard from within their ttl, and the
// least recently heard beyond maxReporters (of two heard at once, the
// lesser id). It copies the map before changing it unless copied says it
// already is a copy.
func (l *law) forget(reporters map[string]reporter, copied bool, now time.Time) map[string]reporter {
	drop := func(id string) {
		if !copied {
			reporters, copied = maps.Clone(reporters), true
		}
		delete(reporters, id)
	}
	for id, rep := range reporters {
		if now.Sub(rep.at) > rep.ttl {
			drop(id)
		}
	}
	for len(reporters) > maxReporters {
		l.overflowed++
		oldest, at := "", now
		for id, rep := range reporters {
			if oldest == "" || rep.at.Before(at) || rep.at.Equal(at) && id < oldest {
				oldest, at = id, rep.at
			}
		}
		drop(oldest)
	}
	return reporters
}

// freshCounts sums the fresh reports: those whose interval started after
// the last change of the automatic admission. It is a value: add replaces
// its map rather than changing it.
type freshCounts struct {
	start            time.Time // the earliest interval start
	success, failure float64
	demand           float64 // the requests the clients admitted
	latency          [NumLatencyBuckets]int64
	hasLatency       bool
	// seconds is the time each reporter's reports cover: the span of the
	// counts is the longest, since several clients report over the same
	// time.
	seconds map[string]float64
}

func (f *freshCounts) add(r Report, start time.Time, reporter string, seconds float64) {
	if f.start.IsZero() || start.Before(f.start) {
		f.start = start
	}
	f.success += float64(r.Success)
	f.failure += float64(r.Failure)
	f.demand += float64(r.Admission.Admitted)
	if len(r.Latency) > 0 {
		f.hasLatency = true
		for i := range min(len(r.Latency), NumLatencyBuckets) {
			f.latency[i] += r.Latency[i]
		}
	}
	m := make(map[string]float64, len(f.seconds)+1)
	maps.Copy(m, f.seconds)
	m[reporter] += seconds
	f.seconds = m
}

// recentCounts are the last second or so of reports, whether or not they
// are fresh: the newest half second (cur) and the one before it (prev).
// While the service stays saturated, what it completes is its capacity
// whatever the admission was, so a fresh span too short to measure it on
// is read over these. (A saturated core completes in bursts: on one core,
// 0 completions in 0.4 s, then 159 in the next 0.4 s. Each empty span cut
// the estimate by a quarter, two in a row took the level one past the
// one that fits, where it stayed its 10 s dwell: 62-81% of the capacity
// at 3x in degbench overload's cpu3x.) It is a value: with returns a new
// one.
type recentCounts struct{ cur, prev freshCounts }

// with is the counts after a report over seconds that started at start.
func (r recentCounts) with(rep Report, start time.Time, reporter string, seconds float64) recentCounts {
	if r.cur.span() >= minRateSpan.Seconds() {
		r.prev, r.cur = r.cur, freshCounts{}
	}
	r.cur.add(rep, start, reporter, seconds)
	return r
}

// saturatedRate is the successes per second over the recent reports
// that were saturated (the clients admitted more than the service
// completed): both halves when both were, else the newest alone; 0 when
// what is left covers less than minRateSpan. A half that was not
// saturated completed what it was given, not what it could.
func (r recentCounts) saturatedRate() float64 {
	saturated := func(f freshCounts) bool { return f.demand > f.success*(1+saturation) }
	if !saturated(r.cur) {
		return 0
	}
	span, success := r.cur.span(), r.cur.success
	if saturated(r.prev) {
		span, success = span+r.prev.span(), success+r.prev.success
	}
	if span < minRateSpan.Seconds() {
		return 0
	}
	return success / span
}

// completedRate is the most successes per second of a half that covers
// at least minRateSpan, 0 if neither does. Saturated or not, the service
// completed that much. (A first measurement read only the fresh span: in
// degbench overload's cpu3x, a second after a report that completed
// 191/s, a saturated 0.31 s at Emergency completed 39/s, the core busy
// with the requests queued before the middleware, most of them shed.
// The estimate of 39/s held the admission to the top class alone for
// over a minute, at 22% of the capacity.)
func (r recentCounts) completedRate() float64 {
	rate := func(f *freshCounts) float64 {
		if span := f.span(); span >= minRateSpan.Seconds() {
			return f.success / span
		}
		return 0
	}
	return max(rate(&r.cur), rate(&r.prev))
}

// span is the time the counts cover.
func (f *freshCounts) span() float64 {
	var s float64
	for _, v := range f.seconds {
		s = max(s, v)
	}
	return s
}

// verdict is what load makes of the fresh counts and the sample.
type verdict struct {
	// over: a signal exceeds its lowest threshold; quiet: every signal is
	// below half of it; idle: below a quarter; judged: some signal could be
	// judged (enough observations, a threshold).
	over, quiet, idle, judged bool
	// pressure says over was a latency or a sampled signal (cpu, memory,
	// pressure, custom): the service is busy, not merely failing. An error
	// rate alone is a dependency's failure as often as an overload, and
	// shedding does not cure a dependency; without latency reports it is
	// read as pressure (the coarser law). warm says such a signal is
	// above half its threshold.
	pressure, warm bool
	// latencyOnly says the latency was the only signal of the pressure;
	// warmOther that a signal other than the latency is warm.
	latencyOnly, warmOther bool
	// backlog is the fresh latency over its lowest threshold, threshold
	// (ms), when above it (1 otherwise): how far a queue is behind.
	backlog, threshold float64
	// latency is the fresh latency quantile (ms), when latencyJudged;
	// median the fresh median.
	latency, median float64
	latencyJudged   bool
	// why names what made over true, for reasons.
	why string
	// errorOver: the failure ratio is over its lowest threshold; cpuWarm:
	// the CPU is over half its lowest threshold.
	errorOver, cpuWarm bool
	// errorLevel is the most severe level whose error rate threshold the
	// fresh failure ratio exceeds, 0 when none does or it was not judged
	// (tableStep); failLevel is errorLevel when the load does not explain
	// the failures:
	// the latency was measured, and neither it nor a sampled signal says
	// the service is busy. 0 otherwise: failures on a busy service are its
	// queue timing out, and without latency reports they are read as
	// pressure (the coarser law).
	errorLevel, failLevel int
}

// load judges the fresh counts and the sample against the lowest
// threshold of each signal.
func load(c Config, s Sample, f freshCounts) verdict {
	t := c.Table
	v := verdict{quiet: true, idle: true, backlog: 1}
	judge := func(sig Signal, x float64) {
		th, ok := t.lowestThreshold(sig)
		if ok {
			v.judged = true
		}
		switch {
		case !ok:
		case x > th:
			if !v.over {
				tr := Trigger{Signal: sig, Value: x, Threshold: th, Level: t.Level(t.lowestLevel(sig)).Name}
				if sig == Latency {
					tr.Label = "latency " + QuantileLabel(t.LatencyQuantile())
				}
				v.why = tr.String()
			}
			v.over, v.quiet, v.idle = true, false, false
			v.errorOver = v.errorOver || sig == ErrorRate
			if sig != ErrorRate || !f.hasLatency {
				v.latencyOnly = sig == Latency && (v.latencyOnly || !v.pressure)
				v.pressure, v.warm = true, true
				v.warmOther = v.warmOther || sig != Latency
			}
		case x > th/2:
			v.quiet, v.idle = false, false
			if sig != ErrorRate || !f.hasLatency {
				v.warm = true
				v.warmOther = v.warmOther || sig != Latency
			}
		case x > th/4:
			v.idle = false
		}
	}
	var failed float64 // percent, when judged
	if n := f.success + f.failure; n > 0 && n >= float64(c.Rules.MinThroughput) {
		failed = f.failure / n * 100
		judge(ErrorRate, failed)
		v.errorLevel = t.errorLevel(failed)
	}
	if f.hasLatency {
		if ms, n := QuantileOf(f.latency[:], t.LatencyQuantile()); n > 0 && n >= c.Rules.MinThroughput {
			judge(Latency, ms)
			v.latency, v.latencyJudged = ms, true
			v.median, _ = QuantileOf(f.latency[:], 0.5)
			if th, ok := t.lowestThreshold(Latency); ok && ms > th {
				v.backlog, v.threshold = ms/th, th
			}
		}
	}
	for _, sig := range t.Signals() {
		if sig == ErrorRate || sig == Latency {
			continue // the window lags: the fresh reports say what the last change did
		}
		x, ok := s.Value(sig)
		switch {
		case !ok:
		case sig == CPU:
			judgeCPU(t, x, &v)
		default:
			judge(sig, x)
		}
	}
	if v.errorOver && v.cpuWarm {
		// Failures while the core is busy are its queue timing out: the
		// in-process middleware of a saturated core sees no latency for
		// the wait before it, only requests that come out too late.
		v.pressure, v.latencyOnly = true, false
	}
	if v.errorOver && !v.pressure && v.latencyJudged {
		v.failLevel = v.errorLevel
	}
	v.quiet, v.idle = v.quiet && v.judged, v.idle && v.judged
	return v
}

// judgeCPU reads the CPU as BBR does: a core in use is not an overload.
// A service at 95% of its core that answers everything on time is doing
// its job, and the law admits 95% of what it was measured to carry, so a
// CPU signal over its threshold is the normal state of a law that uses
// the capacity. Over half its lowest threshold the CPU makes the service
// warm: if the clients admit more than it completes, what it completes
// is measured as its capacity (decide). It is never over by itself, so it
// cuts no capacity and backs no step of the table. (Read as overload, the
// default table's 60% held a CPU-bound service to 60% of its core:
// 28-62% goodput at 3x, measured with degbench overload.)
func judgeCPU(t *Table, x float64, v *verdict) {
	th, ok := t.lowestThreshold(CPU)
	if !ok {
		return
	}
	v.judged = true
	switch {
	case x > th/2:
		v.quiet, v.idle, v.warm, v.cpuWarm, v.warmOther = false, false, true, true, true
	case x > th/4:
		v.idle = false
	}
}
