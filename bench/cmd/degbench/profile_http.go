package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/errwindow"
	"github.com/prometheus/client_golang/prometheus"
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

	table, err := config.Default().Table()
	if err != nil {
		return err
	}
	win, err := errwindow.New(errwindow.Options{Window: time.Minute, Buckets: 6})
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	var names []string
	for _, l := range table.Levels() {
		names = append(names, l.Name)
	}
	metrics := api.NewMetrics(reg, names)
	ctrl, err := controller.New(controller.Options{Table: table, Errors: win, Observer: metrics})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = ctrl.Run(ctx) }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           api.NewServer(api.Deps{Controller: ctrl, Outcomes: win, Gatherer: reg, Metrics: metrics}),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      90 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

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
