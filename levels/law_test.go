package levels

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// lawStep is one evaluation of a step table for the admission law: the
// reports a client of a service of 800/s sends over the span before it
// (the benchmark's mix at x times the capacity, completing success and
// failing failure, their latencies in one bucket), and what the machine
// publishes after it.
type lawStep struct {
	at               time.Duration // since the start
	trigger          string
	x                float64       // offered load, times the capacity; 0: no report
	secs             float64       // the report's span
	arrival          float64       // the report's arrival span; 0: none
	admitted         float64       // requests the client admitted per second
	success, failure float64       // per second
	latencyMs        float64       // every completion's latency
	tailMs           float64       // if set, 2% of completions come at this latency instead
	errorRate        float64       // the window's error rate, percent, for the table rule
	latencyWindowMs  float64       // the window's latency quantile, for the table rule
	cpu              float64       // the sampled CPU, percent; 0: none
	reporter         string        // the report's reporter; "": c1
	offered          map[int]int64 // the report's offered counts; nil: lawMix's

	level    string
	partial  string // lawPartial's
	reason   string // a substring of the last history entry's reason, if set
	capacity [2]float64
}

// lawMix is the benchmark's mix at x times 800/s over secs, by priority.
func lawMix(x, secs float64) map[int]int64 {
	m := map[int]int64{}
	for p, share := range map[int]float64{100: 0.05, 60: 0.15, 40: 0.30, 10: 0.50} {
		m[p] = int64(math.Round(x * 800 * share * secs))
	}
	return m
}

// runLawSteps evaluates steps on a machine in mode over simTable.
func runLawSteps(t *testing.T, mode AdmissionMode, steps []lawStep) {
	t.Helper()
	runLawStepsOn(t, simTable(t), mode, steps)
}

// runLawStepsOn evaluates steps on a machine in mode over tab.
func runLawStepsOn(t *testing.T, tab *Table, mode AdmissionMode, steps []lawStep) {
	t.Helper()
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	m := NewMachine(Config{Table: tab, Rules: Rules{MinimumLevelDuration: 10 * time.Second, Hysteresis: 0.1, MaxOverrideTTL: time.Hour, MinThroughput: 10, Admission: mode}}, t0)
	m.Evaluate(Input{At: t0, Trigger: TriggerStart, Sample: Sample{}.Clone()})
	for i, st := range steps {
		now := t0.Add(st.at)
		var w Window
		w.Attempts = 1000
		w.Failures = int64(st.errorRate * 10)
		w.Latency = make([]int64, NumLatencyBuckets)
		w.Latency[latencyBucket(max(st.latencyWindowMs, 15))] = 1000
		smp := Sample{}.Clone()
		tab.ReadWindow(&smp, w, 10)
		if st.cpu > 0 {
			smp.Values[CPU], smp.States[CPU] = st.cpu, Available
		}
		in := Input{At: now, Trigger: st.trigger, Sample: smp}
		if st.x > 0 {
			lat := make([]int64, NumLatencyBuckets)
			n := int64((st.success + st.failure) * st.secs)
			lat[latencyBucket(st.latencyMs)] = n
			if st.tailMs > 0 {
				lat[latencyBucket(st.tailMs)] = n / 50
				lat[latencyBucket(st.latencyMs)] -= n / 50
			}
			reporter, offered := cmp.Or(st.reporter, "c1"), st.offered
			if offered == nil {
				offered = lawMix(st.x, st.secs)
			}
			in.Reports = []Report{{At: now, Success: int64(st.success * st.secs), Failure: int64(st.failure * st.secs), Latency: lat,
				Admission: &Admission{Admitted: int64(st.admitted * st.secs), Seconds: st.secs, Arrival: st.arrival, Reporter: reporter, Offered: offered}}}
		}
		out := m.Evaluate(in)
		p := m.Published()
		if got := tab.Level(p.Index).Name; got != st.level {
			t.Errorf("step %d (%v): level %s, want %s (reason %q)", i, st.at, got, st.level, p.Reason)
		}
		if got := lawPartial(p.Partial); got != st.partial {
			t.Errorf("step %d (%v): partial %s, want %s (capacity %.0f/s)", i, st.at, got, st.partial, m.law.capacity)
		}
		if st.reason != "" && (len(out.Entries) == 0 || !strings.Contains(out.Entries[len(out.Entries)-1].Reason, st.reason)) {
			t.Errorf("step %d (%v): entries %+v, want a reason holding %q", i, st.at, out.Entries, st.reason)
		}
		if c := st.capacity; c != [2]float64{} && !(m.law.capacity >= c[0] && m.law.capacity <= c[1]) {
			t.Errorf("step %d (%v): capacity estimate %.1f/s, want in [%v, %v]", i, st.at, m.law.capacity, c[0], c[1])
		}
	}
}

// quietSeconds is n one-second reports, at 1 s to n s, of the mix at x
// times the capacity, all of it admitted and answered in 15 ms: Normal.
func quietSeconds(x float64, n int) []lawStep {
	steps := make([]lawStep, 0, n)
	for s := 1; s <= n; s++ {
		steps = append(steps, lawStep{at: time.Duration(s) * time.Second, trigger: TriggerEvent, x: x, secs: 1, admitted: math.Round(x * 800), success: math.Round(x * 800), latencyMs: 15, level: "Normal", partial: "null"})
	}
	return steps
}

// lawPartial writes a partial admission for a step table: "null", or
// the band's from and the fraction to 0.01.
func lawPartial(p *Partial) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprintf("%d %.2f", p.From, p.Fraction)
}

// TestLawSaturationSizesTheStep: a 3x step measured saturated takes the
// level straight to the one that fits (Major: priorities 100 and 60 are
// 480/s of 800), not to the top the saturated latency asks for; the
// queue drains with the band shed whole for as long as it needs at the
// capacity not admitted; then the band below is admitted in part, to 95%
// of the capacity: (760 - 480) / 720 of 30-49.
func TestLawSaturationSizesTheStep(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, []lawStep{
		{at: time.Second, trigger: TriggerTick, x: 0.5, secs: 1, admitted: 400, success: 400, latencyMs: 15, level: "Normal", partial: "null"},
		{at: 2 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 2400, success: 800, failure: 1600, latencyMs: 450, errorRate: 60, latencyWindowMs: 450,
			level: "Major", partial: "null", reason: "capacity 800/s of 2400/s offered", capacity: [2]float64{800, 800}},
		// The queue drains: completing more than the 480/s admitted.
		{at: 2250 * time.Millisecond, trigger: TriggerEvent, x: 3, secs: 0.25, admitted: 480, success: 800, latencyMs: 450, errorRate: 60, latencyWindowMs: 450,
			level: "Major", partial: "null", capacity: [2]float64{800, 800}},
		// Drained: the band below is admitted in part.
		{at: 3500 * time.Millisecond, trigger: TriggerEvent, x: 3, secs: 1, admitted: 480, success: 480, latencyMs: 15, errorRate: 60, latencyWindowMs: 450,
			level: "Major", partial: "30 0.39", capacity: [2]float64{800, 800}},
		// The table rule asks for Emergency (the window's latency); the law
		// holds the level that fits.
		{at: 4 * time.Second, trigger: TriggerTick, x: 3, secs: 0.5, admitted: 760, success: 760, latencyMs: 30, errorRate: 60, latencyWindowMs: 460,
			level: "Major", partial: "30 0.39"},
	})
}

// TestLawNeverPublishesANaNFraction: a report whose span is 5e-324 s
// (the API refuses it now; a timeline recorded before may hold one) reads
// as rates of +Inf, and the band's fraction as NaN: the band is shed whole
// rather than published as a fraction no state document can carry (GET
// /v1/level answered 500 for 3 s); an infinite load fits no level below
// the top.
func TestLawNeverPublishesANaNFraction(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, []lawStep{
		{at: time.Second, trigger: TriggerTick, x: 0.5, secs: 1, admitted: 400, success: 400, latencyMs: 15, level: "Normal", partial: "null"},
		{at: 2 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 2400, success: 800, failure: 1600, latencyMs: 450, errorRate: 60, latencyWindowMs: 450,
			level: "Major", partial: "null"},
		{at: 3500 * time.Millisecond, trigger: TriggerEvent, x: 3, secs: 1, admitted: 480, success: 480, latencyMs: 15, errorRate: 60, latencyWindowMs: 450,
			level: "Major", partial: "30 0.39"},
		{at: 3800 * time.Millisecond, trigger: TriggerEvent, x: 3, secs: 5e-324, reporter: "dead", offered: map[int]int64{100: 1, 60: 1, 40: 1, 10: 1},
			latencyMs: 15, errorRate: 60, latencyWindowMs: 450, level: "Emergency", partial: "null"},
	})
}

