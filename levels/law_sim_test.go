package levels

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// sim is a service of fixed capacity behind a client that reports as the
// Go client does (every second, and at once when the state changes, the
// next interval cut to 250ms), driving a machine in graduated mode: the
// closed loop the admission law runs in, in fake time, with no I/O.
type sim struct {
	t       *testing.T
	m       Machine
	now     time.Time
	rng     *rand.Rand
	free    []time.Time // when each worker is free
	pending []completion
	// failRate is the share of admitted requests that fail whatever the
	// load: a dependency failure.
	failRate float64
	// offered is the load by priority, requests per second.
	offered map[int]float64

	// the client's interval
	start     time.Time
	seq       uint64
	counts    map[int]int64
	adm, shed int64
	succ, fl  int64
	lat       [NumLatencyBuckets]int64
	nextFlush time.Time
	reports   []Report

	// the daemon's 10s window, in one-second buckets
	win [10]struct {
		att, fail int64
		lat       [NumLatencyBuckets]int64
	}
	winAt int

	verbose   bool
	changes   int
	lastLevel int
	levels    []int // the published level each second
	admitted  []float64
}

const simStep = 10 * time.Millisecond

func newSim(t *testing.T, tab *Table, offered map[int]float64) *sim {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := &sim{t: t, now: t0, rng: rand.New(rand.NewPCG(1, 2)), offered: offered,
		m:      NewMachine(Config{Table: tab, Rules: Rules{MinimumLevelDuration: 10 * time.Second, Hysteresis: 0.1, MaxOverrideTTL: time.Hour, MinThroughput: 10}}, t0),
		counts: map[int]int64{}, start: t0, nextFlush: t0.Add(time.Second)}
	s.m.Evaluate(Input{At: t0, Trigger: TriggerStart, Sample: s.sample()})
	return s
}

// sample is what the daemon's window shows.
func (s *sim) sample() Sample {
	var w Window
	var lat [NumLatencyBuckets]int64
	for _, b := range s.win {
		w.Attempts += b.att
		w.Failures += b.fail
		for i, n := range b.lat {
			lat[i] += n
		}
	}
	w.Latency = lat[:]
	smp := Sample{}.Clone()
	s.m.Config().Table.ReadWindow(&smp, w, 10)
	return smp
}

// run advances d, evaluating a tick each second and the reports as they
// come (at most four times a second). Arrivals are Poisson; the service is
// workers servers of serviceTime each, and a request that waits more than
// queueLimit for one fails.
func (s *sim) run(d time.Duration) {
	end := s.now.Add(d)
	lastEval := s.now
	nextTick := s.now.Add(time.Second)
	for s.now.Before(end) {
		stepEnd := s.now.Add(simStep)
		p := s.m.Published()
		th := s.m.Config().Table.Level(p.Index).PriorityThreshold
		for prio, rate := range s.offered {
			for at := s.now.Add(s.exp(rate)); at.Before(stepEnd); at = at.Add(s.exp(rate)) {
				s.counts[prio]++
				if !p.Partial.Admits(prio, th, s.rng.Float64()) {
					s.shed++
					continue
				}
				s.adm++
				s.serve(at)
			}
		}
		s.now = stepEnd
		s.complete()
		if s.m.Published().Index != s.lastLevel {
			s.changes++
			s.lastLevel = s.m.Published().Index
		}
		// The client: a new sequence ends the interval at once.
		if out := s.curSeq(); out != s.seq {
			s.flush()
			s.seq = out
			s.nextFlush = s.now.Add(250 * time.Millisecond)
		} else if !s.now.Before(s.nextFlush) {
			s.flush()
			s.nextFlush = s.now.Add(time.Second)
		}
		if len(s.reports) > 0 && s.now.Sub(lastEval) >= 250*time.Millisecond {
			s.evaluate(TriggerEvent)
			lastEval = s.now
		}
		if !s.now.Before(nextTick) {
			s.winAt = (s.winAt + 1) % len(s.win)
			s.win[s.winAt] = struct {
				att, fail int64
				lat       [NumLatencyBuckets]int64
			}{}
			s.evaluate(TriggerTick)
			nextTick = nextTick.Add(time.Second)
			s.levels = append(s.levels, s.m.Published().Index)
			s.admitted = append(s.admitted, s.admittedShare())
		}
	}
}

