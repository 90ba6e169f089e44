package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The systems `degbench overload` runs side by side: a gate in front of
// the service and, for degraded, the daemon's admission mode.
const (
	sysNone       = "none"
	sysFailsafe   = "failsafe"
	sysAegis      = "aegis"
	sysLevels     = "degraded-levels"
	sysGraduated  = "degraded-graduated"
	sysFixed      = "fixed"
	modeLevels    = "levels"
	modeGraduated = "graduated"
)

// systemGate returns a system's gate and, for degraded, its admission mode.
func systemGate(system string) (gate, mode string) {
	switch system {
	case sysLevels:
		return gateDegraded, modeLevels
	case sysGraduated:
		return gateDegraded, modeGraduated
	}
	return system, ""
}

// levelPoint is one state the daemon published, as its SSE stream told
// it: when (seconds from the run's start; the state held at the start has
// a negative At), the level and the partial admission.
type levelPoint struct {
	At        float64
	Index     int
	Level     string
	Threshold int
	// HasPartial says the state document had the key "partial" at all
	// (daemons before graduated admission do not); Partial is its value.
	HasPartial bool
	Partial    *partialAdmission `json:",omitempty"`
}

// partialAdmission is the state document's "partial": priorities in
// [From, threshold) are admitted with probability Fraction.
type partialAdmission struct {
	From     int     `json:"from"`
	Fraction float64 `json:"fraction"`
}

// systemRun is one system's run of one scenario.
type systemRun struct {
	System string
	Bins   [][]classBin // [bin][class]
	// P50Ms and P99Ms are the latency of successes per phase and class,
	// from judgeAfter into each phase.
	P50Ms, P99Ms [][]float64
	Levels       []levelPoint // degraded: every state published
	History      []historyEntry
	Seconds      float64 // the run's wall time, start to the last answer
	// CPU seconds used during the load: by this process (the generator),
	// the service and the daemon.
	GeneratorCPU, ServiceCPU, DaemonCPU float64
	// HostCPU is what every process on the host used meanwhile (CPU
	// seconds): beside the three above, what else ran (other runs at
	// once, other users of the machine).
	HostCPU float64
	Err     string `json:",omitempty"`
}