// TestLawFailingDependency: 30% of requests fail at 15ms whatever the
// load. The table's level stands (Severe for an error rate over 25%), and
// exactly: the law learns no capacity from failures, and without one it
// publishes no partial admission, so Severe sheds what the operator's
// table says it sheds, no more and no less.
func TestLawFailingDependency(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, []lawStep{
		{at: time.Second, trigger: TriggerEvent, x: 0.5, secs: 1, admitted: 400, success: 280, failure: 120, latencyMs: 15, errorRate: 30,
			level: "Severe", partial: "null", capacity: [2]float64{0, 0}},
		{at: 2 * time.Second, trigger: TriggerTick, x: 0.5, secs: 1, admitted: 220, success: 154, failure: 66, latencyMs: 15, errorRate: 30,
			level: "Severe", partial: "null", capacity: [2]float64{0, 0}},
	})
}

// TestLawFailingDependencyAfterAnOverload: a capacity measured in an
// overload earlier does not cap the table's level for a failing
// dependency. Back at Normal at 0.5x, 30% of requests fail at 15 ms, the
// core idle: the load fits the capacity, but the failures are not the
// load's, so the level goes to Severe as the table says and sheds what
// it says (partial null), as TestLawFailingDependency does without a
// capacity. Once they stop, it steps down a level per dwell. (Capped by
// the level that fits, it stayed at Normal while they lasted.)
func TestLawFailingDependencyAfterAnOverload(t *testing.T) {
	steps := measuredAt800()
	each := func(from, to int, st lawStep, level, partial string) {
		for s := from; s <= to; s++ {
			st.at, st.level, st.partial = time.Duration(s)*time.Second, level, partial
			steps = append(steps, st)
		}
	}
	quiet := lawStep{trigger: TriggerTick, x: 0.5, secs: 1, admitted: 400, success: 400, latencyMs: 15}
	failing := lawStep{trigger: TriggerTick, x: 0.5, secs: 1, admitted: 400, success: 280, failure: 120, latencyMs: 15, errorRate: 30}
	each(4, 10, quiet, "Major", "30 0.95")
	each(11, 20, quiet, "Moderate", "10 0.95")
	each(21, 30, quiet, "Minor", "null")
	each(31, 40, quiet, "Normal", "null")
	failing.reason = "error_rate 30.00% > 25% (Severe)"
	each(41, 41, failing, "Severe", "null")
	failing.reason = ""
	each(42, 45, failing, "Severe", "null")
	each(46, 50, quiet, "Severe", "50 0.95")
	each(51, 60, quiet, "Major", "30 0.95")
	runLawSteps(t, AdmissionGraduated, steps)
}

// TestLawEdge: with the capacity measured, a latency over its threshold
// at the target without saturation (everything admitted completes) cuts
// the estimate to 97% of what was admitted over the headroom; a quiet
// service creeps it back 2% a second, no further than the capacity
// measured. The fraction follows only when it moves the admitted load by
// 2% of the target: 0.378 to 0.389 of a 720/s band is 8/s, under 15/s.
func TestLawEdge(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, append(measuredAt800(), []lawStep{
		{at: 4 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 760, success: 760, latencyMs: 150, errorRate: 60, latencyWindowMs: 150,
			level: "Major", partial: "30 0.36", capacity: [2]float64{776, 777}},
		{at: 5 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 737, success: 737, latencyMs: 30, errorRate: 60, latencyWindowMs: 150,
			level: "Major", partial: "30 0.38", capacity: [2]float64{791, 792}},
		{at: 6 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 750, success: 750, latencyMs: 30, errorRate: 60, latencyWindowMs: 150,
			level: "Major", partial: "30 0.38", capacity: [2]float64{800, 800}},
		{at: 7 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 760, success: 760, latencyMs: 30, errorRate: 60, latencyWindowMs: 150,
			level: "Major", partial: "30 0.38", capacity: [2]float64{800, 800}},
	}...))
}

// measuredAt800 are the steps of a 3x overload measured saturated at
// 800/s (Major), then drained, the band below admitted in part: (760 -
// 480) / 720 of 30-49.
func measuredAt800() []lawStep {
	return []lawStep{
		{at: time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 2400, success: 800, failure: 1600, latencyMs: 450, errorRate: 60, latencyWindowMs: 450,
			level: "Major", partial: "null", capacity: [2]float64{800, 800}},
		{at: 3 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 480, success: 480, latencyMs: 15, errorRate: 60, latencyWindowMs: 450,
			level: "Major", partial: "30 0.39", capacity: [2]float64{800, 800}},
	}
}

// TestLawShortQuietSpansProbeSlowly: near its capacity a service often
// answers a quarter second with no queue at all. Such a span, every
// latency under a quarter of the threshold, grows the estimate only at
// the creep's 2% a second (800 to 804), where a probe of 50% a second
// would take it 10% past the capacity and a second of answers past the
// SLO with it (measured at 3x). A whole quiet second probes fast, to what
// the service completed plus 10% over the headroom: 760 x 1.1 / 0.95.
func TestLawShortQuietSpansProbeSlowly(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, append(measuredAt800(), []lawStep{
		{at: 3250 * time.Millisecond, trigger: TriggerEvent, x: 3, secs: 0.25, admitted: 760, success: 760, latencyMs: 15, errorRate: 60, latencyWindowMs: 450,
			level: "Major", partial: "30 0.39", capacity: [2]float64{803, 805}},
		{at: 4250 * time.Millisecond, trigger: TriggerEvent, x: 3, secs: 1, admitted: 760, success: 760, latencyMs: 15, errorRate: 60, latencyWindowMs: 450,
			level: "Major", partial: "30 0.49", capacity: [2]float64{879, 881}},
	}...))
}

// TestLawDrainLastsAsLongAsTheLevelsFloorNeeds: a 1.6x rise, measured
// saturated with the queue 470 ms behind, takes the level from Normal to
// Moderate, whose threshold alone admits 640/s of the 800. The queue
// (470 ms x 800/s) drains at the 160/s left: 2.35 s, with the band below
// shed whole. Sized by what Normal admits (nothing), it was 0.9 s, and
// the band came back into a queue still 300 ms behind.
func TestLawDrainLastsAsLongAsTheLevelsFloorNeeds(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, append(drainRise(),
		lawStep{at: 3500 * time.Millisecond, trigger: TriggerEvent, x: 1.6, secs: 1, admitted: 640, success: 800, latencyMs: 300, latencyWindowMs: 470,
			level: "Moderate", partial: "null", capacity: [2]float64{800, 800}},
		lawStep{at: 5 * time.Second, trigger: TriggerEvent, x: 1.6, secs: 1, admitted: 640, success: 640, latencyMs: 15, latencyWindowMs: 470,
			level: "Moderate", partial: "10 0.19"},
	))
}

// drainRise is the start of the drain tests: 0.6x, then a 1.6x rise,
// measured saturated with the queue 470 ms behind, that takes the level
// from Normal to Moderate.
func drainRise() []lawStep {
	return []lawStep{
		{at: time.Second, trigger: TriggerEvent, x: 0.6, secs: 1, admitted: 480, success: 480, latencyMs: 15, level: "Normal", partial: "null"},
		{at: 2 * time.Second, trigger: TriggerEvent, x: 1.6, secs: 1, admitted: 1280, success: 800, latencyMs: 470, latencyWindowMs: 470,
			level: "Moderate", partial: "null", capacity: [2]float64{800, 800}},
	}
}

// TestLawDrainEndsWhenAnswersAreOnTime: the drain of the 1.6x rise above
// is expected to take 2.35 s, but the first second of reports after the
// change answers everything in 15 ms, under the 100 ms threshold: the
// queue is gone, and the band below is admitted in part at once, 1.35 s
// before the drain's expected end. (Ended by its time alone, the drain
// after cpu3x's step shed the band for 2 s after the answers were on
// time again.)
func TestLawDrainEndsWhenAnswersAreOnTime(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, append(drainRise(),
		lawStep{at: 3 * time.Second, trigger: TriggerEvent, x: 1.6, secs: 1, admitted: 640, success: 640, latencyMs: 15, latencyWindowMs: 470,
			level: "Moderate", partial: "10 0.19"},
	))
}

// TestLawDrainEndsWhenTheMedianIsOnTime: as above, but 2% of the answers
// come 150 ms late (a runtime's tail: cpu3x's scheduler), so the p99
// stays over the threshold. The median, 15 ms, is under a quarter of it:
// a queue delays every answer, so there is none, and the drain ends. A
// median of 40 ms is a queue's, and the drain goes on. (Ended only by a
// report without pressure, cpu3x's drain shed the band for 2.4 s after
// the answers were on time again.)
func TestLawDrainEndsWhenTheMedianIsOnTime(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, append(drainRise(),
		lawStep{at: 3 * time.Second, trigger: TriggerEvent, x: 1.6, secs: 1, admitted: 640, success: 640, latencyMs: 15, tailMs: 150, latencyWindowMs: 470,
			level: "Moderate", partial: "10 0.19"},
	))
	runLawSteps(t, AdmissionGraduated, append(drainRise(),
		lawStep{at: 3 * time.Second, trigger: TriggerEvent, x: 1.6, secs: 1, admitted: 640, success: 640, latencyMs: 40, tailMs: 150, latencyWindowMs: 470,
			level: "Moderate", partial: "null"},
	))
}

