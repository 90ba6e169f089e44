package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The CPU-bound service's capacity, measured. Its nominal capacity, one
// core / burn, is not what it completes: the burn is a spin count
// calibrated at start (the fastest of seven timed runs), and the core
// also runs the HTTP stack, the scheduler and the kernel's loopback. On
// the 2-core VM of docs/performance.md, driven closed-loop by wrk with
// nothing shed, services calibrated a few minutes apart completed
// 190-195/s and 199-200/s of the nominal 200; calibrations ranged over
// 6%; and one run's service served 228/s within a second. Judged against
// the nominal, a gate's goodput moved with that luck. So the CPU-bound
// variant calibrates once per run: a fresh service with no gate,
// pinned and in its cgroup as the systems' are, calibrates its burn and
// is driven closed-loop; every system's service then burns the same
// rounds, and goodput is judged against what the service completed when
// that is below the nominal.

// capacityRun is how a capacity measurement is run: conns requests in
// flight at all times, warm to fill the pipes, measure to count.
type capacityRun struct {
	conns         int
	warm, measure time.Duration
}

// capacityRun is how the CPU-bound service's capacity is measured: twice
// its workers in flight, so that one is always waiting when a worker
// comes free; a second to warm, five to count (a few hundred answers
// at 200/s, 1.5 s in QUICK's smoke).
func (env *runEnv) capacityRun() capacityRun {
	if env.o.quick {
		return capacityRun{conns: 2 * env.o.cpuWorkers, warm: 500 * time.Millisecond, measure: 1500 * time.Millisecond}
	}
	return capacityRun{conns: 2 * env.o.cpuWorkers, warm: time.Second, measure: 5 * time.Second}
}

// capacityMeasured is a capacity measurement's result.
type capacityMeasured struct {
	// Rate is the requests/s answered 200 while counting.
	Rate float64
	// Conns is how many requests were in flight at all times; Seconds
	// how long the count ran.
	Conns   int
	Seconds float64
	// BurnRounds is the spin rounds a request burned, calibrated by this
	// service on the service's core; every system's service then burns
	// the same.
	BurnRounds int
}

// measureCPUCapacity starts the CPU-bound service with no gate, pinned
// and in its cgroup as the scenario's are, and measures what it completes
// closed-loop.
func measureCPUCapacity(env *runEnv, cr capacityRun) (capacityMeasured, error) {
	args := []string{"-gate", gateNone, "-queue-wait", env.o.queueWait.String(),
		"-workers", strconv.Itoa(env.o.cpuWorkers), "-burn", env.o.burn.String()}
	svc, err := startService(env.self, args, env.o.serviceCPU, env.cgroupDir)
	if err != nil {
		return capacityMeasured{}, err
	}
	defer svc.stop()
	m, err := closedLoopRate(svc.url+"/work", cr)
	m.BurnRounds = svc.burnRounds
	if err == nil && m.BurnRounds <= 0 {
		err = errors.New("the CPU-bound service did not say how many rounds it burns")
	}
	return m, err
}

// closedLoopRate sends GETs to u from cr.conns loops, each sending its
// next request when the last one is answered, and counts the answers 200
// over cr.measure after cr.warm. An answer that is not 200, or a request
// that fails, while counting is an error: the service was to be measured
// unshed and untimed-out.
func closedLoopRate(u string, cr capacityRun) (capacityMeasured, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: cr.conns, MaxConnsPerHost: cr.conns}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var counting atomic.Bool
	var ok atomic.Int64
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) { errOnce.Do(func() { firstErr = err }) }
	var wg sync.WaitGroup
	for range cr.conns {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
				if err != nil {
					fail(err)
					return
				}
				req.Header.Set("X-Priority", "100")
				req.Header.Set(sentHeader, strconv.FormatInt(time.Now().UnixNano(), 10))
				resp, err := cl.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						fail(err)
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch {
				case !counting.Load():
				case resp.StatusCode == http.StatusOK:
					ok.Add(1)
				default:
					fail(fmt.Errorf("answered %d", resp.StatusCode))
				}
			}
		})
	}
	time.Sleep(cr.warm)
	counting.Store(true)
	began := time.Now()
	time.Sleep(cr.measure)
	counting.Store(false)
	n, elapsed := ok.Load(), time.Since(began)
	cancel()
	wg.Wait()
	if firstErr != nil {
		return capacityMeasured{}, fmt.Errorf("measuring the capacity, closed-loop with %d in flight: %w", cr.conns, firstErr)
	}
	if n == 0 {
		return capacityMeasured{}, fmt.Errorf("measuring the capacity: no request answered in %v", elapsed)
	}
	m := capacityMeasured{Rate: float64(n) / elapsed.Seconds(), Conns: cr.conns, Seconds: elapsed.Seconds()}
	fmt.Fprintf(os.Stderr, "overload: the CPU-bound service completes %.1f/s closed-loop (%d in flight, %.1fs)\n", m.Rate, m.Conns, m.Seconds)
	return m, nil
}
