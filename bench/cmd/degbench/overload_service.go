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
// In sleep mode a worker is held for the service time, so the capacity is
// N / service time whatever the CPU does. A worker's time is kept by
// deadline: a request that was waiting when its worker came free starts
// at that moment, not when its goroutine ran, so a late timer or a slow
// handover does not lower the capacity. (Measured before this was so: a
// saturated service behind no shedding completed 755/s of its 800.) In
// CPU mode a worker burns a
// fixed amount of CPU work instead (calibrated to take burn on an idle
// core), so the capacity is what the core the service is pinned to can do:
// one core / burn.
//
// The queue wait counts from when the request was sent (sentHeader), not
// from when a handler first saw it.

// serviceModel is one fixed-capacity service. The zero value is not
// usable: create it with newServiceModel.
type serviceModel struct {
	// free holds a token per idle worker: the time it came free.
	free chan time.Time
	// serve holds a worker for one request that starts at start (a sleep
	// to a deadline, or a CPU burn) and returns when the worker came free.
	serve     func(start time.Time) time.Time
	queueWait time.Duration
}

func newServiceModel(workers int, queueWait time.Duration, serve func(start time.Time) time.Time) *serviceModel {
	free := make(chan time.Time, workers)
	for range workers {
		free <- time.Time{}
	}
	return &serviceModel{free: free, serve: serve, queueWait: queueWait}
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
// then holds it while serve runs. The request starts when it began to
// wait or when its worker came free, whichever is later.
func (s *serviceModel) do(ctx context.Context, arrived time.Time) error {
	queued := time.Now()
	wait := arrived.Add(s.queueWait).Sub(queued)
	if wait <= 0 {
		return errQueueTimeout
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	var freed time.Time
	select {
	case freed = <-s.free:
	case <-t.C:
		return errQueueTimeout
	case <-ctx.Done():
		return ctx.Err()
	}
	start := queued
	if freed.After(start) {
		start = freed
	}
	s.free <- s.serve(start)
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

// sleepFor is sleep mode's serve: the worker is idle until d after the
// request's start, the CPU is not used. It returns that deadline, not
// when the sleep ended, so the next request on the worker starts on time.
// A worker that fell behind (a descheduled process) catches up by at most
// d, so that a stall is not repaid in one burst.
func sleepFor(d time.Duration) func(time.Time) time.Time {
	return func(start time.Time) time.Time {
		if floor := time.Now().Add(-d); start.Before(floor) {
			start = floor
		}
		end := start.Add(d)
		time.Sleep(time.Until(end))
		return end
	}
}

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

// burnFor is CPU mode's serve: the worker burns n calibrated rounds. Its
// capacity is the core's, so it keeps no deadline.
func burnFor(n int) func(time.Time) time.Time {
	return func(time.Time) time.Time {
		spin(n)
		return time.Now()
	}
}