// latencyCPUTable is simTable with the default table's CPU thresholds,
// as the benchmark's CPU-bound variant has them.
func latencyCPUTable(t *testing.T) *Table {
	t.Helper()
	var lv []Level
	for i, cpu := range []float64{60, 70, 80, 90, 95} {
		l := simTable(t).Level(i + 1)
		th := maps.Clone(l.Thresholds)
		th[CPU] = cpu
		l.Thresholds = th
		lv = append(lv, l)
	}
	tab, err := NewTable(lv)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// TestLawReadsCPUAsBBRDoes: a core in use is not an overload. At 0.5x a
// service over the Minor CPU threshold (65% > 60%) that answers on time
// stays at Normal, though the table recommends Minor; saturated, its
// capacity is measured and the level is the one that fits; and at the
// target, the core at 98% (over every CPU threshold) while everything
// admitted completes on time cuts nothing: the capacity stays 800/s and
// the band stays admitted at 0.39. (Read as overload, the default
// table's 60% held a CPU-bound service to 60% of its core.)
func TestLawReadsCPUAsBBRDoes(t *testing.T) {
	runLawStepsOn(t, latencyCPUTable(t), AdmissionGraduated, []lawStep{
		{at: time.Second, trigger: TriggerTick, x: 0.5, secs: 1, admitted: 400, success: 400, latencyMs: 15, cpu: 65,
			level: "Normal", partial: "null"},
		{at: 2 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 2400, success: 800, failure: 1600, latencyMs: 450, errorRate: 60, latencyWindowMs: 450, cpu: 100,
			level: "Major", partial: "null", reason: "capacity 800/s of 2400/s offered", capacity: [2]float64{800, 800}},
		{at: 4 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 480, success: 480, latencyMs: 15, errorRate: 60, latencyWindowMs: 450, cpu: 100,
			level: "Major", partial: "30 0.39", capacity: [2]float64{800, 800}},
		{at: 5 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 760, success: 760, latencyMs: 30, errorRate: 60, latencyWindowMs: 450, cpu: 98,
			level: "Major", partial: "30 0.39", capacity: [2]float64{800, 800}},
		{at: 6 * time.Second, trigger: TriggerTick, x: 3, secs: 1, admitted: 760, success: 760, latencyMs: 30, errorRate: 60, latencyWindowMs: 450, cpu: 98,
			level: "Major", partial: "30 0.39", capacity: [2]float64{800, 800}},
	})
}

// TestLawFailuresOnABusyCoreArePressure: the in-process middleware of a
// saturated core sees no latency for the wait before it, only requests
// that come out too late. So failures over the error rate's threshold
// (2% > 1%) while the core is busy (CPU over half its lowest threshold)
// are pressure, and at the target they cut the estimate as a latency
// would (800 to 776/s); with the core idle they are a dependency's, and
// the estimate stands.
func TestLawFailuresOnABusyCoreArePressure(t *testing.T) {
	for _, c := range []struct {
		cpu      float64
		capacity float64
		partial  string
	}{{95, 776, "30 0.36"}, {20, 800, "30 0.39"}} {
		t.Run(fmt.Sprintf("cpu %g%%", c.cpu), func(t *testing.T) {
			runLawStepsOn(t, latencyCPUTable(t), AdmissionGraduated, append(measuredAt800(), []lawStep{
				{at: 4 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 760, success: 745, failure: 15, latencyMs: 15, errorRate: 60, latencyWindowMs: 450, cpu: c.cpu,
					level: "Major", partial: c.partial, capacity: [2]float64{c.capacity, c.capacity + 1}},
			}...))
		})
	}
}

// TestLawStepsWithoutACapacityNotOnTheCPU: before a capacity is
// measured the table's level stands, but not on the CPU. At a 3x step of
// a CPU-bound service the first health check has the core at 91% (over
// Severe's 90%), the window's failures at 7% (over Moderate's 5%), and the
// fresh report 2% failures, too few to read as a saturation: the level
// goes to Moderate on the window's failures (a first step happens at
// once), not to Severe. With nothing but the CPU over, nothing moves.
func TestLawStepsWithoutACapacityNotOnTheCPU(t *testing.T) {
	runLawStepsOn(t, latencyCPUTable(t), AdmissionGraduated, []lawStep{
		{at: time.Second, trigger: TriggerTick, x: 3, secs: 1, admitted: 400, success: 392, failure: 8, latencyMs: 15, errorRate: 7, cpu: 91,
			level: "Moderate", partial: "null", reason: "error_rate 7.00% > 5% (Moderate)"},
	})
	runLawStepsOn(t, latencyCPUTable(t), AdmissionGraduated, []lawStep{
		{at: time.Second, trigger: TriggerTick, x: 0.5, secs: 0.1, admitted: 400, success: 400, latencyMs: 15, cpu: 91,
			level: "Normal", partial: "null"},
	})
}

// TestLawStepsWithoutACapacityNotOnTheQueuesTimeouts: at a 3x step,
// before any capacity is measured, the first fresh report has its p99
// at 183 ms (over Minor's 100 ms) and no failures: Minor. The queue then
// times out requests, and the window's error rate climbs over
// Moderate's, Major's and Severe's thresholds on reports that began
// before the step to Minor. The window's failures step the level no
// further than the fresh reports' failures do (after the first step,
// the next rests on evidence of it): it holds at Minor, and
// the first fresh report after the step, which measures the capacity,
// takes it to the level that fits, Major. (Read alone, the window's
// error rate took degbench overload's cpu3x to Severe in 1.3 s, and the
// dwell held it there for 10 s, admitting 110/s of a 195/s core.) A
// fresh report failing 27.5% is a failing dependency's, and the level
// goes where the table says, Severe.
func TestLawStepsWithoutACapacityNotOnTheQueuesTimeouts(t *testing.T) {
	late := func(at time.Duration, errorRate float64) lawStep {
		return lawStep{at: at, trigger: TriggerEvent, x: 3, secs: 1.3, admitted: 700, success: 700, latencyMs: 183, latencyWindowMs: 183,
			errorRate: errorRate, level: "Minor", partial: "null"}
	}
	climb := append(quietSeconds(0.5, 3), []lawStep{
		{at: 4 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 700, success: 700, latencyMs: 183, latencyWindowMs: 183,
			level: "Minor", partial: "null", reason: "latency p99"},
		late(4400*time.Millisecond, 7.97),
		late(4800*time.Millisecond, 23.44),
		late(5200*time.Millisecond, 25.55),
	}...)
	runLawSteps(t, AdmissionGraduated, append(slices.Clone(climb), lawStep{
		at: 5500 * time.Millisecond, trigger: TriggerEvent, x: 3, secs: 0.5, admitted: 2400, success: 790, failure: 10, latencyMs: 450, errorRate: 25.55, latencyWindowMs: 450,
		level: "Major", partial: "null", capacity: [2]float64{790, 800}}))
	runLawSteps(t, AdmissionGraduated, append(slices.Clone(climb), lawStep{
		at: 5500 * time.Millisecond, trigger: TriggerEvent, x: 0.5, secs: 0.5, admitted: 400, success: 290, failure: 110, latencyMs: 15, errorRate: 25.55, latencyWindowMs: 15,
		level: "Severe", partial: "null", reason: "error_rate 25.50% > 25% (Severe)"}))
}

// TestLawShortSaturatedSpansMoveTheEstimateLittle: a saturated core
// completes in bursts, so a report shorter than half a second moves the
// estimate by at most 25% down and 10% up. With 800/s measured, 0.3 s
// that completed 100/s leaves 600/s (averaged in whole, it was 450/s, and
// such a reading took the level past the one that fits on one core), and
// a burst of 1,300/s after it 660/s.
func TestLawShortSaturatedSpansMoveTheEstimateLittle(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, append(measuredAt800(), []lawStep{
		{at: 3300 * time.Millisecond, trigger: TriggerEvent, x: 3, secs: 0.3, admitted: 800, success: 100, latencyMs: 450, errorRate: 60, latencyWindowMs: 450,
			level: "Major", partial: "null", capacity: [2]float64{600, 600}},
		// The two short spans are read together (recentCounts): 420 in
		// 0.6 s is 700/s, averaged in.
		{at: 3600 * time.Millisecond, trigger: TriggerEvent, x: 3, secs: 0.3, admitted: 1400, success: 1300, latencyMs: 450, errorRate: 60, latencyWindowMs: 450,
			level: "Major", partial: "null", capacity: [2]float64{650, 650}},
	}...))
}