// exp is a Poisson process's next gap at rate per second.
func (s *sim) exp(rate float64) time.Duration {
	if rate <= 0 {
		return time.Hour
	}
	return time.Duration(s.rng.ExpFloat64() / rate * float64(time.Second))
}

const (
	workers     = 8
	serviceTime = 10 * time.Millisecond
	queueLimit  = 400 * time.Millisecond
)

// serve runs one admitted request arriving at at: the earliest free
// worker takes it, unless it would wait more than queueLimit.
func (s *sim) serve(at time.Time) {
	if s.free == nil {
		s.free = make([]time.Time, workers)
	}
	i := 0
	for j := range s.free {
		if s.free[j].Before(s.free[i]) {
			i = j
		}
	}
	begin := s.free[i]
	if begin.Before(at) {
		begin = at
	}
	done := completion{at: at.Add(queueLimit), failed: true}
	if begin.Sub(at) <= queueLimit {
		s.free[i] = begin.Add(serviceTime)
		done = completion{at: s.free[i], failed: s.rng.Float64() < s.failRate}
	}
	done.ms = float64(done.at.Sub(at)) / float64(time.Millisecond)
	s.pending = append(s.pending, done)
}

// completion is a request's outcome, counted when it completes.
type completion struct {
	at     time.Time
	ms     float64
	failed bool
}

// complete counts the outcomes of the requests done by now, as the
// client's middleware does when the handler returns.
func (s *sim) complete() {
	kept := s.pending[:0]
	for _, c := range s.pending {
		if c.at.After(s.now) {
			kept = append(kept, c)
			continue
		}
		b := &s.win[s.winAt]
		b.att++
		bucket := latencyBucket(c.ms)
		s.lat[bucket]++
		b.lat[bucket]++
		if c.failed {
			s.fl++
			b.fail++
		} else {
			s.succ++
		}
	}
	s.pending = kept
}

// curSeq stands for the state's sequence: it changes with the admission.
func (s *sim) curSeq() uint64 {
	p := s.m.Published()
	f := 0.0
	if p.Partial != nil {
		f = p.Partial.Fraction
	}
	return uint64(p.Index)*1000 + uint64(f*100)
}

func latencyBucket(ms float64) int {
	for i, b := range LatencyBounds() {
		if ms <= b {
			return i
		}
	}
	return NumLatencyBuckets - 1
}

func (s *sim) flush() {
	secs := s.now.Sub(s.start).Seconds()
	if secs <= 0 {
		return
	}
	offered := make(map[int]int64, len(s.counts))
	for p, n := range s.counts {
		offered[p] = n
	}
	lat := s.lat
	s.reports = append(s.reports, Report{At: s.now, Success: s.succ, Failure: s.fl, Latency: lat[:],
		Admission: &Admission{Sequence: s.seq, Admitted: s.adm, ShedBelow: s.shed, Seconds: secs, Reporter: "a", Offered: offered}})
	s.start, s.counts, s.adm, s.shed, s.succ, s.fl, s.lat = s.now, map[int]int64{}, 0, 0, 0, 0, [NumLatencyBuckets]int64{}
}

func (s *sim) evaluate(trigger string) {
	rs := MergeReports(s.reports)
	s.reports = nil
	out := s.m.Evaluate(Input{At: s.now, Trigger: trigger, Sample: s.sample(), Reports: rs})
	if s.verbose {
		for _, e := range out.Entries {
			s.t.Logf("%s %s: %s -> %s: %s (capacity %.0f, target %.0f)", s.now.Format("15:04:05.00"), trigger, e.From, e.To, e.Reason, s.m.law.capacity, s.m.law.target)
		}
	}
}

// admittedShare is the share of the offered load the published state admits.
func (s *sim) admittedShare() float64 {
	p := s.m.Published()
	th := s.m.Config().Table.Level(p.Index).PriorityThreshold
	var adm, all float64
	for prio, r := range s.offered {
		all += r
		switch {
		case prio >= th:
			adm += r
		case p.Partial != nil && prio >= p.Partial.From:
			adm += r * p.Partial.Fraction
		}
	}
	return adm / all
}

