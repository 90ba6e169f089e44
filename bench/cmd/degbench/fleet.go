package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// fleetResult is what `degbench fleet` writes.
type fleetResult struct {
	Daemons     int
	MemoryState bool          // data_dir: "": the daemons save nothing per change
	Interval    time.Duration // health_check_interval: one report per instance per tick
	EtcdVersion string
	StartSecs   float64      // from the first daemon started to all of them in the fleet view
	LastMs      []float64    // per override: PUT's first byte -> the last daemon's event
	AllMs       []float64    // per override and daemon: PUT's first byte -> that daemon's event
	PutMs       []float64    // per override: PUT's first byte -> its answer
	MeasureSecs float64      // the quiet span over which the writes and the CPU are counted
	Writes      etcdCounters // etcd's counters over MeasureSecs
	// PutsPerInstanceTick and TxnsPerInstanceTick are Writes divided by
	// the daemons and by the ticks in MeasureSecs.
	PutsPerInstanceTick, TxnsPerInstanceTick float64
	EtcdCPUPercent                           float64 // of one core, over MeasureSecs
	EtcdCPUOverridesPercent                  float64 // of one core, while the overrides ran
	EtcdRSS                                  float64 // bytes, at the end
	DaemonRSSMedian                          float64 // bytes, at the end
}

// fleetToken is the admin token every benchmark daemon is given.
const fleetToken = "degbench-admin"

// fleetConfig is one benchmark daemon's configuration: fleet mode on,
// signals off (so only the fleet override moves the level), short etcd
// timeouts.
func fleetConfig(instance, etcd string, interval time.Duration, extra string) string {
	return extra + fmt.Sprintf(`
health_check_interval: %s
signals: {cpu: {source: off}, memory: {source: off}}
auth: {token: %q}
log: {level: error}
fleet:
  enabled: true
  name: degbench
  instance: %s
  etcd: {endpoints: [%s], dial_timeout: 2s}
`, interval, fleetToken, instance, etcd)
}

// fleetEvent is what a subscriber keeps of an `event: level`: the fleet
// override's reason when the fleet layer decided the level.
type fleetEvent struct {
	daemon int
	reason string
	at     int64
}

// fleetReason returns the reason of the fleet override that decided the
// state document data (source fleet), or false.
func fleetReason(data []byte) (string, bool) {
	var st struct {
		Source string
		Fleet  *struct {
			Override *struct{ Reason string }
		}
	}
	if json.Unmarshal(data, &st) != nil || st.Source != "fleet" || st.Fleet == nil || st.Fleet.Override == nil {
		return "", false
	}
	return st.Fleet.Override.Reason, true
}

// perInstanceTick divides a count over span by the instances and by the
// ticks of interval in span.
func perInstanceTick(count float64, instances int, span, interval time.Duration) float64 {
	return count / float64(instances) / (span.Seconds() / interval.Seconds())
}

