package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

type options struct {
	binary      string
	subscribers int
	rate        int
	duration    time.Duration
	flipEvery   time.Duration
	maxRSSMiB   float64
}

func run() error {
	var o options
	flag.StringVar(&o.binary, "binary", "./degraded", "the degraded binary to run")
	flag.IntVar(&o.subscribers, "subscribers", 5000, "SSE subscribers")
	flag.IntVar(&o.rate, "rate", 20000, "outcomes per second")
	flag.DurationVar(&o.duration, "duration", 60*time.Second, "how long to run the load")
	flag.DurationVar(&o.flipEvery, "flip", 2*time.Second, "override flip period")
	flag.Float64Var(&o.maxRSSMiB, "max-rss", 256, "fail if the daemon's RSS exceeds this many MiB")
	flag.Parse()

	d, err := startDaemon(o)
	if err != nil {
		return err
	}
	defer d.kill()
	baseline, err := d.metric("go_goroutines")
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	subs := make([]*subscriber, o.subscribers)
	var wg sync.WaitGroup
	tr := &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 0, DisableCompression: true}
	client := &http.Client{Transport: tr}
	connected := make(chan error, o.subscribers)
	for i := range subs {
		subs[i] = &subscriber{}
		wg.Go(func() { subs[i].follow(ctx, client, d.url, connected) })
	}
	for range o.subscribers {
		if err := <-connected; err != nil {
			return fmt.Errorf("subscribe: %w", err)
		}
	}
	fmt.Printf("%d subscribers connected; goroutines %0.f -> ", o.subscribers, baseline)
	g, _ := d.metric("go_goroutines")
	fmt.Printf("%.0f\n", g)

	start := time.Now()
	var reported atomic.Int64
	var flips atomic.Int64
	loadCtx, stopLoad := context.WithTimeout(ctx, o.duration)
	var load sync.WaitGroup
	load.Go(func() { reportLoop(loadCtx, client, d.url, o.rate, &reported) })
	load.Go(func() { flipLoop(loadCtx, client, d.url, o.flipEvery, &flips) })
	var peakRSS float64
	load.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-loadCtx.Done():
				return
			case <-t.C:
				if rss, err := d.metric("process_resident_memory_bytes"); err == nil && rss > peakRSS {
					peakRSS = rss
				}
			}
		}
	})
	load.Wait()
	stopLoad()
	elapsed := time.Since(start)

	final, err := d.sequence(client)
	if err != nil {
		return err
	}
	// Give every subscriber a bounded time to hold the final sequence.
	deadline := time.Now().Add(10 * time.Second)
	var behind int
	for {
		behind = 0
		for _, s := range subs {
			if s.seq.Load() < final {
				behind++
			}
		}
		if behind == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	tr.CloseIdleConnections()

	var after float64
	for end := time.Now().Add(10 * time.Second); ; {
		after, err = d.metric("go_goroutines")
		if err != nil || after <= baseline+2 || time.Now().After(end) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	fmt.Printf("duration            %v\n", elapsed.Round(time.Millisecond))
	fmt.Printf("outcomes reported   %d (%.0f/s)\n", reported.Load(), float64(reported.Load())/elapsed.Seconds())
	fmt.Printf("override flips      %d\n", flips.Load())
	fmt.Printf("final sequence      %d\n", final)
	fmt.Printf("subscribers behind  %d of %d\n", behind, o.subscribers)
	fmt.Printf("goroutines          baseline %.0f, after disconnect %.0f\n", baseline, after)
	fmt.Printf("peak RSS            %.1f MiB\n", peakRSS/(1<<20))

	var problems []string
	if behind > 0 {
		problems = append(problems, fmt.Sprintf("%d subscribers never saw sequence %d", behind, final))
	}
	if after > baseline+2 {
		problems = append(problems, fmt.Sprintf("goroutines did not return to baseline (%.0f > %.0f)", after, baseline))
	}
	if peakRSS/(1<<20) > o.maxRSSMiB {
		problems = append(problems, fmt.Sprintf("RSS %.1f MiB above %.0f MiB", peakRSS/(1<<20), o.maxRSSMiB))
	}
	if flips.Load() == 0 || reported.Load() == 0 {
		problems = append(problems, "no load was applied")
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	fmt.Println("soak OK")
	return nil
}

// subscriber follows the SSE stream and remembers the last sequence.
type subscriber struct{ seq atomic.Uint64 }

func (s *subscriber) follow(ctx context.Context, c *http.Client, url string, connected chan<- error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/v1/level/stream", nil)
	resp, err := c.Do(req)
	if err != nil {
		connected <- err
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		connected <- fmt.Errorf("stream: %s", resp.Status)
		return
	}
	connected <- nil
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			if n, err := strconv.ParseUint(id, 10, 64); err == nil {
				s.seq.Store(n)
			}
		}
	}
}

// reportLoop posts outcomes in batches of 100 to reach rate per second.
func reportLoop(ctx context.Context, c *http.Client, url string, rate int, n *atomic.Int64) {
	const batch = 100
	t := time.NewTicker(time.Second / time.Duration(max(1, rate/batch)))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			resp, err := c.Post(url+"/v1/outcomes", "application/json", strings.NewReader(`{"success":99,"failure":1}`))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusAccepted {
					n.Add(batch)
				}
			}
		}
	}
}

// flipLoop alternates a pin between Major and Minor.
func flipLoop(ctx context.Context, c *http.Client, url string, every time.Duration, n *atomic.Int64) {
	t := time.NewTicker(every)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			lvl := []string{"Major", "Minor"}[i%2]
			req, _ := http.NewRequestWithContext(ctx, "PUT", url+"/v1/override",
				strings.NewReader(`{"level":"`+lvl+`","mode":"pin","ttl":"10m","reason":"soak"}`))
			req.Header.Set("Content-Type", "application/json")
			if resp, err := c.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					n.Add(1)
				}
			}
		}
	}
}

type daemon struct {
	cmd *exec.Cmd
	url string
	dir string
}

var listening = regexp.MustCompile(`degraded listening on (\S+)`)

func startDaemon(o options) (*daemon, error) {
	dir, err := os.MkdirTemp("", "degraded-soak")
	if err != nil {
		return nil, err
	}
	cfg := dir + "/soak.yaml"
	body := fmt.Sprintf("listen: 127.0.0.1:0\ndata_dir: %q\nhealth_check_interval: 200ms\nsse: {max_subscribers: %d}\nlog: {level: warn}\n", dir+"/data", o.subscribers+100)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		return nil, err
	}
	d := &daemon{cmd: exec.Command(o.binary, "serve", "--config", cfg), dir: dir}
	d.cmd.Stderr = os.Stderr
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
	}()
	select {
	case d.url = <-urls:
		return d, nil
	case <-time.After(20 * time.Second):
		d.kill()
		return nil, errors.New("daemon did not start within 20s")
	}
}

func (d *daemon) kill() {
	_ = d.cmd.Process.Kill()
	_ = d.cmd.Wait()
	os.RemoveAll(d.dir)
}

// metric reads one unlabelled value from /metrics.
func (d *daemon) metric(name string) (float64, error) {
	resp, err := http.Get(d.url + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no metric %s", name)
}

func (d *daemon) sequence(c *http.Client) (uint64, error) {
	resp, err := c.Get(d.url + "/v1/level")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return strconv.ParseUint(strings.Trim(resp.Header.Get("ETag"), `W/"`), 10, 64)
}
