package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/degraded/degraded/config"
	wiring "github.com/degraded/degraded/internal/daemon"
)

// profileHTTPCmd serves the daemon's API in this process (wired as
// serve wires it, with its Prometheus metrics) and profiles the CPU while
// wrk loads one endpoint. run.sh does not run it.
func profileHTTPCmd(args []string) error {
	fs := flag.NewFlagSet("profile-http", flag.ExitOnError)
	wrk := fs.String("wrk", "wrk", "wrk binary")
	endpoint := fs.String("endpoint", "POST /v1/outcomes", `"GET /v1/level" or "POST /v1/outcomes"`)
	dur := fs.Duration("duration", 10*time.Second, "wrk duration")
	out := fs.String("out", "cpu-http.pprof", "CPU profile")
	_ = fs.Parse(args)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	cfg := config.Default()
	cfg.DataDir = ""
	cfg.Signals.CPU.Source, cfg.Signals.Memory.Source = "off", "off"
	d, err := wiring.New(cfg, wiring.Options{Listener: ln})
	if err != nil {
		ln.Close()
		return err
	}
	defer d.Close()
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- d.Run(ctx) }()
	defer func() { cancel(); <-runDone }()

	dir, err := os.MkdirTemp("", "degbench-wrk")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	a := []string{"-t2", "-c64", "-d" + dur.String()}
	if strings.HasPrefix(*endpoint, "POST") {
		post := filepath.Join(dir, "post.lua")
		lua := fmt.Sprintf("wrk.method = \"POST\"\nwrk.body = %q\nwrk.headers[\"Content-Type\"] = \"application/json\"\n", outcomesBody)
		if err := os.WriteFile(post, []byte(lua), 0o644); err != nil {
			return err
		}
		a = append(a, "-s", post)
	}
	a = append(a, "http://"+ln.Addr().String()+strings.Fields(*endpoint)[1])
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	r, err := runWrk(*wrk, a)
	pprof.StopCPUProfile()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "profile-http: %s in process: %.0f req/s\n", *endpoint, r.Requests)
	return nil
}