func fleetCmd(args []string) error {
	fs := flag.NewFlagSet("fleet", flag.ExitOnError)
	binary := fs.String("binary", "./degraded", "degraded binary")
	etcdBin := fs.String("etcd", "etcd", "etcd server binary (Debian: etcd-server)")
	n := fs.Int("daemons", 50, "daemon processes in the fleet")
	overrides := fs.Int("overrides", 20, "measured fleet overrides (after 2 warm-ups)")
	interval := fs.Duration("interval", time.Second, "health_check_interval of every daemon")
	measure := fs.Duration("measure", 10*time.Second, "quiet span over which etcd's writes and CPU are counted")
	wait := fs.Duration("timeout", 10*time.Second, "longest wait for one override to reach every daemon")
	memory := fs.Bool("memory-state", false, `data_dir: "" (nothing saved per change)`)
	out := fs.String("out", "fleet.json", "result file")
	_ = fs.Parse(args)
	extra := ""
	if *memory {
		extra = "data_dir: \"\"\n"
	}
	if *n < 1 || *overrides < 1 || *interval <= 0 || *measure < *interval {
		return fmt.Errorf("need -daemons >= 1, -overrides >= 1, -interval > 0 and -measure >= -interval (were %d, %d, %v, %v)", *n, *overrides, *interval, *measure)
	}
	etcdPath, err := exec.LookPath(*etcdBin)
	if err != nil {
		return fmt.Errorf("etcd server %q not found (Debian: apt-get install etcd-server): %w", *etcdBin, err)
	}

	etcd, err := startEtcd(etcdPath)
	if err != nil {
		return err
	}
	defer etcd.stop()
	res := fleetResult{Daemons: *n, Interval: *interval, MemoryState: *memory}
	if res.EtcdVersion, err = etcd.version(); err != nil {
		return err
	}

	t0 := time.Now()
	ds, err := startFleet(*binary, etcd.client, *n, *interval, extra)
	defer stopAll(ds)
	if err != nil {
		return err
	}
	if err := waitFleet(ds, 60*time.Second); err != nil {
		return err
	}
	res.StartSecs = time.Since(t0).Seconds()
	fmt.Fprintf(os.Stderr, "fleet: %d daemons connected to etcd %s in %.1fs\n", *n, res.EtcdVersion, res.StartSecs)

	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan fleetEvent, 16*(*n))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i, d := range ds {
		s, err := dialSSE(ctx, d.url+"/v1/level/stream")
		if err != nil {
			return fmt.Errorf("daemon %d: %w", i, err)
		}
		context.AfterFunc(ctx, func() { s.Close() })
		wg.Go(func() {
			_ = s.follow(func(ev sseEvent) {
				if ev.Event != "level" {
					return
				}
				if reason, ok := fleetReason(ev.Data); ok {
					select {
					case events <- fleetEvent{i, reason, ev.At}:
					case <-ctx.Done():
					}
				}
			})
		})
	}

	// The quiet span: every instance reports once a tick, nothing else.
	c0, err1 := etcd.counters()
	cpu0, err2 := procCPU(etcd.pid())
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	m0 := time.Now()
	time.Sleep(*measure)
	c1, err1 := etcd.counters()
	cpu1, err2 := procCPU(etcd.pid())
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	span := time.Since(m0)
	res.MeasureSecs = span.Seconds()
	res.Writes = c1.sub(c0)
	res.PutsPerInstanceTick = perInstanceTick(res.Writes.Puts, *n, span, *interval)
	res.TxnsPerInstanceTick = perInstanceTick(res.Writes.Txns, *n, span, *interval)
	res.EtcdCPUPercent = 100 * (cpu1 - cpu0).Seconds() / span.Seconds()

	hc := &http.Client{Timeout: *wait}
	o0 := time.Now()
	cpu0, err = procCPU(etcd.pid())
	if err != nil {
		return err
	}
	for i := range *overrides + 2 {
		level := "Major"
		if i%2 == 1 {
			level = "Minor"
		}
		reason := fmt.Sprintf("degbench fleet %d", i)
		// A random phase against the daemons' report ticks.
		time.Sleep(time.Duration(rand.Int64N(int64(*interval))))
		start, answered, err := fleetPut(hc, ds[0].url, level, reason)
		if err != nil {
			return fmt.Errorf("override %d: %w", i, err)
		}
		at, err := awaitFleet(events, reason, *n, *wait)
		if err != nil {
			return fmt.Errorf("override %d (%s): %w", i, level, err)
		}
		if i < 2 {
			continue
		}
		res.PutMs = append(res.PutMs, float64(answered-start)/1e6)
		last := 0.0
		for _, a := range at {
			ms := float64(a-start) / 1e6
			res.AllMs = append(res.AllMs, ms)
			last = max(last, ms)
		}
		res.LastMs = append(res.LastMs, last)
	}
	cpu1, err = procCPU(etcd.pid())
	if err != nil {
		return err
	}
	res.EtcdCPUOverridesPercent = 100 * (cpu1 - cpu0).Seconds() / time.Since(o0).Seconds()
	if res.EtcdRSS, err = procRSS(etcd.pid()); err != nil {
		return err
	}
	var rss []float64
	for _, d := range ds {
		if v, err := procRSS(d.pid()); err == nil {
			rss = append(rss, v)
		}
	}
	res.DaemonRSSMedian = median(rss)

	fmt.Fprintf(os.Stderr, "fleet: %d overrides to %d daemons: to the last p50 %.1f ms, p99 %.1f ms; over all daemons p50 %.1f ms, p99 %.1f ms; PUT p50 %.1f ms\n",
		len(res.LastMs), *n, quantile(res.LastMs, .5), quantile(res.LastMs, .99), quantile(res.AllMs, .5), quantile(res.AllMs, .99), quantile(res.PutMs, .5))
	fmt.Fprintf(os.Stderr, "fleet: etcd over %.0fs quiet: %.2f puts and %.2f txns per instance per tick, CPU %.1f%% of a core (%.1f%% during the overrides)\n",
		res.MeasureSecs, res.PutsPerInstanceTick, res.TxnsPerInstanceTick, res.EtcdCPUPercent, res.EtcdCPUOverridesPercent)
	return writeJSON(*out, res)
}