// TestLawReadsABurstyCoreOverTheLastSecond: a saturated core completes in
// bursts, 50/s for 0.4 s, then 1,500/s for 0.4 s. Each short span read
// alone cut the estimate by a quarter or raised it by a tenth, 800/s to
// 408/s in five spans, and the level went one past the one that fits;
// read over the last second of saturated reports, it holds between 590/s
// and 660/s, and the level where it fits.
func TestLawReadsABurstyCoreOverTheLastSecond(t *testing.T) {
	stall := func(at time.Duration, lo, hi float64) lawStep {
		return lawStep{at: at, trigger: TriggerEvent, x: 3, secs: 0.4, admitted: 1000, success: 50, latencyMs: 450, errorRate: 60, latencyWindowMs: 450,
			level: "Major", capacity: [2]float64{lo, hi}}
	}
	burst := func(at time.Duration, lo, hi float64) lawStep {
		return lawStep{at: at, trigger: TriggerEvent, x: 3, secs: 0.4, admitted: 1600, success: 1500, latencyMs: 450, errorRate: 60, latencyWindowMs: 450,
			level: "Major", capacity: [2]float64{lo, hi}}
	}
	steps := []lawStep{
		stall(3400*time.Millisecond, 600, 600), // beside a quiet second, the stall alone: cut by a quarter
		burst(3800*time.Millisecond, 660, 660), // up by a tenth
		stall(4200*time.Millisecond, 590, 600),
		burst(4600*time.Millisecond, 650, 660),
		stall(5000*time.Millisecond, 590, 600),
		burst(5400*time.Millisecond, 650, 660),
	}
	for i := range steps {
		steps[i].partial = "null" // the drain of a latency at 4.5x its threshold
	}
	runLawSteps(t, AdmissionGraduated, append(measuredAt800(), steps...))
}

// TestLawStepsTheLevelOnTheRecentPeak: a stack starved of CPU completes
// in bursts, and its measurements whipsaw. A second that completed 251/s
// right after one that measured 665/s averages the estimate to 458/s, at
// which Major's floor (480/s) does not fit; the level stays at Major, the
// level that fits 665/s, measured a second before, and the band stays shed.
// (Read at the low point, degbench overload's crash3x stepped to Severe
// with four systems loading two cores, and its dwell held the admission
// to 466/s for 10 s of answers in 20-45 ms.) A capacity that stays low
// moves the level peakFor after the peak: Severe at 3.5 s, its band
// admitted in part.
func TestLawStepsTheLevelOnTheRecentPeak(t *testing.T) {
	starved := func(at time.Duration, level, partial string, lo, hi float64) lawStep {
		return lawStep{at: at, trigger: TriggerEvent, x: 3, secs: 1, admitted: 441, success: 251, latencyMs: 200, latencyWindowMs: 450,
			level: level, partial: partial, capacity: [2]float64{lo, hi}}
	}
	runLawSteps(t, AdmissionGraduated, []lawStep{
		{at: time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 972, success: 665, latencyMs: 450, latencyWindowMs: 450,
			level: "Major", partial: "null", capacity: [2]float64{665, 665}},
		starved(2*time.Second, "Major", "null", 458, 458),
		// Severe's band (priority 60) at (0.95 x 354 - 120) / 360.
		starved(3500*time.Millisecond, "Severe", "50 0.60", 354, 355),
	})
}

// TestLawLevelsMode: admission.mode levels publishes no partial admission,
// and the table's rule alone moves the level (the saturated latency asks
// for Emergency, and gets it).
func TestLawLevelsMode(t *testing.T) {
	runLawSteps(t, AdmissionLevels, []lawStep{
		{at: time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 2400, success: 800, failure: 1600, latencyMs: 450, errorRate: 60, latencyWindowMs: 460,
			level: "Emergency", partial: "null"},
		{at: 2 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 120, success: 120, latencyMs: 15, errorRate: 60, latencyWindowMs: 460,
			level: "Emergency", partial: "null"},
	})
}

// TestLawStepDownReadmitsFirst: once the overload ends, the law readmits
// the band below through its fraction (to 0.95) before any step down, and
// steps down one level a dwell; while the band is still shed in part, the
// table rule's recovery waits.
func TestLawStepDownReadmitsFirst(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, []lawStep{
		{at: time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 2400, success: 800, failure: 1600, latencyMs: 450, errorRate: 60, latencyWindowMs: 450,
			level: "Major", partial: "null"},
		{at: 3 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 480, success: 480, latencyMs: 15, errorRate: 60, latencyWindowMs: 450,
			level: "Major", partial: "30 0.39"},
		// 12 s: the dwell is over and the window is quiet, but 61% of the
		// band is still shed at 3x: the level holds.
		{at: 12 * time.Second, trigger: TriggerTick, x: 3, secs: 1, admitted: 760, success: 760, latencyMs: 30,
			level: "Major", partial: "30 0.39"},
		// The load falls to 0.5x: the band is readmitted first, as the
		// offered load's average (2 s) comes down...
		{at: 12500 * time.Millisecond, trigger: TriggerEvent, x: 0.5, secs: 0.5, admitted: 150, success: 150, latencyMs: 15,
			level: "Major", partial: "30 0.66"},
		{at: 13 * time.Second, trigger: TriggerTick, x: 0.5, secs: 0.5, admitted: 260, success: 260, latencyMs: 15,
			level: "Major", partial: "30 0.95"},
		// ... and only then does the level step down, one at a time.
		{at: 14 * time.Second, trigger: TriggerTick, x: 0.5, secs: 1, admitted: 390, success: 390, latencyMs: 15,
			level: "Moderate", partial: "10 0.46", reason: "recovered"},
		{at: 16 * time.Second, trigger: TriggerEvent, x: 0.5, secs: 1, admitted: 390, success: 390, latencyMs: 15,
			level: "Moderate", partial: "10 0.95"},
		{at: 20 * time.Second, trigger: TriggerTick, x: 0.5, secs: 1, admitted: 400, success: 400, latencyMs: 15,
			level: "Moderate", partial: "10 0.95"},
	})
}

// TestLawRecoversOnFreshLatency: a burst of late answers near the end of
// an overload keeps the window's p99 (450 ms) over every threshold below
// Emergency after the load has fallen to 0.5x. Once the band is admitted
// at the top, the health check steps the level down on the latency of the
// fresh reports (15 ms), not the window's, one level, and says so in its
// reason; the window alone held Major for its whole length (in degbench
// overload's cpu3x, 10 s of a service half idle shedding 40% of its
// requests). When the clients then fall silent, the window's late answers
// the step overruled do not take the level back up; a new overload does.
// Fresh reports over the lowest threshold hold the level.
func TestLawRecoversOnFreshLatency(t *testing.T) {
	overload := []lawStep{
		{at: time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 2400, success: 800, failure: 1600, latencyMs: 450, errorRate: 60, latencyWindowMs: 450,
			level: "Major", partial: "null"},
		{at: 3 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 480, success: 480, latencyMs: 15, errorRate: 60, latencyWindowMs: 450,
			level: "Major", partial: "30 0.39"},
		{at: 12 * time.Second, trigger: TriggerTick, x: 3, secs: 1, admitted: 760, success: 760, latencyMs: 30, latencyWindowMs: 450,
			level: "Major", partial: "30 0.39"},
		{at: 12500 * time.Millisecond, trigger: TriggerEvent, x: 0.5, secs: 0.5, admitted: 150, success: 150, latencyMs: 15, latencyWindowMs: 450,
			level: "Major", partial: "30 0.66"},
		{at: 13 * time.Second, trigger: TriggerTick, x: 0.5, secs: 0.5, admitted: 260, success: 260, latencyMs: 15, latencyWindowMs: 450,
			level: "Major", partial: "30 0.95"},
	}
	t.Run("quiet", func(t *testing.T) {
		runLawSteps(t, AdmissionGraduated, append(slices.Clone(overload),
			lawStep{at: 14 * time.Second, trigger: TriggerTick, x: 0.5, secs: 1, admitted: 390, success: 390, latencyMs: 15, latencyWindowMs: 450,
				level: "Moderate", partial: "10 0.46", reason: "below Major thresholds less 10% hysteresis; latency p99 20ms in fresh reports (497ms over the window)"},
			lawStep{at: 16 * time.Second, trigger: TriggerTick, x: 0.5, secs: 1, admitted: 390, success: 390, latencyMs: 15, latencyWindowMs: 450,
				level: "Moderate", partial: "10 0.95"},
		))
	})
	recovered := lawStep{at: 14 * time.Second, trigger: TriggerTick, x: 0.5, secs: 1, admitted: 390, success: 390, latencyMs: 15, latencyWindowMs: 450,
		level: "Moderate", partial: "10 0.46"}
	// The clients fall silent: the window still holds the late answers
	// the step down overruled, and they are not read again...
	t.Run("silent", func(t *testing.T) {
		runLawSteps(t, AdmissionGraduated, append(slices.Clone(overload), recovered,
			lawStep{at: 18 * time.Second, trigger: TriggerTick, latencyWindowMs: 450, level: "Moderate", partial: "10 0.46"},
			lawStep{at: 20 * time.Second, trigger: TriggerTick, latencyWindowMs: 450, level: "Moderate", partial: "10 0.46"},
		))
	})
	// ... but a new overload is, from its first report.
	t.Run("again", func(t *testing.T) {
		runLawSteps(t, AdmissionGraduated, append(slices.Clone(overload), recovered,
			lawStep{at: 18 * time.Second, trigger: TriggerTick, latencyWindowMs: 450, level: "Moderate", partial: "10 0.46"},
			lawStep{at: 19 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 2400, success: 800, failure: 1600, latencyMs: 450, errorRate: 60, latencyWindowMs: 450,
				level: "Major", partial: "null"},
		))
	})
	t.Run("over", func(t *testing.T) {
		runLawSteps(t, AdmissionGraduated, append(slices.Clone(overload),
			lawStep{at: 14 * time.Second, trigger: TriggerTick, x: 0.5, secs: 1, admitted: 390, success: 390, latencyMs: 150, latencyWindowMs: 450,
				level: "Major", partial: "30 0.95"},
		))
	})
}

