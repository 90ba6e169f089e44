package main

import (
	"fmt"
	"time"
)

// The classes of the offered load: priority (X-Priority) and share of
// the requests. failsafe-go sees them as very high, high, medium, low.
// The top class is 5% of the load: at 10x, 10% would offer the top class
// alone at exactly the service's capacity, which no admission policy can
// serve within the queue bound (DESIGN asks 99.5% of it at 10x).
var overloadClasses = []struct {
	Priority int
	Share    float64
}{{100, 0.05}, {60, 0.15}, {40, 0.30}, {10, 0.50}}

// judgeAfter is how long after its start a phase is judged from
// (DESIGN.md: "judged over each overload phase from 2 s after its start").
const judgeAfter = 2 * time.Second

// sloFactor: a success counts toward goodput if it took at most
// sloFactor x the service time.
const sloFactor = 10

// phaseSpec is one phase of a scenario: a constant offered rate per class
// for a duration.
type phaseSpec struct {
	Name    string
	Seconds float64
	Rates   []float64 // requests/s per class, in overloadClasses order
	// Judged phases get the pass/fail checks: every overload phase and
	// every half of the square wave.
	Judged bool
	// TopClass: the top class must succeed >= 99.5% (3x, 10x, the spike).
	TopClass bool
}

// Offered is the phase's total offered rate.
func (p phaseSpec) Offered() float64 {
	var s float64
	for _, r := range p.Rates {
		s += r
	}
	return s
}

// scenarioSpec is a sequence of phases run against every system, each on
// a fresh service (and daemon).
type scenarioSpec struct {
	Name  string
	Title string
	CPU   bool // the CPU-bound service, pinned to one core
	// Capacity is the service's requests/s: workers / service time (sleep
	// mode) or one core / burn (CPU mode).
	Capacity float64
	// Measured is what the CPU-bound service completed closed-loop with no
	// gate, measured before the systems ran (overload_capacity.go); nil
	// in sleep mode, whose capacity is kept by deadline.
	Measured *capacityMeasured `json:",omitempty"`
	Phases   []phaseSpec
	// Crash, when set, is when (seconds from the start) degraded's daemon
	// is SIGKILLed and restarted on the same address and data_dir.
	Crash float64
}

// judgedCapacity is the capacity goodput and the levels that fit are
// judged against: the nominal, or what the service was measured to
// complete when that is less.
func (s scenarioSpec) judgedCapacity() float64 {
	if s.Measured != nil && s.Measured.Rate > 0 {
		return min(s.Capacity, s.Measured.Rate)
	}
	return s.Capacity
}

// goodputPercent is a rate of successes within the SLO in percent of
// min(the offered rate, the judged capacity).
func (s scenarioSpec) goodputPercent(good, offered float64) float64 {
	return 100 * good / min(offered, s.judgedCapacity())
}

// Seconds is the scenario's length.
func (s scenarioSpec) Seconds() float64 {
	var t float64
	for _, p := range s.Phases {
		t += p.Seconds
	}
	return t
}

// mixRates is the class mix at total rate x capacity.
func mixRates(capacity, x float64) []float64 {
	r := make([]float64, len(overloadClasses))
	for i, c := range overloadClasses {
		r[i] = capacity * x * c.Share
	}
	return r
}

// spikeRates is the base mix at x capacity with the lowest class
// multiplied by k (Netflix's prefetch spike).
func spikeRates(capacity, x, k float64) []float64 {
	r := mixRates(capacity, x)
	r[len(r)-1] *= k
	return r
}

// stepLengths are a step scenario's phases, in seconds: before the step,
// the step, after it.
type stepLengths struct{ before, step, after float64 }

// phaseLengths are every scenario's phase durations. A full run keeps
// the step to about 12 minutes on 2 cores (the 10x and CPU-bound steps run
// one system at a time); the 3x step is the minute of issue 21.
type phaseLengths struct {
	step3x, step10x, spike, cpu3x stepLengths
	// crash3x's 3x step is in two halves, the daemon restarted between.
	crash3x stepLengths
	half    float64 // the square wave's half
	halves  int
}

