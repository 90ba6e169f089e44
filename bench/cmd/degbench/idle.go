package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"
)

// idleResult is what `degbench idle` writes.
type idleResult struct {
	Subscribers int
	Seconds     float64
	CPUSeconds  float64
	CPUPercent  float64 // of one core
	RSSEnd      float64 // bytes
	RSSMax      float64 // bytes, sampled once a second
}

func idleCmd(args []string) error {
	fs := flag.NewFlagSet("idle", flag.ExitOnError)
	binary := fs.String("binary", "./degraded", "degraded binary")
	n := fs.Int("subscribers", 100, "SSE subscribers")
	dur := fs.Duration("duration", 60*time.Second, "measured span")
	warm := fs.Duration("warmup", 5*time.Second, "settling time after the subscribers connect")
	out := fs.String("out", "idle.json", "result file")
	_ = fs.Parse(args)

	// The default configuration: only the address and the state directory
	// are chosen here (a free port, a temporary directory).
	d, err := startDaemon(*binary, "")
	if err != nil {
		return err
	}
	defer d.stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range *n {
		s, err := dialSSE(ctx, d.url+"/v1/level/stream")
		if err != nil {
			return err
		}
		wg.Go(func() { _ = s.follow(func(sseEvent) {}) })
		context.AfterFunc(ctx, func() { s.Close() })
	}
	time.Sleep(*warm)
	res := idleResult{Subscribers: *n}
	c0, err := procCPU(d.pid())
	if err != nil {
		return err
	}
	t0 := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for time.Since(t0) < *dur {
		<-tick.C
		if rss, err := procRSS(d.pid()); err == nil {
			res.RSSMax = max(res.RSSMax, rss)
		}
	}
	c1, err := procCPU(d.pid())
	if err != nil {
		return err
	}
	res.Seconds = time.Since(t0).Seconds()
	res.CPUSeconds = (c1 - c0).Seconds()
	res.CPUPercent = 100 * res.CPUSeconds / res.Seconds
	if res.RSSEnd, err = procRSS(d.pid()); err != nil {
		return err
	}
	res.RSSMax = max(res.RSSMax, res.RSSEnd)
	fmt.Fprintf(os.Stderr, "idle: %d subscribers, %.0fs: CPU %.3f%% of a core, RSS %.1f MiB (max %.1f)\n",
		*n, res.Seconds, res.CPUPercent, res.RSSEnd/(1<<20), res.RSSMax/(1<<20))
	return writeJSON(*out, res)
}