// FuzzLawReports: whatever reports a replayed timeline holds (replay reads
// them from files, unchecked by the API), the machine neither panics nor
// publishes a fraction outside (0, 1).
func FuzzLawReports(f *testing.F) {
	f.Add(int64(800), int64(1600), int64(2400), 1.0, int64(120), int64(1200), uint8(8))
	f.Add(int64(0), int64(0), int64(0), 1e-9, int64(-5), int64(1<<62), uint8(0))
	f.Add(int64(-1), int64(1<<62), int64(-1<<62), 3600.0, int64(0), int64(1), uint8(13))
	// A span of 5e-324 s: its counts read as rates of +Inf, and the
	// fraction as NaN, which a state document cannot carry.
	f.Add(int64(100), int64(0), int64(400), 5e-324, int64(100), int64(100), uint8(12))
	f.Add(int64(200), int64(0), int64(800), 1.0, int64(1<<40), int64(1<<40), uint8(12))
	f.Fuzz(func(t *testing.T, success, failure, admitted int64, secs float64, top, low int64, bucket uint8) {
		t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		m := NewMachine(Config{Table: simTable(t), Rules: Rules{MinimumLevelDuration: time.Second, MaxOverrideTTL: time.Hour, MinThroughput: 1}}, t0)
		m.Evaluate(Input{At: t0, Trigger: TriggerStart, Sample: Sample{}.Clone()})
		lat := make([]int64, NumLatencyBuckets)
		lat[int(bucket)%NumLatencyBuckets] = success + failure
		for i := range 8 {
			now := t0.Add(time.Duration(i+1) * 300 * time.Millisecond)
			rep := Report{At: now, Success: success, Failure: failure, Latency: lat,
				Admission: &Admission{Admitted: admitted, Seconds: secs, Reporter: "r", Offered: map[int]int64{100: top, 60: top, 40: low, 10: low}}}
			m.Evaluate(Input{At: now, Trigger: []string{TriggerEvent, TriggerTick}[i%2], Sample: Sample{}.Clone(), Reports: []Report{rep}})
			if p := m.Published().Partial; p != nil && !(p.Fraction > 0 && p.Fraction < 1) {
				t.Fatalf("published fraction %v, want in (0, 1)", p.Fraction)
			}
		}
	})
}

// TestLawMeasuresAQueueItsClientsDoNotSee: the first report of a step
// whose queue is before the clients (on a saturated core, requests wait
// for the core before the middleware sees them) admits no more than
// completes, but its latency is far past the threshold, timed from the
// proxy. A service with a queue runs flat out: what it completed is its
// capacity, and the level goes to the one that fits it, not to the
// Emergency the table asks for. The span may have begun before the queue
// did, so what it completed is a floor: the creep takes the estimate past
// it (a measured saturation is a ceiling the creep stops at; read as one,
// the square wave's rises lost 5 points to an estimate measured low).
func TestLawMeasuresAQueueItsClientsDoNotSee(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, []lawStep{
		{at: time.Second, trigger: TriggerTick, x: 0.5, secs: 1, admitted: 400, success: 400, latencyMs: 15, level: "Normal", partial: "null"},
		{at: 2 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 800, success: 800, latencyMs: 450, latencyWindowMs: 460,
			level: "Major", partial: "null", reason: "capacity 800/s of 2400/s offered", capacity: [2]float64{800, 800}},
		{at: 3 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 480, success: 480, latencyMs: 60, latencyWindowMs: 460,
			level: "Major", partial: "30 0.41", capacity: [2]float64{815, 817}},
	})
}

// TestLawReadsTheOfferedLoadOverItsArrival: a 3x step of a service whose
// requests wait for a saturated core before the middleware: its first
// report counts what got through, 800/s of the 2,400/s offered, over a
// second. Read over the second, the latency takes the level to Moderate,
// which admits 1,200/s of the 2,400/s, until the next report (the load
// read fits it); the report's arrival_seconds
// (the proxy's stamps of those requests span a third of a second) reads
// it at 2,400/s, and the level goes straight to Major, the level that
// fits.
func TestLawReadsTheOfferedLoadOverItsArrival(t *testing.T) {
	for _, tc := range []struct {
		arrival float64
		level   string
	}{{0, "Moderate"}, {1.0 / 3, "Major"}} {
		t.Run(fmt.Sprint(tc.arrival), func(t *testing.T) {
			runLawSteps(t, AdmissionGraduated, []lawStep{
				{at: time.Second, trigger: TriggerTick, x: 0.5, secs: 1, admitted: 400, success: 400, latencyMs: 15, level: "Normal", partial: "null"},
				{at: 2 * time.Second, trigger: TriggerEvent, x: 1, secs: 1, arrival: tc.arrival, admitted: 800, success: 800, latencyMs: 450, latencyWindowMs: 460,
					level: tc.level, partial: "null", capacity: [2]float64{800, 800}},
			})
		})
	}
}

// TestLawReadsABurstOverItsArrival: at Major, the band admitted at 0.39,
// a second's report counts 4.5x the capacity where 3x is offered: a
// queue before the middleware drained, and its requests reached the
// client faster than they came. Read over the second, the floor alone is
// 720/s of the 760/s target, and the band is shed whole; the report's
// arrival_seconds (their stamps span 1.5s) reads the load at 3x, and the
// band stays at 0.39, as after a plain 3x second.
func TestLawReadsABurstOverItsArrival(t *testing.T) {
	for _, tc := range []struct {
		x, arrival float64
		partial    string
	}{{3, 0, "30 0.39"}, {4.5, 0, "null"}, {4.5, 1.5, "30 0.39"}} {
		t.Run(fmt.Sprint(tc.x, tc.arrival), func(t *testing.T) {
			runLawSteps(t, AdmissionGraduated, append(measuredAt800(), lawStep{
				at: 4 * time.Second, trigger: TriggerEvent, x: tc.x, secs: 1, arrival: tc.arrival, admitted: 760, success: 760, latencyMs: 60, errorRate: 60,
				latencyWindowMs: 450, level: "Major", partial: tc.partial}))
		})
	}
}

// TestLawStepsUpOnTheAverageOfferedLoad: at Major, where the 3x load fits,
// one report of 1.8 times the load (the requests of a saturated core
// reaching the middleware in a burst) does not take the level on to
// Severe for its dwell: the fraction follows the report, the level reads
// half of it beside the average.
func TestLawStepsUpOnTheAverageOfferedLoad(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, append(measuredAt800(), lawStep{
		at: 3600 * time.Millisecond, trigger: TriggerEvent, x: 5.5, secs: 0.6, admitted: 760, success: 760, latencyMs: 150, errorRate: 60, latencyWindowMs: 460,
		level: "Major", partial: "null", capacity: [2]float64{770, 800},
	}))
}

