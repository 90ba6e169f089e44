package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/degraded/degraded/client"
	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/priority"
	"github.com/go-kratos/aegis/ratelimit"
	"github.com/go-kratos/aegis/ratelimit/bbr"
)

// The gates: what each system puts in front of the service. Each answers
// a request it sheds with 503 and passes the rest to the service, which
// answers 200 or, when its queue wait ran out, 500; so the load generator
// tells shed (503) from failed (500, or no answer) by the status alone.

// Gate names, as `-systems` and the results spell them.
const (
	gateNone     = "none"
	gateFailsafe = "failsafe"
	gateAegis    = "aegis"
	gateDegraded = "degraded" // the middleware; the daemon's mode makes the system
)

// failsafePriority maps a request's X-Priority to failsafe-go's classes:
// the benchmark's four classes (100, 60, 40, 10) are very high, high,
// medium and low.
func failsafePriority(p int) priority.Priority {
	switch {
	case p >= 100:
		return priority.VeryHigh
	case p >= 60:
		return priority.High
	case p >= 40:
		return priority.Medium
	default:
		return priority.Low
	}
}

func headerPriority(r *http.Request) int {
	p, err := strconv.Atoi(r.Header.Get("X-Priority"))
	if err != nil {
		return 0
	}
	return p
}

func shedAnswer(w http.ResponseWriter) {
	http.Error(w, "shed", http.StatusServiceUnavailable)
}

// failsafeGate is failsafe-go's adaptive limiter with its prioritizer, as
// its documentation sets them up (execution-prioritization.md): one
// prioritizer calibrated every second, a limiter built with
// BuildPrioritized and its defaults (limits 1..200 from 20, queueing up to
// 2-3x the limit), a permit per request at the request's priority. A
// request rejected (ErrExceeded) is shed; one whose wait in the limiter's
// queue outlasts the service's queue wait is failed, as the service would
// have failed it.
func failsafeGate(ctx context.Context, queueWait time.Duration) func(http.Handler) http.Handler {
	prioritizer := adaptivelimiter.NewPrioritizer()
	prioritizer.ScheduleCalibrations(ctx, time.Second)
	limiter := adaptivelimiter.NewBuilder[any]().BuildPrioritized(prioritizer)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			arrived, _ := r.Context().Value(arrivedKey{}).(time.Time)
			wctx, cancel := context.WithDeadline(r.Context(), arrived.Add(queueWait))
			permit, err := limiter.AcquirePermitWithPriority(wctx, failsafePriority(headerPriority(r)))
			cancel()
			switch {
			case errors.Is(err, adaptivelimiter.ErrExceeded):
				shedAnswer(w)
				return
			case err != nil:
				http.Error(w, errQueueTimeout.Error(), http.StatusInternalServerError)
				return
			}
			next.ServeHTTP(w, r)
			permit.Record()
		})
	}
}

// aegisGate is aegis' BBR limiter (go-kratos): it sheds, whatever the
// priority, when its CPU reading is at or above cpuThreshold (per mille)
// and the requests in flight exceed its estimate of the capacity.
func aegisGate(cpuThreshold int64) func(http.Handler) http.Handler {
	limiter := bbr.NewLimiter(bbr.WithCPUThreshold(cpuThreshold))
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			done, err := limiter.Allow()
			if err != nil {
				shedAnswer(w)
				return
			}
			next.ServeHTTP(w, r)
			done(ratelimit.DoneInfo{})
		})
	}
}

// degradedGate is the degraded client's middleware with the priority from
// X-Priority, following the daemon at daemonURL with the client's defaults
// (a 1 s report interval), timing requests from the startHeader when it is
// not "" (client.WithRequestStart). It returns once the client holds the
// daemon's state, so that the run does not start in the fail mode.
func degradedGate(ctx context.Context, daemonURL, startHeader string) (func(http.Handler) http.Handler, error) {
	c, err := client.New(daemonURL)
	if err != nil {
		return nil, err
	}
	go func() { _ = c.Run(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); c.State().Level == ""; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the client had no state from %s within 10s", daemonURL)
		}
	}
	var opts []client.MiddlewareOption
	if startHeader != "" {
		opts = append(opts, client.WithRequestStart(startHeader))
	}
	return client.Middleware(c, client.PriorityFromHeader("X-Priority", 0), opts...), nil
}

// overloadServiceCmd is `degbench overload-service`: one service behind
// one gate, on a free loopback port, until its stdin closes (the parent
// ended). It prints "overload service listening on URL" once it serves.
func overloadServiceCmd(args []string) error {
	fs := flag.NewFlagSet("overload-service", flag.ExitOnError)
	gate := fs.String("gate", gateNone, "none, failsafe, aegis or degraded")
	daemonURL := fs.String("daemon", "", "the daemon's URL (gate degraded)")
	requestStart := fs.String("request-start", "", "gate degraded: the header the middleware times requests from (client.WithRequestStart)")
	workers := fs.Int("workers", 8, "workers")
	serviceTime := fs.Duration("service-time", 10*time.Millisecond, "sleep mode: time a request holds a worker")
	burn := fs.Duration("burn", 0, "CPU mode: CPU time a request burns on an idle core (0: sleep mode)")
	queueWait := fs.Duration("queue-wait", 400*time.Millisecond, "longest wait for a worker; then 500")
	bbrThreshold := fs.Int64("bbr-cpu-threshold", 800, "gate aegis: BBR's CPU threshold, per mille")
	_ = fs.Parse(args)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serve := sleepFor(*serviceTime)
	if *burn > 0 {
		n := calibrateBurn(*burn)
		serve = burnFor(n)
		fmt.Fprintf(os.Stderr, "overload service: %d rounds burn %v\n", n, *burn)
	}
	var h http.Handler = newServiceModel(*workers, *queueWait, serve)
	switch *gate {
	case gateNone:
	case gateFailsafe:
		h = failsafeGate(ctx, *queueWait)(h)
	case gateAegis:
		h = aegisGate(*bbrThreshold)(h)
	case gateDegraded:
		g, err := degradedGate(ctx, *daemonURL, *requestStart)
		if err != nil {
			return err
		}
		h = g(h)
	default:
		return fmt.Errorf("unknown gate %q", *gate)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: withArrival(h), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() {
		// The parent closes stdin (or dies): stop.
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		_ = srv.Close()
	}()
	fmt.Printf("overload service listening on http://%s\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