// historyEntry is one line of the daemon's GET /v1/history.
type historyEntry struct {
	Sequence uint64    `json:"sequence"`
	From     string    `json:"from"`
	To       string    `json:"to"`
	Source   string    `json:"source"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
}

// runEnv is what every run shares: the binaries and the settings.
type runEnv struct {
	self, binary string
	o            overloadOptions
	admissionKey bool   // the daemon accepts `admission: {mode: ...}`
	cgroupDir    string // the CPU-bound service's cgroup; "" when none could be made

	mu     sync.Mutex // guards levels: systems run at once
	levels []levelRow
}

// loadLevels reads the daemon's level table once.
func (env *runEnv) loadLevels(base string) error {
	env.mu.Lock()
	defer env.mu.Unlock()
	if env.levels != nil {
		return nil
	}
	var err error
	env.levels, err = fetchLevels(base)
	return err
}

// levelRow is one level of the daemon's table (GET /v1/levels).
type levelRow struct {
	Name              string `json:"name"`
	Index             int    `json:"index"`
	PriorityThreshold int    `json:"priority_threshold"`
}

// runSystem runs one scenario against one system on a fresh service (and
// daemon): the phases' load, then the daemon's history.
func runSystem(env *runEnv, sc scenarioSpec, system string, seed uint64) (systemRun, error) {
	run := systemRun{System: system}
	gate, mode := systemGate(system)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	args := []string{"-gate", gate, "-queue-wait", env.o.queueWait.String()}
	if gate == gateFixed {
		args = append(args, "-fixed", env.o.fixed)
	}
	if sc.CPU {
		args = append(args, "-workers", strconv.Itoa(env.o.cpuWorkers), "-burn", env.o.burn.String(),
			"-bbr-cpu-threshold", strconv.FormatInt(env.o.bbrThreshold, 10))
		if sc.Measured != nil {
			// The burn the capacity was measured with, not one calibrated
			// again: calibrations moved it by 6% from run to run.
			args = append(args, "-burn-rounds", strconv.Itoa(sc.Measured.BurnRounds))
		}
	} else {
		args = append(args, "-workers", strconv.Itoa(env.o.workers), "-service-time", env.o.serviceTime.String())
	}
	var d *daemon
	if gate == gateDegraded {
		var err error
		if d, err = startDaemon(env.binary, env.daemonConfig(sc.CPU, mode)); err != nil {
			return run, err
		}
		defer d.stop()
		args = append(args, "-daemon", d.url)
		if env.o.requestStart {
			args = append(args, "-request-start", sentHeader)
		}
		if err := env.loadLevels(d.url); err != nil {
			return run, err
		}
	}
	cpus, cg := "", ""
	if sc.CPU {
		cpus, cg = env.o.serviceCPU, env.cgroupDir
	}
	svc, err := startService(env.self, args, cpus, cg)
	if err != nil {
		return run, err
	}
	defer svc.stop()
	u, err := url.Parse(svc.url)
	if err != nil {
		return run, err
	}

	start := time.Now().Add(200 * time.Millisecond)
	var follow *levelFollower
	if d != nil {
		if follow, err = followLevels(ctx, d.url, start); err != nil {
			return run, err
		}
		defer follow.stop()
	}

	slo := time.Duration(sloFactor) * env.o.serviceTime
	if sc.CPU {
		slo = time.Duration(sloFactor) * env.o.cpuServiceTime()
	}
	rec := newRecorder(sc.Phases, env.o.bin.Seconds(), slo)
	gen := newLoadGen(u.Host, env.o.inflightCap, rec)
	cpu0, host0 := runCPU(svc, d), hostCPU()
	crashed := make(chan error, 1)
	var crashedCPU float64 // the first daemon's CPU seconds, read just before its crash
	if sc.Crash > 0 && d != nil {
		// The daemon is SIGKILLed and restarted mid-phase, as a crash under
		// a supervisor.
		t := time.AfterFunc(time.Until(start.Add(time.Duration(sc.Crash*float64(time.Second)))), func() {
			if t, err := procCPU(d.pid()); err == nil {
				crashedCPU = t.Seconds()
			}
			crashed <- d.crash()
		})
		defer t.Stop()
	}
	gen.run(newArrivals(seed, sc.Phases), start)
	if sc.Crash > 0 && d != nil {
		if err := <-crashed; err != nil {
			return run, fmt.Errorf("restart the daemon: %w", err)
		}
		cpu0[2] -= crashedCPU // the new process counts from 0
	}
	run.Seconds = time.Since(start).Seconds()
	cpu1, host1 := runCPU(svc, d), hostCPU()
	run.GeneratorCPU, run.ServiceCPU, run.DaemonCPU = cpu1[0]-cpu0[0], cpu1[1]-cpu0[1], cpu1[2]-cpu0[2]
	run.HostCPU = host1 - host0
	run.Bins = cloneBins(rec.bins)
	run.P50Ms, run.P99Ms = rec.latencyQuantiles()
	if follow != nil {
		if run.History, err = fetchHistory(d.url); err != nil {
			return run, err
		}
		run.Levels = follow.stop()
	}
	return run, nil
}

// runCPU reads the CPU seconds used so far by this process, the service
// and the daemon (nil: 0).
func runCPU(svc *serviceProcess, d *daemon) [3]float64 {
	var out [3]float64
	for i, pid := range []int{os.Getpid(), svc.cmd.Process.Pid, 0} {
		if i == 2 {
			if d == nil {
				break
			}
			pid = d.pid()
		}
		if t, err := procCPU(pid); err == nil {
			out[i] = t.Seconds()
		}
	}
	return out
}

// hostCPU is the CPU seconds every core has been busy since boot
// (/proc/stat: all but idle, iowait and steal); 0 if unreadable.
func hostCPU() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy float64
	for i, v := range f[1:] {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || i == 3 || i == 4 || i >= 7 { // idle, iowait, steal; guest is in user already
			continue
		}
		busy += n
	}
	return busy / clockTicks
}

// levelFollower reads the daemon's SSE stream into level points. When
// the stream ends while it is not stopped (the daemon crashed and is
// restarting: the restart scenario), it dials again until it is back.
type levelFollower struct {
	done    chan struct{}
	once    sync.Once
	stopped chan struct{}

	mu     sync.Mutex
	conn   *sseConn
	points []levelPoint
}

func followLevels(ctx context.Context, base string, start time.Time) (*levelFollower, error) {
	s, err := dialSSE(ctx, base+"/v1/level/stream")
	if err != nil {
		return nil, err
	}
	f := &levelFollower{conn: s, done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(f.done)
		for {
			_ = s.follow(func(ev sseEvent) {
				if p, ok := parseLevelPoint(ev, start); ok {
					f.mu.Lock()
					f.points = append(f.points, p)
					f.mu.Unlock()
				}
			})
			if s = f.redial(ctx, base); s == nil {
				return
			}
		}
	}()
	return f, nil
}

// redial connects to the stream again after it ended, every 20 ms until
// it is back; nil once the follower is stopped or ctx ends.
func (f *levelFollower) redial(ctx context.Context, base string) *sseConn {
	for {
		select {
		case <-f.stopped:
			return nil
		case <-ctx.Done():
			return nil
		case <-time.After(20 * time.Millisecond):
		}
		s, err := dialSSE(ctx, base+"/v1/level/stream")
		if err != nil {
			continue
		}
		f.mu.Lock()
		select {
		case <-f.stopped:
			f.mu.Unlock()
			s.Close()
			return nil
		default:
		}
		f.conn = s
		f.mu.Unlock()
		return s
	}
}

// stop ends the stream (after a moment for the last events) and returns
// the points read.
func (f *levelFollower) stop() []levelPoint {
	f.once.Do(func() {
		time.Sleep(100 * time.Millisecond)
		f.mu.Lock()
		close(f.stopped) // redial installs no connection after this
		conn := f.conn
		f.mu.Unlock()
		conn.Close()
		<-f.done
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.points
}

// parseLevelPoint reads an `event: level` of the daemon's stream.
func parseLevelPoint(ev sseEvent, start time.Time) (levelPoint, bool) {
	if ev.Event != "level" {
		return levelPoint{}, false
	}
	var st struct {
		Level             string          `json:"level"`
		Index             int             `json:"index"`
		PriorityThreshold int             `json:"priority_threshold"`
		Partial           json.RawMessage `json:"partial"`
	}
	if err := json.Unmarshal(ev.Data, &st); err != nil || st.Level == "" {
		return levelPoint{}, false
	}
	p := levelPoint{At: float64(ev.At-start.UnixNano()) / 1e9, Index: st.Index, Level: st.Level, Threshold: st.PriorityThreshold}
	if st.Partial != nil {
		p.HasPartial = true
		var pa partialAdmission
		if string(st.Partial) != "null" && json.Unmarshal(st.Partial, &pa) == nil {
			p.Partial = &pa
		}
	}
	return p, true
}

func fetchLevels(base string) ([]levelRow, error) {
	var v struct{ Levels []levelRow }
	return v.Levels, getJSON(base+"/v1/levels", &v)
}

func fetchHistory(base string) ([]historyEntry, error) {
	var v struct{ Transitions []historyEntry }
	return v.Transitions, getJSON(base+"/v1/history?limit=1000", &v)
}

func getJSON(u string, out any) error {
	b, err := do(&http.Client{Timeout: 10 * time.Second}, mustRequest(http.MethodGet, u))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// latencyLevels is the daemon's table for the latency scenarios: the
// default table's priority and error-rate thresholds, with latency
// thresholds 100/200/300/400/450 ms (issue 21's setup).
const latencyLevels = `levels:
  - {name: Minor, priority_threshold: 10, error_rate_percent: 1, latency_ms: 100}
  - {name: Moderate, priority_threshold: 30, error_rate_percent: 5, latency_ms: 200}
  - {name: Major, priority_threshold: 50, error_rate_percent: 10, latency_ms: 300}
  - {name: Severe, priority_threshold: 70, error_rate_percent: 25, latency_ms: 400}
  - {name: Emergency, priority_threshold: 100, error_rate_percent: 50, latency_ms: 450}
`

// cpuLevels is the table for the CPU-bound variant: the default table's
// priority, error-rate and CPU thresholds, and the latency scenarios'
// latency thresholds (an operator's table has both). The CPU signal is the
// service's cgroup's use of its one core, so the default percents mean
// what they say.
const cpuLevels = `levels:
  - {name: Minor, priority_threshold: 10, error_rate_percent: 1, cpu_percent: 60, latency_ms: 100}
  - {name: Moderate, priority_threshold: 30, error_rate_percent: 5, cpu_percent: 70, latency_ms: 200}
  - {name: Major, priority_threshold: 50, error_rate_percent: 10, cpu_percent: 80, latency_ms: 300}
  - {name: Severe, priority_threshold: 70, error_rate_percent: 25, cpu_percent: 90, latency_ms: 400}
  - {name: Emergency, priority_threshold: 100, error_rate_percent: 50, cpu_percent: 95, latency_ms: 450}
`

// hostCPULevels is the CPU-bound table when no cgroup could be made: the
// host's CPU is the mean of its cores, so the service's one core at the
// default percents is half of them on a 2-core machine (the other core's
// load, the generator's and the daemon's, adds to it).
const hostCPULevels = `levels:
  - {name: Minor, priority_threshold: 10, error_rate_percent: 1, cpu_percent: 30, latency_ms: 100}
  - {name: Moderate, priority_threshold: 30, error_rate_percent: 5, cpu_percent: 35, latency_ms: 200}
  - {name: Major, priority_threshold: 50, error_rate_percent: 10, cpu_percent: 40, latency_ms: 300}
  - {name: Severe, priority_threshold: 70, error_rate_percent: 25, cpu_percent: 45, latency_ms: 400}
  - {name: Emergency, priority_threshold: 100, error_rate_percent: 50, cpu_percent: 47.5, latency_ms: 450}
`

// dwellSeconds is the daemons' minimum_level_duration (daemonBase).
const dwellSeconds = 10

// daemonBase is what every overload daemon shares.
const daemonBase = `health_check_interval: 1s
minimum_level_duration: 10s
error_rate_window: 10s
log: {level: warn}
`

// daemonConfig is the daemon's configuration for a scenario and mode,
// without listen and data_dir (startDaemon adds them).
func (env *runEnv) daemonConfig(cpu bool, mode string) string {
	cfg := daemonBase
	switch {
	case !cpu:
		cfg += "signals: {cpu: {source: off}, memory: {source: off}}\n" + latencyLevels
	case env.cgroupDir != "":
		cfg += fmt.Sprintf("signals: {cpu: {source: cgroup}, memory: {source: off}, cgroup_path: %q}\n", env.cgroupDir) + cpuLevels
	default:
		cfg += "signals: {cpu: {source: host}, memory: {source: off}}\n" + hostCPULevels
	}
	if env.admissionKey && mode != "" {
		cfg += fmt.Sprintf("admission: {mode: %s}\n", mode)
	}
	return cfg
}

// acceptsAdmission says whether binary's `validate` accepts the admission
// key (the daemon refuses unknown keys; older binaries do not have it).
func acceptsAdmission(binary string) (bool, error) {
	dir, err := os.MkdirTemp("", "degbench-validate")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	f := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(f, []byte("admission: {mode: levels}\n"), 0o600); err != nil {
		return false, err
	}
	out, err := exec.Command(binary, "validate", "--config", f).CombinedOutput()
	if err == nil {
		return true, nil
	}
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 2 && strings.Contains(string(out), "admission") {
		return false, nil
	}
	return false, fmt.Errorf("%s validate: %v: %s", binary, err, out)
}