// TestLawReadsAStepOfTheLoadAtItsNewRate: after ten seconds at 0.6x, a
// rise to 1.6x is measured saturated and drained; then one second offers
// 1.5x, low by chance (at the benchmark's rates a second of Moderate's
// floor is a Poisson count of 640, 25 either way). The offered load's
// average, decayed over two seconds, still lagged the rise there: read at
// the higher of it and that second, the band below Moderate was admitted
// at 0.27 where 0.19 fits at 1.6x (in degbench overload's square wave the
// next second took 811/s of the 800, and the queue cost 3 s of answers
// past the SLO). Two reports in a row above the average are a step of
// the load: the average starts again from the second, and reads 1.56x
// here, so the band is admitted at 0.22.
func TestLawReadsAStepOfTheLoadAtItsNewRate(t *testing.T) {
	steps := append(quietSeconds(0.6, 10),
		lawStep{at: 11 * time.Second, trigger: TriggerEvent, x: 1.6, secs: 1, admitted: 1280, success: 800, latencyMs: 470, latencyWindowMs: 470,
			level: "Moderate", partial: "null", capacity: [2]float64{800, 800}},
		lawStep{at: 12 * time.Second, trigger: TriggerEvent, x: 1.6, secs: 1, admitted: 640, success: 800, latencyMs: 300, latencyWindowMs: 470,
			level: "Moderate", partial: "null"},
		lawStep{at: 13 * time.Second, trigger: TriggerEvent, x: 1.6, secs: 1, admitted: 640, success: 640, latencyMs: 40, latencyWindowMs: 470,
			level: "Moderate", partial: "10 0.19"},
		lawStep{at: 14 * time.Second, trigger: TriggerEvent, x: 1.5, secs: 1, admitted: 760, success: 760, latencyMs: 40, latencyWindowMs: 470,
			level: "Moderate", partial: "10 0.22"},
	)
	runLawSteps(t, AdmissionGraduated, steps)
}

// TestLawReadsAStepInShortReportsForTheFraction: after five seconds at
// 0.5x, the first report of a 10x step covers 0.6 s, most of it before
// the step (it counts 2.5x), and is measured saturated: Major fits what
// it counted. The reports after it are a quarter second long, since each
// change of the admission cuts the client's interval short, too short to
// read a rate from, and the average, decayed over two seconds, lags the
// step for seconds. Each count is still a step up from what the average
// expected, far past a short count's noise, and the fraction reads its
// rate: Major's floor (priorities 50 and up, 1,600/s) is over the target
// (760/s), so its band is shed whole. Read from the average, the band
// was admitted at 0.61, then 0.45, 0.21 and 0.07. (In degbench
// overload's step10x the average read Severe's band at about 700/s of
// 1,200 and its floor at 270/s of 400: the band was admitted at 0.61,
// 1,130/s of the 800 for a second, every answer past the SLO.) The level
// does not read a short report's rate (TestLawKeepsAShortBurstFromTheLevel);
// it steps to Severe once a report long enough to read a rate from
// says so, and Severe's band is admitted at (760 - 400) / 1,200 = 0.30.
func TestLawReadsAStepInShortReportsForTheFraction(t *testing.T) {
	steps := append(quietSeconds(0.5, 5),
		lawStep{at: 5600 * time.Millisecond, trigger: TriggerEvent, x: 2.5, secs: 0.6, admitted: 2000, success: 800, latencyMs: 450, latencyWindowMs: 450,
			level: "Major", partial: "null", capacity: [2]float64{800, 800}},
	)
	for i := range 4 {
		steps = append(steps, lawStep{at: 5850*time.Millisecond + time.Duration(i)*250*time.Millisecond, trigger: TriggerEvent, x: 10, secs: 0.25,
			admitted: 760, success: 760, latencyMs: 60, latencyWindowMs: 450, level: "Major", partial: "null"})
	}
	steps = append(steps, lawStep{at: 7350 * time.Millisecond, trigger: TriggerEvent, x: 10, secs: 0.5,
		admitted: 760, success: 760, latencyMs: 60, latencyWindowMs: 450, level: "Severe", partial: "50 0.30"})
	runLawSteps(t, AdmissionGraduated, steps)
}

// shortBurstAtMajor is a 3x overload measured at 800/s and admitted at
// Major, then a report of 0.3 s that counts the top class ten times its
// rate, its requests' stamps spanning 0.07 s (a queue before the
// middleware let them through at once), which sheds Major's band whole.
func shortBurstAtMajor() []lawStep {
	burst := lawMix(3, 0.3)
	burst[100] *= 10
	return append(measuredAt800(), []lawStep{
		{at: 4 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 760, success: 760, latencyMs: 60, latencyWindowMs: 450,
			level: "Major", partial: "30 0.39"},
		{at: 4300 * time.Millisecond, trigger: TriggerEvent, x: 3, secs: 0.3, arrival: 0.07, admitted: 760, success: 760, latencyMs: 60, latencyWindowMs: 490,
			offered: burst, level: "Major", partial: "null"},
	}...)
}

// TestLawKeepsAShortBurstFromTheLevel: the fraction reads
// shortBurstAtMajor's burst over the report's span (1,200/s, not 5,143/s
// over its arrival), and sheds Major's band whole until the next report
// long enough to read a rate from (the decayed average weighs its count
// for longer); the level does not read it, and stays at Major, though the
// window's latency asks for Emergency. (Read by the level too, such a
// report in degbench overload's step10x read the top class at 1,610/s of
// 400, Severe's floor did not fit, and the level went to Emergency for
// its dwell, admitting the top class alone.)
func TestLawKeepsAShortBurstFromTheLevel(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, append(shortBurstAtMajor(),
		// The next long report ends the burst's reading; the average still
		// weighs the burst's count.
		lawStep{at: 5300 * time.Millisecond, trigger: TriggerEvent, x: 3, secs: 1, admitted: 480, success: 480, latencyMs: 60, latencyWindowMs: 490,
			level: "Major", partial: "30 0.20"},
	))
}

// TestLawProbesNoFurtherThanTheReadmission: after shortBurstAtMajor's
// burst, the next long report comes from a service idle at Major's floor
// (15 ms): the probe of an idle service takes the estimate no further
// than the target that readmits the band, read as the level reads the
// load, so that the target stays within the 800/s measured a second
// before. (Probed a step past a readmission point read from the burst,
// the estimate went to 1,200/s, and the band came back at 0.69.)
func TestLawProbesNoFurtherThanTheReadmission(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, append(shortBurstAtMajor(),
		lawStep{at: 5300 * time.Millisecond, trigger: TriggerEvent, x: 3, secs: 1, admitted: 480, success: 480, latencyMs: 15, latencyWindowMs: 490,
			level: "Major", partial: "30 0.23", capacity: [2]float64{800, 800 / headroom}},
	))
}

// TestLawStepsWithoutACapacityOnFreshLatency: a 3x step of a service
// on one core whose first report is late but under twice the threshold
// (199 ms against 100 ms: no capacity measured) takes the level to Minor.
// At the next health check the window's p99 is past Emergency's
// threshold, from a report the client cut short at the change, which
// began before it: the level stays at Minor, where the fresh evidence
// put it, until a fresh report measures the capacity and sizes the step
// (Major). Read from the window, the step went to Emergency for its
// dwell, admitting the top class alone.
func TestLawStepsWithoutACapacityOnFreshLatency(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, []lawStep{
		{at: time.Second, trigger: TriggerTick, x: 0.5, secs: 1, admitted: 400, success: 400, latencyMs: 15, level: "Normal", partial: "null"},
		{at: 2 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 800, success: 800, latencyMs: 190, latencyWindowMs: 190,
			level: "Minor", partial: "null", reason: "latency p99"},
		{at: 2500 * time.Millisecond, trigger: TriggerTick, latencyWindowMs: 460, level: "Minor", partial: "null"},
		{at: 3500 * time.Millisecond, trigger: TriggerEvent, x: 3, secs: 1, admitted: 1000, success: 800, latencyMs: 450, latencyWindowMs: 460,
			level: "Major", partial: "null", reason: "capacity 800/s of 2400/s offered", capacity: [2]float64{800, 800}},
	})
}

// TestLawFirstMeasurementIsNoLessThanTheServiceCarried: a dependency's
// failures take the level to Emergency before a capacity is measured (the
// table's level for a failing dependency); then a short span at
// Emergency admits more than it completes, 50/s against 40/s, while the
// core works through requests queued before it. The service completed
// 800/s the second before, so the first measurement of its capacity is
// 800/s, not 40/s (which would hold the admission to the top class alone
// for the minute before the estimate may grow past it).
func TestLawFirstMeasurementIsNoLessThanTheServiceCarried(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, []lawStep{
		{at: time.Second, trigger: TriggerTick, x: 0.5, secs: 1, admitted: 400, success: 400, latencyMs: 15, level: "Normal", partial: "null"},
		{at: 2 * time.Second, trigger: TriggerTick, x: 3, secs: 1, admitted: 2400, success: 800, failure: 1600, latencyMs: 15, errorRate: 60,
			level: "Emergency", partial: "null"},
		{at: 2300 * time.Millisecond, trigger: TriggerEvent, x: 3, secs: 0.3, admitted: 50, success: 40, latencyMs: 450, errorRate: 60, latencyWindowMs: 460,
			level: "Emergency", partial: "null", capacity: [2]float64{800, 800}},
	})
}

