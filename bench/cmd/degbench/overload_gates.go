package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
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
	gateFixed    = "fixed"    // a fixed admission (fixedAdmission), the reference no law beats
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

// fixedAdmission is a fixed admission, as a state document states one:
// priorities >= Threshold are admitted, those in [From, Threshold) with
// probability Fraction, the rest shed. Run at a sweep of fractions
// (`degbench overload -systems fixed -fixed ...`), it finds the most a
// fixed admission serves within the SLO: what the service can carry
// under the scenario's load, the shed requests' cost to its core
// included, with none of a feedback law's errors. It is a reference, not
// a peer: it knows the load and the capacity in advance, which no system
// in front of a real service does.
type fixedAdmission struct {
	Threshold, From int
	Fraction        float64
}

// String is the flag's form: "60,40:0.3", or "60" with no partial.
func (f fixedAdmission) String() string {
	if f.Fraction == 0 {
		return strconv.Itoa(f.Threshold)
	}
	return fmt.Sprintf("%d,%d:%g", f.Threshold, f.From, f.Fraction)
}

// parseFixed reads a fixedAdmission from its flag's form.
func parseFixed(s string) (fixedAdmission, error) {
	var f fixedAdmission
	head, partial, hasPartial := strings.Cut(s, ",")
	t, err := strconv.Atoi(head)
	if err != nil {
		return f, fmt.Errorf("fixed admission %q: the threshold %q is not an integer", s, head)
	}
	f.Threshold = t
	if !hasPartial {
		return f, nil
	}
	from, frac, ok := strings.Cut(partial, ":")
	if !ok {
		return f, fmt.Errorf("fixed admission %q: the partial %q is not from:fraction", s, partial)
	}
	if f.From, err = strconv.Atoi(from); err != nil || f.From >= t {
		return f, fmt.Errorf("fixed admission %q: the partial's from %q is not an integer below the threshold %d", s, from, t)
	}
	if f.Fraction, err = strconv.ParseFloat(frac, 64); err != nil || !(f.Fraction >= 0 && f.Fraction <= 1) {
		return f, fmt.Errorf("fixed admission %q: the fraction %q is not a number in [0, 1]", s, frac)
	}
	return f, nil
}

// fixedGate sheds what the fixed admission f does not admit, a draw per
// request in its partial band.
func fixedGate(f fixedAdmission) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if p := headerPriority(r); p < f.Threshold && (p < f.From || rand.Float64() >= f.Fraction) {
				shedAnswer(w)
				return
			}
			next.ServeHTTP(w, r)
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

// burnRoundsLine starts the line on which a CPU-mode service says how many
// spin rounds a request burns, before it says where it listens.
const burnRoundsLine = "overload service burns rounds "

// overloadServiceCmd is `degbench overload-service`: one service behind
// one gate, on a free loopback port, until its stdin closes (the parent
// ended). It prints "overload service listening on URL" once it serves,
// and in CPU mode the rounds it burns per request before that.
func overloadServiceCmd(args []string) error {
	fs := flag.NewFlagSet("overload-service", flag.ExitOnError)
	gate := fs.String("gate", gateNone, "none, failsafe, aegis, degraded or fixed")
	fixed := fs.String("fixed", "", "gate fixed: the admission, threshold[,from:fraction]")
	daemonURL := fs.String("daemon", "", "the daemon's URL (gate degraded)")
	requestStart := fs.String("request-start", "", "gate degraded: the header the middleware times requests from (client.WithRequestStart)")
	workers := fs.Int("workers", 8, "workers")
	serviceTime := fs.Duration("service-time", 10*time.Millisecond, "sleep mode: time a request holds a worker")
	burn := fs.Duration("burn", 0, "CPU mode: CPU time a request burns on an idle core (0: sleep mode)")
	burnRounds := fs.Int("burn-rounds", 0, "CPU mode: spin rounds a request burns (0: calibrate to -burn on this core)")
	queueWait := fs.Duration("queue-wait", 400*time.Millisecond, "longest wait for a worker; then 500")
	bbrThreshold := fs.Int64("bbr-cpu-threshold", 800, "gate aegis: BBR's CPU threshold, per mille")
	_ = fs.Parse(args)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serve := sleepFor(*serviceTime)
	if *burn > 0 {
		n := *burnRounds
		if n <= 0 {
			n = calibrateBurn(*burn)
		}
		serve = burnFor(n)
		fmt.Printf("%s%d\n", burnRoundsLine, n)
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
	case gateFixed:
		f, err := parseFixed(*fixed)
		if err != nil {
			return err
		}
		h = fixedGate(f)(h)
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