func (s *sim) describe() string {
	p := s.m.Published()
	var b strings.Builder
	fmt.Fprintf(&b, "level %s", s.m.Config().Table.Level(p.Index).Name)
	if p.Partial != nil {
		fmt.Fprintf(&b, " partial %+v", *p.Partial)
	}
	fmt.Fprintf(&b, ", capacity estimate %.0f/s, target %.0f/s, admitting %.0f%% of the offered load, %d level changes",
		s.m.law.capacity, s.m.law.target, 100*s.admittedShare(), s.changes)
	return b.String()
}

func simTable(t *testing.T) *Table {
	t.Helper()
	tab, err := NewTable([]Level{
		{Name: "Minor", PriorityThreshold: 10, Thresholds: Thresholds{Latency: 100, ErrorRate: 1}},
		{Name: "Moderate", PriorityThreshold: 30, Thresholds: Thresholds{Latency: 200, ErrorRate: 5}},
		{Name: "Major", PriorityThreshold: 50, Thresholds: Thresholds{Latency: 300, ErrorRate: 10}},
		{Name: "Severe", PriorityThreshold: 70, Thresholds: Thresholds{Latency: 400, ErrorRate: 25}},
		{Name: "Emergency", PriorityThreshold: 100, Thresholds: Thresholds{Latency: 450, ErrorRate: 50}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func TestLawSimulation(t *testing.T) {
	mix := func(total float64) map[int]float64 {
		return map[int]float64{100: 0.1 * total, 60: 0.2 * total, 40: 0.3 * total, 10: 0.4 * total}
	}
	s := newSim(t, simTable(t), mix(400))
	s.verbose = testing.Verbose()
	s.run(10 * time.Second)
	t.Logf("0.5x: %s", s.describe())
	s.offered = mix(2400)
	for i := range 12 {
		s.run(5 * time.Second)
		t.Logf("3x +%ds: %s", 5*(i+1), s.describe())
	}
	s.offered = mix(400)
	for i := range 6 {
		s.run(5 * time.Second)
		t.Logf("0.5x +%ds: %s", 5*(i+1), s.describe())
	}
}

func TestLawSimulationDependencyFailure(t *testing.T) {
	offered := map[int]float64{95: 5, 60: 5, 40: 5, 10: 5}
	s := newSim(t, simTable(t), offered)
	s.verbose = testing.Verbose()
	s.run(10 * time.Second)
	s.failRate = 0.3
	for i := range 8 {
		s.run(5 * time.Second)
		t.Logf("failing +%ds: %s", 5*(i+1), s.describe())
	}
	s.failRate = 0
	for i := range 12 {
		s.run(5 * time.Second)
		t.Logf("recovered +%ds: %s", 5*(i+1), s.describe())
	}
}

func TestLawSimulationScenarios(t *testing.T) {
	mix := func(total float64) map[int]float64 {
		return map[int]float64{100: 0.05 * total, 60: 0.15 * total, 40: 0.3 * total, 10: 0.5 * total}
	}
	t.Run("10x", func(t *testing.T) {
		s := newSim(t, simTable(t), mix(400))
		s.verbose = testing.Verbose()
		s.run(10 * time.Second)
		s.offered = mix(8000)
		for i := range 6 {
			s.run(5 * time.Second)
			t.Logf("10x +%ds: %s", 5*(i+1), s.describe())
		}
	})
	t.Run("12x spike", func(t *testing.T) {
		s := newSim(t, simTable(t), mix(640))
		s.verbose = testing.Verbose()
		s.run(10 * time.Second)
		spike := mix(640)
		spike[10] *= 12
		s.offered = spike
		for i := range 6 {
			s.run(5 * time.Second)
			t.Logf("spike +%ds: %s", 5*(i+1), s.describe())
		}
	})
	t.Run("square", func(t *testing.T) {
		s := newSim(t, simTable(t), mix(480))
		s.verbose = testing.Verbose()
		for i := range 6 {
			if i%2 == 0 {
				s.offered = mix(1280)
			} else {
				s.offered = mix(480)
			}
			for j := range 4 {
				s.run(5 * time.Second)
				t.Logf("half %d +%ds: %s", i, 5*(j+1), s.describe())
			}
		}
	})
}