// TestLawReadsABurstAfterAStepAsABurst: a 10x step reaches the middleware
// of a saturated stack late, then all at once: the first report after it
// offers 7x, the next 15x (what the queue before the middleware let
// through), both steps up, so the average starts again from 15x. The
// report after them offers 10x, as far down: the burst is over, and the
// average starts again from it, so Severe's band is admitted at (760 -
// 400) / 1200, not at the 0.16 of a floor read high for seconds as the
// burst decays out of the average.
func TestLawReadsABurstAfterAStepAsABurst(t *testing.T) {
	steps := append(quietSeconds(0.5, 5),
		lawStep{at: 5600 * time.Millisecond, trigger: TriggerEvent, x: 7, secs: 0.6, admitted: 5600, success: 800, latencyMs: 470, latencyWindowMs: 470,
			level: "Severe", partial: "50 0.12", capacity: [2]float64{800, 800}},
		lawStep{at: 6200 * time.Millisecond, trigger: TriggerEvent, x: 15, secs: 0.6, admitted: 2000, success: 800, latencyMs: 470, latencyWindowMs: 470,
			level: "Severe", partial: "null", capacity: [2]float64{800, 800}},
		lawStep{at: 7200 * time.Millisecond, trigger: TriggerEvent, x: 10, secs: 1, admitted: 700, success: 700, latencyMs: 40, latencyWindowMs: 470,
			level: "Severe", partial: "50 0.30"},
	)
	runLawSteps(t, AdmissionGraduated, steps)
}

// TestLawDrainsAStandingQueue: at Major with the band below admitted at
// 0.39, a hiccup of the service leaves a queue 300 ms behind that the
// clients keep full, admitting the 760/s it completes. The first such
// report may be the tail of a queue already drained; at the second in a
// row it is not a queue draining: the band is shed whole while it drains
// at the capacity not admitted (300 ms x 800/s at 293/s: 0.82 s), then
// admitted again. (Read as draining, the estimate stood and the queue
// with it: in degbench overload's cpu3x every answer came past the SLO
// for 5 s.)
func TestLawDrainsAStandingQueue(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, append(measuredAt800(), []lawStep{
		{at: 4 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 760, success: 760, latencyMs: 300, errorRate: 60, latencyWindowMs: 450,
			level: "Major", partial: "30 0.39", capacity: [2]float64{800, 800}},
		{at: 4500 * time.Millisecond, trigger: TriggerEvent, x: 3, secs: 0.5, admitted: 760, success: 760, latencyMs: 300, errorRate: 60, latencyWindowMs: 450,
			level: "Major", partial: "null", capacity: [2]float64{800, 800}},
		{at: 5500 * time.Millisecond, trigger: TriggerEvent, x: 3, secs: 1, admitted: 480, success: 600, latencyMs: 15, errorRate: 60, latencyWindowMs: 450,
			level: "Major", partial: "30 0.39", capacity: [2]float64{800, 800}},
	}...))
}

// TestLawEdgeCutsByTheSecond: the edge cut is 3% per second of reports
// under pressure, not per report. Each change of the fraction cuts the
// clients' interval short, so after a cut the reports come a quarter
// second apart, each still carrying the latency of the queue before it:
// cut per report, the estimate fell from 189/s to 175/s in 0.6 s in
// degbench overload's cpu3x, and crept back at 2% a second for 4 s. Two
// quarter-second reports at the edge cut 800/s by 0.75% each (the
// fraction follows at 2% of the target).
func TestLawEdgeCutsByTheSecond(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, append(measuredAt800(), []lawStep{
		{at: 3250 * time.Millisecond, trigger: TriggerEvent, x: 3, secs: 0.25, admitted: 760, success: 760, latencyMs: 150, errorRate: 60, latencyWindowMs: 150,
			level: "Major", partial: "30 0.39", capacity: [2]float64{793, 795}},
		{at: 3500 * time.Millisecond, trigger: TriggerEvent, x: 3, secs: 0.25, admitted: 760, success: 760, latencyMs: 150, errorRate: 60, latencyWindowMs: 150,
			level: "Major", partial: "30 0.39", capacity: [2]float64{787, 789}},
	}...))
}

// TestLawStopsCuttingAtALatencyTheLoadDoesNotCause: at 3x, the service
// keeps up with what the law admits, but its p99 stays at 150 ms, over
// the 100 ms threshold, whatever the admission. The law cuts 3% a second
// (edgeCut) until it has cut a tenth; the latency has not fallen, so it
// is not the load's: the estimate goes back to what was measured, and
// the cuts stop while the latency stays within 1.5x of it. Once the
// latency is quiet again the tail is forgotten, and a latency over the
// threshold cuts again.
func TestLawStopsCuttingAtALatencyTheLoadDoesNotCause(t *testing.T) {
	tail := func(at time.Duration, admitted float64, partial string, lo, hi float64) lawStep {
		return lawStep{at: at, trigger: TriggerEvent, x: 3, secs: 1, admitted: admitted, success: admitted, latencyMs: 150, latencyWindowMs: 150,
			level: "Major", partial: partial, capacity: [2]float64{lo, hi}}
	}
	runLawSteps(t, AdmissionGraduated, []lawStep{
		{at: time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 2400, success: 800, latencyMs: 450, latencyWindowMs: 450,
			level: "Major", partial: "null", capacity: [2]float64{800, 800}},
		tail(2*time.Second, 760, "null", 775, 777),
		tail(3*time.Second, 737, "30 0.33", 752, 753),
		tail(4*time.Second, 715, "30 0.30", 729, 731),
		// Cut by a tenth, the latency as it was: back to 800/s.
		tail(5*time.Second, 694, "30 0.39", 800, 800),
		tail(6*time.Second, 760, "30 0.39", 800, 800),
		tail(7*time.Second, 760, "30 0.39", 800, 800),
		// Quiet: the tail is forgotten (and an idle service is probed).
		{at: 8 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 760, success: 760, latencyMs: 15, latencyWindowMs: 150,
			level: "Major", partial: "30 0.49", capacity: [2]float64{879, 881}},
		tail(9*time.Second, 836, "30 0.46", 853, 854),
	})
}

// TestLawIsDeterministic: replay runs the machine again on recorded
// inputs, so the same inputs make the same decisions, to the last bit.
// Eight clients report a hundred priorities each; the sums of their
// offered loads were made in the order of Go's maps, which differs from
// run to run, and came out different in their last bits: a band with no
// load below a threshold was 0 in one run and 1e-13 in another, and
// published as admitted at 0.95 in one and as none in the other.
func TestLawIsDeterministic(t *testing.T) {
	run := func() []string {
		tab := simTable(t)
		t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		m := NewMachine(Config{Table: tab, Rules: Rules{MinimumLevelDuration: 10 * time.Second, Hysteresis: 0.1, MaxOverrideTTL: time.Hour, MinThroughput: 10}}, t0)
		m.Evaluate(Input{At: t0, Trigger: TriggerStart, Sample: Sample{}.Clone()})
		var trace []string
		for s := 1; s <= 30; s++ {
			now := t0.Add(time.Duration(s) * time.Second)
			x := 0.5
			if s > 5 {
				x = 3
			}
			var reports []Report
			for c := range 8 {
				offered := map[int]int64{}
				for p := 10; p < 110; p++ {
					offered[p] = int64(x*float64(p*(c+1)%17)) + 1
				}
				admitted := int64(float64(800/8) * min(x, 1.2))
				success, lat := admitted, 15.0
				if x > 1 {
					success, lat = 100, 450
				}
				l := make([]int64, NumLatencyBuckets)
				l[latencyBucket(lat)] = success
				reports = append(reports, Report{At: now, Success: success, Latency: l,
					Admission: &Admission{Admitted: admitted, Seconds: 1, Reporter: fmt.Sprintf("c%d", c), Offered: offered}})
			}
			m.Evaluate(Input{At: now, Trigger: TriggerEvent, Sample: Sample{}.Clone(), Reports: reports})
			p := m.Published()
			trace = append(trace, fmt.Sprintf("%d %s %b %b %b", p.Index, lawPartial(p.Partial), m.law.capacity, m.law.admittedFrom(0), m.law.steadyFrom(50)))
		}
		return trace
	}
	want := run()
	for i := range 20 {
		if got := run(); !slices.Equal(got, want) {
			for s := range got {
				if got[s] != want[s] {
					t.Fatalf("run %d, second %d: %s; the first run: %s", i+2, s+1, got[s], want[s])
				}
			}
		}
	}
}

