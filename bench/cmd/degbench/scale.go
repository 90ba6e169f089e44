package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// scalePoint is the daemon at one number of SSE subscribers.
type scalePoint struct {
	Subscribers int
	ConnectS    float64  // seconds to connect the subscribers added for this point
	Daemon      memStats // with these subscribers connected, after the changes
	LastMs      []float64
}

// scaleResult is what `degbench scale` writes.
type scaleResult struct {
	Changes   int
	Persisted bool
	Before    memStats // the daemon before any subscriber
	Points    []scalePoint
	NoFile    string // the open-file limit the daemon ran with
}

// scaleCmd connects SSE subscribers to one daemon in steps (1k, 10k, as
// near the open-file limit as it allows), and at each step measures the
// daemon's RSS and the time from a change to the last subscriber. Each
// step's subscribers are held by a child process of their own, so that
// none holds more descriptors than the limit.
func scaleCmd(args []string) error {
	fs := flag.NewFlagSet("scale", flag.ExitOnError)
	binary := fs.String("binary", "./degraded", "degraded binary")
	sizesText := fs.String("sizes", "1000,10000,19800", "subscriber counts, increasing")
	changes := fs.Int("changes", 20, "measured changes per size (after 2 warm-up changes)")
	out := fs.String("out", "scale.json", "result file")
	_ = fs.Parse(args)

	var sizes []int
	for f := range strings.SplitSeq(*sizesText, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || (len(sizes) > 0 && n <= sizes[len(sizes)-1]) {
			return fmt.Errorf("-sizes %q: want increasing positive counts", *sizesText)
		}
		sizes = append(sizes, n)
	}
	top := sizes[len(sizes)-1]
	res := scaleResult{Changes: *changes, Persisted: true}
	if b, err := os.ReadFile("/proc/self/limits"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if strings.HasPrefix(line, "Max open files") {
				res.NoFile = strings.Join(strings.Fields(line)[3:5], "/")
			}
		}
	}
	cfg := fmt.Sprintf("signals: {cpu: {source: off}, memory: {source: off}}\nsse: {max_subscribers: %d}\nlog: {level: warn}\n", top)
	d, err := startDaemon(*binary, cfg)
	if err != nil {
		return err
	}
	defer d.stop()
	hc := &http.Client{Timeout: 30 * time.Second}
	time.Sleep(500 * time.Millisecond)
	if res.Before, err = d.settledMemStats(5); err != nil {
		return err
	}
	seq, err := d.sequence(hc)
	if err != nil {
		return err
	}

	var procs []*subscriberProcess
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	levels := []string{"Major", "Minor"}
	change := 0
	have := 0
	for _, n := range sizes {
		start := time.Now()
		p, err := startSubscribers("sse", d.url+"/v1/level/stream", n-have)
		if err != nil {
			return fmt.Errorf("%d subscribers: %w", n, err)
		}
		procs = append(procs, p)
		have = n
		pt := scalePoint{Subscribers: n, ConnectS: time.Since(start).Seconds()}
		time.Sleep(time.Second)
		for i := range *changes + 2 {
			seq++
			for _, p := range procs {
				if err := p.expect(seq); err != nil {
					return err
				}
			}
			body := fmt.Sprintf(`{"level":%q,"mode":"pin","ttl":"10m","reason":"bench scale %d"}`, levels[change%2], change)
			change++
			t0 := now()
			if _, err := d.put(hc, "/v1/override", body); err != nil {
				return err
			}
			last := 0.0
			for _, p := range procs {
				cs, err := p.result(seq, t0)
				if err != nil {
					return fmt.Errorf("%d subscribers: %w", n, err)
				}
				last = max(last, cs.LastMs)
			}
			if i >= 2 {
				pt.LastMs = append(pt.LastMs, last)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if pt.Daemon, err = d.settledMemStats(5); err != nil {
			return err
		}
		res.Points = append(res.Points, pt)
		fmt.Fprintf(os.Stderr, "scale: %d subscribers: to the last p50/p99 %.1f/%.1f ms; daemon RSS %.1f MiB, %.2f KiB per subscriber\n",
			n, quantile(pt.LastMs, .5), quantile(pt.LastMs, .99), pt.Daemon.RSS/(1<<20), pt.perSubKiB(res.Before))
	}
	return writeJSON(*out, res)
}

// perSubKiB is the daemon's RSS per subscriber over its RSS without any.
func (p scalePoint) perSubKiB(before memStats) float64 {
	return (p.Daemon.RSS - before.RSS) / float64(p.Subscribers) / 1024
}

// sequence reads the published sequence.
func (d *daemon) sequence(hc *http.Client) (uint64, error) {
	b, err := do(hc, mustRequest(http.MethodGet, d.url+"/v1/level"))
	if err != nil {
		return 0, err
	}
	return stateSequence(b)
}
