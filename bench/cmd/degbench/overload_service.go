package main

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// The service of fixed capacity that `degbench overload` puts behind every
// system: N workers, each request holding one for a service time, and a
// bounded wait for a worker. A request that has not got a worker within
// the wait is answered 500, as a server whose queue times out would.
//
// In sleep mode a worker sleeps for the service time, so the capacity is
// N / service time whatever the CPU does. In CPU mode a worker burns a
// fixed amount of CPU work instead (calibrated to take burn on an idle
// core), so the capacity is what the core the service is pinned to can do:
// one core / burn.
//
// The queue wait counts from when the request was sent (sentHeader), not
// from when a handler first saw it.

// serviceModel is one fixed-capacity service. The zero value is not
// usable: create it with newServiceModel.
type serviceModel struct {
	workers chan struct{} // a token per busy worker
	// serve holds a worker for one request: a sleep or a CPU burn.
	serve     func()
	queueWait time.Duration
}

func newServiceModel(workers int, queueWait time.Duration, serve func()) *serviceModel {
	return &serviceModel{workers: make(chan struct{}, workers), serve: serve, queueWait: queueWait}
}

// arrivedKey is the context key of the time a request arrived: the wait
// for a worker counts from there, so that time spent in a gate's own queue
// (failsafe-go's) counts against it.
type arrivedKey struct{}

// sentHeader carries the time the generator sent a request (Unix
// nanoseconds; one machine, one clock). The service's queue wait counts
// from it, so that it bounds what the client sees: on a saturated core a
// request can wait in the kernel's socket buffer, or for the handler's
// goroutine to be scheduled, before any handler sees it, and that wait is
// in the service's queue as much as the wait for a worker.
const sentHeader = "X-Sent-At"

// withArrival records when each request arrived, before any gate sees
// it: when it was sent, or now if that is not known.
func withArrival(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		arrived := now
		if ns, err := strconv.ParseInt(r.Header.Get(sentHeader), 10, 64); err == nil && ns <= now.UnixNano() {
			arrived = time.Unix(0, ns)
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), arrivedKey{}, arrived)))
	})
}

// errQueueTimeout is a request that waited the whole queue wait.
var errQueueTimeout = errors.New("no worker within the queue wait")

// do runs one request: it waits for a worker until arrived + queueWait,
// then holds it while serve runs.
func (s *serviceModel) do(ctx context.Context, arrived time.Time) error {
	wait := time.Until(arrived.Add(s.queueWait))
	if wait <= 0 {
		return errQueueTimeout
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case s.workers <- struct{}{}:
	case <-t.C:
		return errQueueTimeout
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.workers }()
	s.serve()
	return nil
}

var okBody = []byte("ok\n")

// ServeHTTP answers 200 once served, 500 when no worker came in time.
func (s *serviceModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived, ok := r.Context().Value(arrivedKey{}).(time.Time)
	if !ok {
		arrived = time.Now()
	}
	if err := s.do(r.Context(), arrived); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain")
	h.Set("Content-Length", strconv.Itoa(len(okBody)))
	_, _ = w.Write(okBody)
}

// sleepFor is sleep mode's serve: the worker is idle for d, the CPU is not
// used.
func sleepFor(d time.Duration) func() { return func() { time.Sleep(d) } }

// burnSink keeps the compiler from removing the burn loop.
var burnSink uint64

// spin runs n rounds of a 64-bit LCG and xorshift: CPU work with no memory
// traffic, so its cost per round is steady.
func spin(n int) {
	x := burnSink | 1
	for range n {
		x = x*6364136223846793005 + 1442695040888963407
		x ^= x >> 33
	}
	burnSink = x
}

// calibrateBurn returns how many spin rounds take d on this core: the
// fastest of a few timed runs, since interference only slows a run down.
func calibrateBurn(d time.Duration) int {
	const rounds = 2_000_000
	best := time.Duration(1<<63 - 1)
	for range 7 {
		start := time.Now()
		spin(rounds)
		best = min(best, time.Since(start))
	}
	return max(1, int(float64(rounds)*float64(d)/float64(best)))
}

// burnFor is CPU mode's serve: the worker burns n calibrated rounds.
func burnFor(n int) func() { return func() { spin(n) } }