// TestLawForgetsPrioritiesNoLongerOffered: a reporter keeps the
// priorities it offers, and forgets those it no longer does. One client
// offering 64 new priorities in each of 2,000 reports (10 a second) is
// left with at most 128; one offering the same four all along keeps the
// four.
func TestLawForgetsPrioritiesNoLongerOffered(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	m := NewMachine(Config{Table: simTable(t), Rules: Rules{MinimumLevelDuration: 10 * time.Second, Hysteresis: 0.1, MaxOverrideTTL: time.Hour, MinThroughput: 10}}, t0)
	m.Evaluate(Input{At: t0, Trigger: TriggerStart, Sample: Sample{}.Clone()})
	most := 0
	for i := range 2000 {
		now := t0.Add(time.Duration(i+1) * 100 * time.Millisecond)
		wandering := map[int]int64{}
		for k := range 64 {
			wandering[1000+i*64+k] = 1
		}
		m.Evaluate(Input{At: now, Trigger: TriggerEvent, Sample: Sample{}.Clone(), Reports: []Report{
			{At: now, Success: 64, Admission: &Admission{Admitted: 64, Seconds: 0.1, Reporter: "wandering", Offered: wandering}},
			{At: now, Success: 80, Admission: &Admission{Admitted: 80, Seconds: 0.1, Reporter: "steady", Offered: lawMix(1, 0.1)}},
		}})
		most = max(most, len(m.law.reporters["wandering"].counts))
	}
	if most > maxKept {
		t.Errorf("the wandering reporter held %d priorities at most, want at most %d", most, maxKept)
	}
	if got := m.law.reporters["steady"].keys; !slices.Equal(got, []int{10, 40, 60, 100}) {
		t.Errorf("the steady reporter keeps priorities %v, want [10 40 60 100]", got)
	}
	if got, want := m.law.admittedFrom(10)-m.law.admittedFrom(1000), 800.0; math.Abs(got-want) > 1 {
		t.Errorf("offered at 10..999: %.1f/s, want the steady reporter's %.0f/s", got, want)
	}
}

// TestLawOpensTheCeilingOverALowMeasurement: a 10x step's first report,
// read while the flood starves the host, measures 546/s, and the level
// goes to Severe. The queue then drains at 697/s over half a second: a
// floor over the measurement, which proves it low, so while the service
// is quiet (40 ms, under half the threshold, though not idle) it is
// probed as an idle one is, each whole second to 10% past what it
// completed over the headroom (662 x 1.1 / 0.95, then 728 x 1.1 / 0.95),
// not crept up at 2% a second. The first warm report (60 ms: the service
// near its capacity) closes the ceiling where the estimate is (the creep
// of that decision included). (With the floor as its ceiling, the
// estimate stayed at 697/s for 6 s in degbench overload's step10x, the
// band below Severe at 0.20 where 0.30 fits; crept up, a service the
// flood kept at a p99 of 40-50 ms took 10 s from 559/s to 800/s.)
func TestLawOpensTheCeilingOverALowMeasurement(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, append(lowMeasurementThenDrain(0.5, 697),
		servedAt10x(5100*time.Millisecond, 40, "50 0.27", [2]float64{766, 767}),
		at10x(6100*time.Millisecond, 728, 728, 40, "50 0.33", [2]float64{842, 843}),
		at10x(7100*time.Millisecond, 800, 800, 60, "50 0.33", [2]float64{859, 860}),
		at10x(8100*time.Millisecond, 800, 800, 40, "50 0.33", [2]float64{859, 860}),
	))
}

// TestLawClosesTheCeilingAtAMeasurement: the ceiling the drain opened
// closes at the next saturation, over what it measured: the quiet reports
// after it creep no further.
func TestLawClosesTheCeilingAtAMeasurement(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, append(lowMeasurementThenDrain(0.5, 697),
		servedAt10x(5100*time.Millisecond, 40, "50 0.27", [2]float64{766, 767}),
		at10x(6100*time.Millisecond, 780, 740, 90, "50 0.25", [2]float64{740, 740}),
		servedAt10x(7100*time.Millisecond, 40, "50 0.25", [2]float64{740, 740}),
		servedAt10x(8100*time.Millisecond, 40, "50 0.25", [2]float64{740, 740}),
	))
}

// TestLawOpensNoCeilingOnAQuarterSecond: a drain over a quarter second
// at 580/s, 6% over the 546/s measured, opens nothing: a queue drains in
// bursts, and a quarter second of one completed 805/s of an 800/s service
// in degbench overload's spike12x, 6% over its ceiling, where the open
// ceiling let the creep walk the estimate to about 915/s. The estimate
// goes to what the service then carries quietly, 662/s, and no further.
func TestLawOpensNoCeilingOnAQuarterSecond(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, append(lowMeasurementThenDrain(0.25, 580),
		servedAt10x(4350*time.Millisecond+time.Second, 40, "50 0.19", [2]float64{662, 662}),
		servedAt10x(4350*time.Millisecond+2*time.Second, 40, "50 0.19", [2]float64{662, 662}),
	))
}

// TestLawOpensTheCeilingOnAQuarterSecondFarOver: the drain at 697/s over
// a quarter second, 28% over the 546/s measured, more than one short
// report may lower the estimate by (shortCut), proves the measurement
// low as a longer one does, and the probe takes the estimate on from the
// floor while the service is quiet, to 10% past what it completed over
// the headroom. (A third of a second completing 745/s over a ceiling of
// 483/s held the estimate at 745-777/s for 16 s in degbench overload's
// step10x, the band at 0.23-0.26 where 0.30 fits.)
func TestLawOpensTheCeilingOnAQuarterSecondFarOver(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, append(lowMeasurementThenDrain(0.25, 697),
		servedAt10x(4350*time.Millisecond+time.Second, 40, "50 0.27", [2]float64{766, 767}),
		servedAt10x(4350*time.Millisecond+2*time.Second, 40, "50 0.27", [2]float64{766, 767}),
	))
}

// lowMeasurementThenDrain are quietSeconds at 0.5x, then a 10x step whose
// first report measures 546/s (Severe), then a queue draining at floor/s
// over secs, ending at 3.6 s + secs.
func lowMeasurementThenDrain(secs, floor float64) []lawStep {
	return append(quietSeconds(0.5, 3),
		lawStep{at: 3600 * time.Millisecond, trigger: TriggerEvent, x: 10, secs: 0.6, admitted: 4000, success: 546, latencyMs: 470, errorRate: 60, latencyWindowMs: 470,
			level: "Severe", partial: "null", capacity: [2]float64{545, 546}},
		lawStep{at: 3600*time.Millisecond + time.Duration(secs*float64(time.Second)), trigger: TriggerEvent, x: 10, secs: secs, admitted: 490, success: floor, latencyMs: 900, errorRate: 60, latencyWindowMs: 900,
			level: "Severe", partial: "null", capacity: [2]float64{floor - 1, floor}},
	)
}

// servedAt10x is a one-second report at 10x of a service at Severe
// answering the 662/s admitted within latencyMs (40 ms: quiet; 60 ms: warm).
func servedAt10x(at time.Duration, latencyMs float64, partial string, capacity [2]float64) lawStep {
	return at10x(at, 662, 662, latencyMs, partial, capacity)
}

// at10x is a second's report at 10x, Severe expected: the clients
// admitted admitted/s, success/s completed, every latency latencyMs, and
// the partial and capacity estimate the law must give after it.
func at10x(at time.Duration, admitted, success, latencyMs float64, partial string, capacity [2]float64) lawStep {
	return lawStep{at: at, trigger: TriggerEvent, x: 10, secs: 1, admitted: admitted, success: success, latencyMs: latencyMs, errorRate: 60, latencyWindowMs: 470,
		level: "Severe", partial: partial, capacity: capacity}
}

// TestLawProbesPastWhatAnIdleServiceCarried: an idle second completing
// 720/s, more than the 700/s measured (the clients admit around the
// target), is probed from there: 720 x 1.1 / 0.95. It was taken to 720/s
// alone, with no probe, and the estimate stayed near its first
// measurement while the service sat idle.
func TestLawProbesPastWhatAnIdleServiceCarried(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, append(quietSeconds(0.5, 3),
		at10x(4*time.Second, 4000, 700, 470, "null", [2]float64{700, 700}),
		at10x(5*time.Second, 720, 720, 15, "50 0.33", [2]float64{833, 834}),
	))
}

// TestLawMeasuresAfterAProbeFromTheLastMeasurement: the probe of a quiet
// second takes the estimate from the 800/s measured to 880/s; the next
// second is warm and saturated, completing 800/s. The estimate goes back
// to 800/s, the average of the measurements, not to 840/s, the average
// with the probe's untested 880/s, whose admission would keep the queue
// the probe built standing.
func TestLawMeasuresAfterAProbeFromTheLastMeasurement(t *testing.T) {
	runLawSteps(t, AdmissionGraduated, append(measuredAt800(), []lawStep{
		{at: 4 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 760, success: 760, latencyMs: 15, errorRate: 60, latencyWindowMs: 450,
			level: "Major", partial: "30 0.49", capacity: [2]float64{879, 881}},
		{at: 5 * time.Second, trigger: TriggerEvent, x: 3, secs: 1, admitted: 836, success: 800, latencyMs: 90, errorRate: 60, latencyWindowMs: 450,
			level: "Major", partial: "30 0.39", capacity: [2]float64{800, 800}},
	}...))
}
