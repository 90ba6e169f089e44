package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// `degbench overload`: DESIGN.md's overload benchmark. A service of fixed
// capacity (overload_service.go) behind each system (overload_gates.go),
// open-loop Poisson load with a priority mix (overload_load.go), the
// scenarios of overload_scenario.go, one system at a time on a fresh
// service and daemon, every system with the same arrivals (the same seed).
// The results are judged and plotted by the report (report_overload.go).

// overloadOptions are the flags of `degbench overload`.
type overloadOptions struct {
	binary      string
	workers     int
	serviceTime time.Duration
	queueWait   time.Duration
	cpuWorkers  int
	burn        time.Duration
	inflightCap int
	bin         time.Duration
	quick       bool
	systems     []string
	scenarios   []string
	seed        uint64
	serviceCPU  string // the CPU-bound service's core
	loadCPU     string // the generator's and the daemon's core in the CPU-bound variant
	// bbrThreshold is aegis BBR's CPU threshold, per mille of its CPU
	// reading, which on this host is the mean over every core.
	bbrThreshold int64
	admissionKey string // auto, always, never
	// requestStart gives degraded's middleware the generator's send time
	// as a proxy's X-Request-Start (client.WithRequestStart).
	requestStart bool
	// concurrentRate bounds the systems run at once in a sleep-mode
	// scenario: as many as their peak offered rates sum to at most this
	// (at least one). The CPU-bound variant runs one at a time. At 10,000
	// the four systems ran step3x at once, and on a 2-core machine slower
	// than section 11's they saturated both cores: degraded graduated
	// served 666/s where it serves 752/s alone, failsafe-go 503/s where it
	// serves 600/s beside one other. The benchmark compares gates, not the
	// machine's spare cores.
	concurrentRate float64
	fixed          string // system fixed's admission (fixedAdmission's form)
	out            string
}

// capacity is the sleep-mode service's requests/s.
func (o overloadOptions) capacity() float64 { return float64(o.workers) / o.serviceTime.Seconds() }

// cpuCapacity is the CPU-bound service's requests/s: one core / burn.
func (o overloadOptions) cpuCapacity() float64 { return 1 / o.burn.Seconds() }

// cpuServiceTime is how long a request holds a worker when every worker
// is busy on the one core.
func (o overloadOptions) cpuServiceTime() time.Duration { return time.Duration(o.cpuWorkers) * o.burn }

// overloadResult is what `degbench overload` writes.
type overloadResult struct {
	Quick           bool
	Workers         int
	ServiceMs       float64
	QueueWaitMs     float64
	CPUWorkers      int
	BurnMs          float64
	BinSeconds      float64
	InflightCap     int
	Classes         []int     // priorities, in overloadClasses order
	Shares          []float64 // their shares of the load
	Seed            uint64
	AdmissionKey    bool   // the daemons were given `admission: {mode: ...}`
	RequestStart    bool   // degraded's middleware had client.WithRequestStart
	DaemonConfig    string // the latency scenarios' (without listen, data_dir)
	CPUDaemonConfig string
	CPUSignal       string // how the CPU-bound daemon read CPU
	BBRThreshold    int64
	Fixed           string `json:",omitempty"` // system fixed's admission, when it ran
	ServiceCPU      string
	LoadCPU         string
	Levels          []levelRow
	Scenarios       []scenarioResult
	Seconds         float64 // the whole step's wall time
}

type scenarioResult struct {
	scenarioSpec
	Runs []systemRun
	// Groups are the systems that ran at once, in the order they ran.
	Groups [][]string
}

// allSystems are the systems `degbench overload` knows, in the order its
// report shows them; defaultSystems those it runs unless told: all but
// fixed, which needs its admission (-fixed) and is a reference, not a
// peer (fixedAdmission).
var (
	allSystems     = []string{sysNone, sysFailsafe, sysAegis, sysLevels, sysGraduated, sysFixed}
	defaultSystems = allSystems[:5]
)

