package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// fleetScaleResult is what `degbench fleet-scale` writes: one point per
// fleet size, and the projection from their slope.
type fleetScaleResult struct {
	EtcdVersion string
	Tick        time.Duration // every member's report tick and the aggregator's
	InstanceTTL time.Duration
	Points      []fleetScalePoint
	// Projected is the straight line through the points (least squares)
	// at ProjectedMembers.
	ProjectedMembers int
	Projected        fleetScaleProjection
}

// fleetScalePoint is one fleet size, measured.
type fleetScalePoint struct {
	Members     int
	StartSecs   float64 // from the first member started to an aggregate counting all of them
	MeasureSecs float64 // the quiet span the rates and the CPU are counted over
	// etcd's own counters over MeasureSecs, per tick: watch events sent
	// (etcd_debugging_mvcc_events_total), puts, transactions, ranges.
	EventsPerTick, PutsPerTick, TxnsPerTick, RangesPerTick float64
	Watchers                                               float64 // etcd_debugging_mvcc_watcher_total at the end
	EtcdCores                                              float64 // etcd's utime+stime over MeasureSecs, in cores
	EtcdRSS                                                float64 // bytes, at the end
	MembersCores                                           float64 // this process (every member) over MeasureSecs, in cores
	// Per override, set through one member: the time to each member's
	// Next (AllMs), and to the last member (LastMs).
	AllMs, LastMs []float64
	CommitMs      []float64 // SetOverride's own time, per override
	// LoadAvg is /proc/loadavg's 1-minute average before and after the
	// point: the machine is shared, and etcd's latency follows it.
	LoadAvg [2]float64
	// FailoverSecs: the aggregator cut off from etcd (a crash), until a
	// member holds an aggregate of a higher term.
	FailoverSecs float64
	OldTerm      int64
	NewTerm      int64
}

// fleetScaleProjection is the line through the points at one size.
type fleetScaleProjection struct {
	EventsPerTick, EtcdCores, PutsPerTick float64
}

func fleetScaleCmd(args []string) error {
	fs := flag.NewFlagSet("fleet-scale", flag.ExitOnError)
	etcdBin := fs.String("etcd", "etcd", "etcd server binary (Debian: etcd-server)")
	sizes := fs.String("sizes", "100,300,1000", "fleet sizes, comma-separated")
	tick := fs.Duration("tick", time.Second, "report and aggregate tick (health_check_interval)")
	ttl := fs.Duration("instance-ttl", 0, "fleet.instance_ttl (default max(3 x tick, 10s), as the daemon's)")
	measure := fs.Duration("measure", 10*time.Second, "quiet span over which etcd's counters and CPU are read, per size")
	overrides := fs.Int("overrides", 10, "fleet overrides timed per size")
	project := fs.Int("project", 10000, "fleet size to project to from the slope")
	out := fs.String("out", "fleet-scale.json", "result file")
	_ = fs.Parse(args)
	if *ttl == 0 {
		*ttl = max(3**tick, 10*time.Second)
	}
	var ns []int
	for s := range strings.SplitSeq(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 {
			return fmt.Errorf("-sizes: %q is not a fleet size of 2 or more", s)
		}
		ns = append(ns, n)
	}
	if *overrides < 1 || *measure < *tick {
		return errors.New("need -overrides >= 1 and -measure >= -tick")
	}
	etcdPath, err := exec.LookPath(*etcdBin)
	if err != nil {
		return fmt.Errorf("etcd server %q not found (Debian: apt-get install etcd-server): %w", *etcdBin, err)
	}
	res := fleetScaleResult{Tick: *tick, InstanceTTL: *ttl, ProjectedMembers: *project}
	for _, n := range ns {
		p, version, err := measureFleetScale(etcdPath, n, *tick, *ttl, *measure, *overrides)
		if err != nil {
			return fmt.Errorf("%d members: %w", n, err)
		}
		res.EtcdVersion = version
		res.Points = append(res.Points, p)
		fmt.Fprintf(os.Stderr, "fleet-scale: %d members: %.0f watch events a tick (%.2f x N), etcd %.3f cores, override p99 %.0f ms to each member (%.0f ms to the last), failover %.1fs\n",
			n, p.EventsPerTick, p.EventsPerTick/float64(n), p.EtcdCores, quantile(p.AllMs, .99), quantile(p.LastMs, .99), p.FailoverSecs)
	}
	res.Projected = project1(res.Points, *project)
	fmt.Fprintf(os.Stderr, "fleet-scale: projected to %d members: %.0f watch events a tick, etcd %.2f cores\n", *project, res.Projected.EventsPerTick, res.Projected.EtcdCores)
	return writeJSON(*out, res)
}