var (
	fullLengths = phaseLengths{
		step3x: stepLengths{10, 60, 30}, step10x: stepLengths{5, 20, 10}, spike: stepLengths{5, 20, 15},
		cpu3x: stepLengths{5, 25, 10}, half: 20, halves: 4, crash3x: stepLengths{10, 60, 10},
	}
	// quickLengths is QUICK=1's smoke: a few seconds per phase, each
	// longer than judgeAfter.
	quickLengths = phaseLengths{
		step3x: stepLengths{3, 6, 4}, step10x: stepLengths{3, 4, 3}, spike: stepLengths{3, 4, 3},
		cpu3x: stepLengths{3, 4, 3}, half: 4, halves: 2, crash3x: stepLengths{3, 8, 3},
	}
)

// overloadScenarios are DESIGN.md's scenarios for a sleep-mode capacity
// and a CPU-mode one.
func overloadScenarios(l phaseLengths, capacity, cpuCapacity float64) []scenarioSpec {
	under := func(c, x, secs float64) phaseSpec {
		return phaseSpec{Name: fmt.Sprintf("%gx", x), Seconds: secs, Rates: mixRates(c, x)}
	}
	step := func(name, title string, cpu bool, c, x float64, l stepLengths) scenarioSpec {
		return scenarioSpec{Name: name, Title: title, CPU: cpu, Capacity: c, Phases: []phaseSpec{
			under(c, 0.5, l.before),
			{Name: fmt.Sprintf("%gx", x), Seconds: l.step, Rates: mixRates(c, x), Judged: true, TopClass: true},
			{Name: "0.5x after", Seconds: l.after, Rates: mixRates(c, 0.5)},
		}}
	}
	spike := scenarioSpec{Name: "spike12x", Title: "the lowest class x12 over 0.8x (Netflix's case)", Capacity: capacity, Phases: []phaseSpec{
		under(capacity, 0.8, l.spike.before),
		{Name: "spike", Seconds: l.spike.step, Rates: spikeRates(capacity, 0.8, 12), Judged: true, TopClass: true},
		{Name: "0.8x after", Seconds: l.spike.after, Rates: mixRates(capacity, 0.8)},
	}}
	square := scenarioSpec{Name: "square", Title: fmt.Sprintf("square wave 0.6x / 1.6x, %gs halves", l.half), Capacity: capacity}
	for i := range l.halves {
		x := 0.6
		if i%2 == 1 {
			x = 1.6
		}
		square.Phases = append(square.Phases, phaseSpec{Name: fmt.Sprintf("%gx #%d", x, i/2+1), Seconds: l.half, Rates: mixRates(capacity, x), Judged: true})
	}
	// crash3x: a daemon crash in a steady 3x overload, restarted by its
	// supervisor on its data_dir. Not in DESIGN.md's list: it measures what
	// a restart costs the admission (state.json keeps the capacity
	// estimate; partial is not kept).
	half := l.crash3x.step / 2
	crash := scenarioSpec{Name: "crash3x", Title: fmt.Sprintf("3x, the daemon SIGKILLed and restarted %gs into it", half), Capacity: capacity,
		Crash: l.crash3x.before + half, Phases: []phaseSpec{
			under(capacity, 0.5, l.crash3x.before),
			{Name: "3x", Seconds: half, Rates: mixRates(capacity, 3), Judged: true, TopClass: true},
			{Name: "3x restarted", Seconds: half, Rates: mixRates(capacity, 3), Judged: true, TopClass: true},
			{Name: "0.5x after", Seconds: l.crash3x.after, Rates: mixRates(capacity, 0.5)},
		}}
	return []scenarioSpec{
		step("step3x", "step to 3x capacity", false, capacity, 3, l.step3x),
		step("step10x", "step to 10x capacity", false, capacity, 10, l.step10x),
		spike,
		square,
		step("cpu3x", "CPU-bound service on one core, step to 3x", true, cpuCapacity, 3, l.cpu3x),
		crash,
	}
}