func overloadCmd(args []string) error {
	fs := flag.NewFlagSet("overload", flag.ExitOnError)
	var o overloadOptions
	fs.StringVar(&o.binary, "binary", "./degraded", "degraded binary")
	fs.IntVar(&o.workers, "workers", 8, "the service's workers")
	fs.DurationVar(&o.serviceTime, "service-time", 10*time.Millisecond, "the service time (sleep mode)")
	fs.DurationVar(&o.queueWait, "queue-wait", 400*time.Millisecond, "longest wait for a worker, then 500")
	fs.IntVar(&o.cpuWorkers, "cpu-workers", 4, "the CPU-bound service's workers")
	// 5 ms, not 2.5: the core also runs the service's HTTP stack, which at
	// 2.5 ms took 5% of it (saturated, the service completed about 380/s
	// of the nominal 400), and goodput is judged against the nominal.
	fs.DurationVar(&o.burn, "burn", 5*time.Millisecond, "CPU a CPU-bound request burns (capacity: one core / burn)")
	fs.IntVar(&o.inflightCap, "inflight-cap", 4000, "most requests in flight per system; an arrival beyond is failed")
	fs.DurationVar(&o.bin, "bin", 250*time.Millisecond, "width of the result bins")
	fs.BoolVar(&o.quick, "quick", false, "a few seconds per phase (QUICK=1's smoke)")
	systems := fs.String("systems", strings.Join(defaultSystems, ","), "systems to run (known: "+strings.Join(allSystems, ", ")+")")
	fixed := fs.String("fixed", "", "system fixed's admission: threshold[,from:fraction], e.g. 60,40:0.3 (priorities >= 60, and 40 up to 60 at 0.3)")
	scenarios := fs.String("scenarios", "", "scenarios to run (default: all)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the arrivals (the same for every system)")
	fs.StringVar(&o.serviceCPU, "service-cpu", "0", "CPU-bound variant: the service's core")
	fs.StringVar(&o.loadCPU, "load-cpu", "1", "CPU-bound variant: the generator's and the daemon's core")
	fs.Int64Var(&o.bbrThreshold, "bbr-cpu-threshold", 500, "aegis BBR's CPU threshold, per mille of the host's mean")
	fs.StringVar(&o.admissionKey, "admission-key", "auto", "write admission: {mode: ...}: auto (if the binary accepts it), always, never")
	fs.Float64Var(&o.concurrentRate, "concurrent-rate", 5000, "sleep-mode scenarios: run systems at once while their peak offered rates sum to at most this (requests/s)")
	fs.BoolVar(&o.requestStart, "request-start", true, "degraded's middleware times requests from the generator's send header, as from a proxy's X-Request-Start (client.WithRequestStart)")
	fs.StringVar(&o.out, "out", "overload.json", "result file")
	_ = fs.Parse(args)
	o.systems = strings.Split(*systems, ",")
	for _, s := range o.systems {
		if !slices.Contains(allSystems, s) {
			return fmt.Errorf("unknown system %q (known: %s)", s, strings.Join(allSystems, ", "))
		}
	}
	if slices.Contains(o.systems, sysFixed) {
		f, err := parseFixed(*fixed)
		if err != nil {
			return fmt.Errorf("system fixed needs -fixed: %w", err)
		}
		o.fixed = f.String()
	}
	lengths := fullLengths
	if o.quick {
		lengths = quickLengths
		o.concurrentRate = math.Inf(1) // a smoke: everything at once but the CPU-bound variant
	}
	specs := overloadScenarios(lengths, o.capacity(), o.cpuCapacity())
	if *scenarios != "" {
		o.scenarios = strings.Split(*scenarios, ",")
		specs = slices.DeleteFunc(specs, func(s scenarioSpec) bool { return !slices.Contains(o.scenarios, s.Name) })
		if len(specs) == 0 {
			return fmt.Errorf("no scenario named in %q", *scenarios)
		}
	}

	began := time.Now()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	env := &runEnv{self: self, binary: o.binary, o: o}
	switch o.admissionKey {
	case "always":
		env.admissionKey = true
	case "auto":
		if env.admissionKey, err = acceptsAdmission(o.binary); err != nil {
			return err
		}
	}
	res := overloadResult{
		Quick: o.quick, Workers: o.workers, ServiceMs: ms(o.serviceTime), QueueWaitMs: ms(o.queueWait),
		CPUWorkers: o.cpuWorkers, BurnMs: ms(o.burn), BinSeconds: o.bin.Seconds(), InflightCap: o.inflightCap,
		Seed: o.seed, AdmissionKey: env.admissionKey, RequestStart: o.requestStart, BBRThreshold: o.bbrThreshold, Fixed: o.fixed,
		ServiceCPU: o.serviceCPU, LoadCPU: o.loadCPU, DaemonConfig: env.daemonConfig(false, modeGraduated),
	}
	for _, c := range overloadClasses {
		res.Classes, res.Shares = append(res.Classes, c.Priority), append(res.Shares, c.Share)
	}
	fmt.Fprintf(os.Stderr, "overload: admission key %v; %d scenarios x %d systems\n", env.admissionKey, len(specs), len(o.systems))
	for i, sc := range specs {
		r, err := runScenario(env, sc, rotate(o.systems, i), &res)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.Name, err)
		}
		res.Scenarios = append(res.Scenarios, r)
	}
	res.Levels = env.levels
	res.Seconds = time.Since(began).Seconds()
	fmt.Fprintf(os.Stderr, "overload: done in %.0fs\n", res.Seconds)
	return writeJSON(o.out, res)
}