// project1 fits a line through the points (least squares over the fleet
// size) and reads it at n.
func project1(ps []fleetScalePoint, n int) fleetScaleProjection {
	line := func(y func(fleetScalePoint) float64) float64 {
		var sx, sy, sxx, sxy float64
		for _, p := range ps {
			x := float64(p.Members)
			sx, sy, sxx, sxy = sx+x, sy+y(p), sxx+x*x, sxy+x*y(p)
		}
		k := float64(len(ps))
		if k < 2 || k*sxx == sx*sx {
			return y(ps[len(ps)-1]) * float64(n) / float64(ps[len(ps)-1].Members)
		}
		slope := (k*sxy - sx*sy) / (k*sxx - sx*sx)
		return slope*float64(n) + (sy-slope*sx)/k
	}
	return fleetScaleProjection{
		EventsPerTick: line(func(p fleetScalePoint) float64 { return p.EventsPerTick }),
		EtcdCores:     line(func(p fleetScalePoint) float64 { return p.EtcdCores }),
		PutsPerTick:   line(func(p fleetScalePoint) float64 { return p.PutsPerTick }),
	}
}

// measureFleetScale runs n members against a fresh etcd and measures one
// point.
func measureFleetScale(etcdPath string, n int, tick, ttl, measure time.Duration, overrides int) (fleetScalePoint, string, error) {
	p := fleetScalePoint{Members: n, LoadAvg: [2]float64{loadAvg(), 0}}
	etcd, err := startEtcd(etcdPath)
	if err != nil {
		return p, "", err
	}
	defer etcd.stop()
	version, err := etcd.version()
	if err != nil {
		return p, "", err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sim := newSimFleet(ctx, etcd.client, tick, ttl)
	defer sim.stop()
	t0 := time.Now()
	if err := sim.start(n); err != nil {
		return p, version, err
	}
	if err := sim.ready(n, 3*time.Minute); err != nil {
		return p, version, err
	}
	p.StartSecs = time.Since(t0).Seconds()
	// Let the start's burst of writes and elections settle for a few ticks.
	time.Sleep(3 * tick)

	m0, err1 := etcd.metrics()
	cpu0, err2 := procCPU(etcd.pid())
	self0, err3 := procCPU(os.Getpid())
	if err := errors.Join(err1, err2, err3); err != nil {
		return p, version, err
	}
	start := time.Now()
	time.Sleep(measure)
	m1, err1 := etcd.metrics()
	cpu1, err2 := procCPU(etcd.pid())
	self1, err3 := procCPU(os.Getpid())
	if err := errors.Join(err1, err2, err3); err != nil {
		return p, version, err
	}
	span := time.Since(start)
	ticks := span.Seconds() / tick.Seconds()
	p.MeasureSecs = span.Seconds()
	p.EventsPerTick = (m1["etcd_debugging_mvcc_events_total"] - m0["etcd_debugging_mvcc_events_total"]) / ticks
	p.PutsPerTick = (m1["etcd_mvcc_put_total"] - m0["etcd_mvcc_put_total"]) / ticks
	p.TxnsPerTick = (m1["etcd_mvcc_txn_total"] - m0["etcd_mvcc_txn_total"]) / ticks
	p.RangesPerTick = (m1["etcd_mvcc_range_total"] - m0["etcd_mvcc_range_total"]) / ticks
	p.Watchers = m1["etcd_debugging_mvcc_watcher_total"]
	p.EtcdCores = (cpu1 - cpu0).Seconds() / span.Seconds()
	p.MembersCores = (self1 - self0).Seconds() / span.Seconds()
	if p.EtcdRSS, err = procRSS(etcd.pid()); err != nil {
		return p, version, err
	}

	for i := range overrides {
		time.Sleep(time.Duration(rand.Int64N(int64(tick)))) // a random phase against the report ticks
		all, last, commit, err := sim.override(fmt.Sprintf("fleet-scale %d/%d", n, i), 30*time.Second)
		if err != nil {
			return p, version, fmt.Errorf("override %d: %w", i, err)
		}
		p.AllMs = append(p.AllMs, all...)
		p.LastMs = append(p.LastMs, last)
		p.CommitMs = append(p.CommitMs, commit)
	}

	p.OldTerm, p.NewTerm, p.FailoverSecs, err = sim.failover(4 * ttl)
	p.LoadAvg[1] = loadAvg()
	return p, version, err
}

// loadAvg is the 1-minute load average, 0 when /proc says nothing.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return f
}

// metrics reads every unlabelled sample of etcd's /metrics.
func (e *etcdServer) metrics() (map[string]float64, error) {
	b, err := do(&http.Client{Timeout: 10 * time.Second}, mustRequest("GET", e.client+"/metrics"))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if line == "" || line[0] == '#' || strings.ContainsRune(line, '{') {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			out[name] = v
		}
	}
	for _, name := range []string{"etcd_debugging_mvcc_events_total", "etcd_mvcc_put_total", "etcd_mvcc_txn_total", "etcd_mvcc_range_total"} {
		if _, ok := out[name]; !ok {
			return nil, fmt.Errorf("etcd /metrics has no %s", name)
		}
	}
	return out, nil
}
