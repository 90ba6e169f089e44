package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/controller"
	wiring "github.com/degraded/degraded/internal/daemon"
)

// profileFanoutCmd runs the daemon's own packages in this process, wired
// as cmd/degraded's serve wires them (same http.Server timeouts, a file
// store), connects subscribers from a child process and makes changes,
// writing a heap profile with every subscriber connected and a CPU
// profile over the changes. It is how the fan-out findings in
// docs/performance.md were profiled; run.sh does not run it.
func profileFanoutCmd(args []string) error {
	fs := flag.NewFlagSet("profile-fanout", flag.ExitOnError)
	n := fs.Int("subscribers", 10000, "SSE subscribers")
	changes := fs.Int("changes", 20, "override changes")
	dir := fs.String("dir", ".", "where to write heap.pprof and cpu.pprof")
	memory := fs.Bool("memory-state", false, "no file store")
	out := fs.String("out", "", "result file (JSON); empty: none")
	_ = fs.Parse(args)

	cfg := config.Default()
	cfg.DataDir = ""
	cfg.Signals.CPU.Source, cfg.Signals.Memory.Source = "off", "off"
	cfg.SSE.MaxSubscribers = *n + 1000
	if !*memory {
		tmp, err := os.MkdirTemp("", "degbench-profile")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		cfg.DataDir = tmp
	}
	d, err := wiring.New(cfg, wiring.Options{})
	if err != nil {
		return err
	}
	defer d.Close()
	ctrl := d.Controller()
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- d.Run(ctx) }()
	defer func() { cancel(); <-runDone }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	handler := d.Handler()
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      90 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	url := "http://" + ln.Addr().String()

	runtime.GC()
	rssBefore, _ := procRSS(os.Getpid())
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	subs, err := startSubscribers("sse", url+"/v1/level/stream", *n)
	if err != nil {
		return err
	}
	defer subs.stop()
	time.Sleep(time.Second)
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	fmt.Fprintf(os.Stderr, "profile: %d subscribers: heap in use +%.0f B/subscriber, stacks +%.0f B/subscriber, goroutines %d\n",
		*n, float64(m1.HeapInuse-m0.HeapInuse)/float64(*n), float64(m1.StackInuse-m0.StackInuse)/float64(*n), runtime.NumGoroutine())
	rss0 := rssBefore
	rss1, _ := procRSS(os.Getpid())
	res := profileResult{
		Subscribers: *n, Changes: *changes,
		RSSPerSubscriber:   (rss1 - rss0) / float64(*n),
		HeapPerSubscriber:  float64(m1.HeapInuse-m0.HeapInuse) / float64(*n),
		StackPerSubscriber: float64(m1.StackInuse-m0.StackInuse) / float64(*n),
	}
	fmt.Fprintf(os.Stderr, "profile: RSS %.1f -> %.1f MiB, +%.0f B/subscriber\n", rss0/(1<<20), rss1/(1<<20), (rss1-rss0)/float64(*n))
	if err := writeProfile(filepath.Join(*dir, "heap.pprof"), "heap"); err != nil {
		return err
	}

	f, err := os.Create(filepath.Join(*dir, "cpu.pprof"))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	var last []float64
	seq := ctrl.State().Sequence
	for i := range *changes {
		seq++
		if err := subs.expect(seq); err != nil {
			return err
		}
		t0 := now()
		st, err := ctrl.SetOverride(controller.OverrideRequest{Level: []string{"Major", "Minor"}[i%2], Mode: controller.ModePin, TTL: time.Hour, Reason: "profile"})
		if err != nil {
			return err
		}
		if st.Sequence != seq {
			return errors.New("unexpected sequence")
		}
		cs, err := subs.result(seq, t0)
		if err != nil {
			return err
		}
		last = append(last, cs.LastMs)
		time.Sleep(100 * time.Millisecond)
	}
	pprof.StopCPUProfile()
	fmt.Fprintf(os.Stderr, "profile: %d changes, to the last subscriber p50 %.1f ms, max %.1f ms\n", *changes, quantile(last, .5), quantile(last, 1))
	res.LastMs = last
	if *out != "" {
		return writeJSON(*out, res)
	}
	return nil
}

// profileResult is what profile-fanout writes with -out.
type profileResult struct {
	Subscribers, Changes                                    int
	RSSPerSubscriber, HeapPerSubscriber, StackPerSubscriber float64
	LastMs                                                  []float64
}

func writeProfile(path, name string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup(name).WriteTo(f, 0)
}