// runScenario runs every system through one scenario, in the order
// given, and returns their runs in allSystems order.
func runScenario(env *runEnv, sc scenarioSpec, systems []string, res *overloadResult) (scenarioResult, error) {
	out := scenarioResult{scenarioSpec: sc}
	if sc.CPU {
		cleanup, err := env.enterCPUMode(res)
		if err != nil {
			return out, err
		}
		defer cleanup()
		m, err := measureCPUCapacity(env, env.capacityRun())
		if err != nil {
			return out, err
		}
		out.Measured = &m
		sc = out.scenarioSpec
	}
	systems = slices.DeleteFunc(slices.Clone(systems), func(s string) bool {
		return s == sysAegis && !sc.CPU // BBR sheds by CPU: the CPU-bound variant only
	})
	out.Groups = runGroups(systems, sc, env.o.concurrentRate)
	for _, group := range out.Groups {
		fmt.Fprintf(os.Stderr, "overload: %s, %s (%.0fs)\n", sc.Name, strings.Join(group, " + "), sc.Seconds())
		runs := make([]systemRun, len(group))
		errs := make([]error, len(group))
		var wg sync.WaitGroup
		for i, system := range group {
			wg.Go(func() { runs[i], errs[i] = runSystem(env, sc, system, env.o.seed) })
		}
		wg.Wait()
		for i, run := range runs {
			if errs[i] != nil {
				return out, fmt.Errorf("%s: %w", group[i], errs[i])
			}
			fmt.Fprintf(os.Stderr, "overload: %s, %s: %s\n", sc.Name, run.System, runSummary(sc, run, env.o.bin.Seconds()))
			out.Runs = append(out.Runs, run)
		}
	}
	slices.SortFunc(out.Runs, func(a, b systemRun) int {
		return slices.Index(allSystems, a.System) - slices.Index(allSystems, b.System)
	})
	return out, nil
}

// runGroups splits the systems into groups run at once: as many as their
// peak offered rates sum to at most budget, one at a time in the
// CPU-bound variant (its capacity is the one core they would share).
func runGroups(systems []string, sc scenarioSpec, budget float64) [][]string {
	var peak float64
	for _, p := range sc.Phases {
		peak = max(peak, p.Offered())
	}
	size := 1
	if !sc.CPU && peak > 0 {
		size = int(max(1, min(budget/peak, float64(len(systems)))))
	}
	var out [][]string
	for len(systems) > 0 {
		n := min(size, len(systems))
		out = append(out, systems[:n])
		systems = systems[n:]
	}
	return out
}

// enterCPUMode pins this process (and so the daemons it starts) to the
// load core and makes the service's cgroup; the returned func undoes both.
func (env *runEnv) enterCPUMode(res *overloadResult) (func(), error) {
	online, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, err
	}
	if err := pinSelf(env.o.loadCPU); err != nil {
		return nil, err
	}
	dir, cerr := newServiceCgroup()
	if cerr != nil {
		fmt.Fprintf(os.Stderr, "overload: no cgroup for the service (%v): the daemon reads the host's CPU\n", cerr)
		res.CPUSignal = "host"
	} else {
		res.CPUSignal = "cgroup " + dir
	}
	env.cgroupDir = dir
	res.CPUDaemonConfig = env.daemonConfig(true, modeGraduated)
	return func() {
		if dir != "" {
			os.Remove(dir)
		}
		env.cgroupDir = ""
		if err := pinSelf(strings.TrimSpace(string(online))); err != nil {
			fmt.Fprintf(os.Stderr, "overload: unpin: %v\n", err)
		}
	}, nil
}

// rotate starts the systems at a different one in each scenario, so that
// none always runs first.
func rotate(s []string, i int) []string {
	if len(s) == 0 {
		return s
	}
	i %= len(s)
	return append(slices.Clone(s[i:]), s[:i]...)
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// runSummary is one line on stderr per run: each phase's offered rate and
// the top class's and everyone's success.
func runSummary(sc scenarioSpec, run systemRun, binSeconds float64) string {
	var parts []string
	for i, p := range phaseStats(sc, run, binSeconds) {
		parts = append(parts, fmt.Sprintf("%s: offered %.0f/s, top ok %.1f%%, all ok %.1f%%, goodput %.0f/s",
			sc.Phases[i].Name, p.OfferedRate, p.Class[0].OKPercent(), p.All.OKPercent(), p.GoodRate))
	}
	parts = append(parts, fmt.Sprintf("CPU s: generator %.1f, service %.1f, daemon %.1f, host %.1f", run.GeneratorCPU, run.ServiceCPU, run.DaemonCPU, run.HostCPU))
	return strings.Join(parts, "; ")
}