// startFleet starts n daemons, a few at a time, named d00, d01, ...;
// it returns those it started even when one failed.
func startFleet(binary, etcd string, n int, interval time.Duration, extra string) ([]*daemon, error) {
	ds := make([]*daemon, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ds[i], errs[i] = startDaemon(binary, fleetConfig(fmt.Sprintf("d%02d", i), etcd, interval, extra))
		})
	}
	wg.Wait()
	started := ds[:0]
	for _, d := range ds {
		if d != nil {
			started = append(started, d)
		}
	}
	return started, errors.Join(errs...)
}

// stopAll stops the daemons in parallel.
func stopAll(ds []*daemon) {
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Go(d.stop)
	}
	wg.Wait()
}

// waitFleet waits until every daemon says it is connected to etcd and the
// first one's fleet view holds them all.
func waitFleet(ds []*daemon, within time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(within)
	for i := 0; i < len(ds); {
		var st struct{ Fleet *struct{ Connected bool } }
		b, err := do(hc, mustRequest(http.MethodGet, ds[i].url+"/v1/level"))
		if err == nil && json.Unmarshal(b, &st) == nil && st.Fleet != nil && st.Fleet.Connected {
			i++
			continue
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("daemon %d not connected to etcd within %v", i, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		var view struct{ Instances []json.RawMessage }
		b, err := do(hc, mustRequest(http.MethodGet, ds[0].url+"/v1/fleet"))
		if err == nil && json.Unmarshal(b, &view) == nil && len(view.Instances) == len(ds) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the fleet view holds %d of %d instances after %v", len(view.Instances), len(ds), within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fleetPut sets a fleet pin through one daemon and returns when its first
// byte went out (the connection in hand) and when the answer came.
func fleetPut(hc *http.Client, url, level, reason string) (start, answered int64, err error) {
	body := fmt.Sprintf(`{"level":%q,"mode":"pin","ttl":"10m","reason":%q}`, level, reason)
	req, err := http.NewRequest(http.MethodPut, url+"/v1/fleet/override", strings.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+fleetToken)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { start = now() },
	}))
	if _, err := do(hc, req); err != nil {
		return 0, 0, err
	}
	return start, now(), nil
}

// awaitFleet collects, for the override with reason, the time each of n
// daemons published it; events of earlier overrides are skipped.
func awaitFleet(events <-chan fleetEvent, reason string, n int, within time.Duration) ([]int64, error) {
	at := make(map[int]int64, n)
	timeout := time.After(within)
	for len(at) < n {
		select {
		case ev := <-events:
			if _, seen := at[ev.daemon]; !seen && ev.reason == reason {
				at[ev.daemon] = ev.at
			}
		case <-timeout:
			return nil, fmt.Errorf("%d of %d daemons published it within %v", len(at), n, within)
		}
	}
	out := make([]int64, 0, n)
	for _, a := range at {
		out = append(out, a)
	}
	return out, nil
}
