package client

import (
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"
)

func TestLatencyBounds(t *testing.T) {
	want := [numLatencyBuckets]float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, math.Inf(1)}
	if got := LatencyBounds(); got != want {
		t.Errorf("LatencyBounds() = %v, want %v", got, want)
	}
}

func TestObserveCountsEachLatencyInItsBucket(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		d      time.Duration
		bucket int
	}{
		{-ms, 0}, {0, 0}, {ms, 0}, {ms + 1, 1}, {2 * ms, 1}, {3 * ms, 2},
		{100 * ms, 6}, {150 * ms, 7}, {10 * time.Second, 12}, {10*time.Second + 1, 13}, {time.Hour, 13},
	} {
		c := at(t, majorState(time.Now()))
		c.Observe(tc.d > 0, tc.d)
		s, f, l := counted(c)
		var want [numLatencyBuckets]int64
		want[tc.bucket] = 1
		if s+f != 1 || l != want {
			t.Errorf("Observe(%v): %d outcomes, latencies %v; want 1 outcome in bucket %d (<= %vms)", tc.d, s+f, l, tc.bucket, LatencyBounds()[tc.bucket])
		}
	}
}

func TestMiddlewareObservesHowLongTheHandlerTook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := at(t, majorState(time.Now()))
		h := Middleware(c, PriorityFromHeader("X-Priority", 80))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d, _ := time.ParseDuration(r.URL.Query().Get("take"))
			time.Sleep(d)
			if r.URL.Query().Has("fail") {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}))
		for _, q := range []string{"take=300ms", "take=300ms&fail", "take=3s", "take=0s"} {
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/?"+q, nil))
		}
		s, f, l := counted(c)
		want := [numLatencyBuckets]int64{0: 1, 8: 2, 11: 1} // <= 1ms, (200, 500]ms, (2000, 5000]ms
		if s != 3 || f != 1 || l != want {
			t.Errorf("observed %d successes %d failures, latencies %v; want 3, 1, %v", s, f, l, want)
		}
	})
}

// A client upgraded before its daemon must not send latency_counts, which
// an older daemon refuses with the whole report; once the daemon publishes
// the latency signal, the counts go with the outcomes.
func TestLatencyIsSentOnlyToADaemonThatKeepsIt(t *testing.T) {
	for _, keeps := range []bool{false, true} {
		name := map[bool]string{false: "older daemon", true: "daemon with the latency signal"}[keeps]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := newDaemon(t)
				d.keepsLatency = keeps
				d.start()
				c := d.newClient(WithReportInterval(time.Second))
				stop := running(t, c)
				synctest.Wait()
				for i := range 100 {
					c.Observe(i%10 != 0, time.Duration(i)*time.Millisecond) // 0..99ms
				}
				c.Record(true) // an outcome without a latency
				time.Sleep(time.Second)
				synctest.Wait()
				if a, f := d.win.Totals(time.Now()); a != 101 || f != 10 {
					t.Errorf("daemon got %d attempts %d failures, want 101 and 10", a, f)
				}
				var want [numLatencyBuckets]int64
				if keeps {
					want = [numLatencyBuckets]int64{2, 1, 3, 5, 10, 30, 49}
				}
				if got := d.win.latencies(); got != want {
					t.Errorf("daemon got latencies %v, want %v", got, want)
				}
				stop()
				if c.pending != (counts{}) {
					t.Errorf("after an accepted flush the client keeps %+v, want nothing", c.pending)
				}
			})
		})
	}
}

// A client that connects before the daemon's first health check holds a
// state without status, so without status.latency. The daemon's check
// moves no sequence, so no new state comes on the stream; the client
// reads the state again and sends latency_counts from the next report.
func TestLatencyIsSentOnceTheDaemonHasChecked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		d.keepsLatency, d.unsampled = true, true
		d.start()
		c := d.newClient(WithReportInterval(time.Second))
		stop := running(t, c)
		defer stop()
		synctest.Wait()
		c.Observe(true, 3*time.Millisecond)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := d.win.latencies(); got != ([numLatencyBuckets]int64{}) {
			t.Errorf("before the daemon's first check it got latencies %v, want none (its status says nothing of latency)", got)
		}
		d.mu.Lock()
		d.unsampled = false
		d.mu.Unlock()
		for range 2 {
			c.Observe(true, 3*time.Millisecond)
			time.Sleep(time.Second)
			synctest.Wait()
		}
		if got, want := d.win.latencies(), ([numLatencyBuckets]int64{2: 2}); got != want {
			t.Errorf("after the daemon's first check (no new sequence) it got latencies %v, want %v: each report after the check reads the state again", got, want)
		}
		if a, _ := d.win.Totals(time.Now()); a != 3 {
			t.Errorf("daemon got %d attempts, want 3", a)
		}
		if st := c.State(); st.Signals.Status["latency"] != "off" || st.Sequence != 0 {
			t.Errorf("client holds sequence %d with status %v, want sequence 0 with the daemon's status", st.Sequence, st.Signals.Status)
		}
	})
}

// While the daemon is down, latencies are kept with their outcomes, under
// the same bound.
func TestRetainedLatenciesStayWithinTheOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDaemon(t)
		d.keepsLatency = true
		c := d.newClient()
		st, _ := d.current()
		c.accept(&st, time.Now())
		c.pending = counts{success: maxRetained, failure: maxRetained / 3, latency: [numLatencyBuckets]int64{0: maxRetained/3 + 1, 6: maxRetained}}
		c.Observe(false, time.Second)
		if err := c.flush(t.Context(), true); err == nil {
			t.Fatal("flush to a stopped daemon succeeded")
		}
		p := c.pending
		var sum int64
		for _, n := range p.latency {
			sum += n
		}
		if total := p.success + p.failure; total > maxRetained || sum > total {
			t.Errorf("kept %d outcomes and %d latencies, want at most %d outcomes and no more latencies than outcomes", total, sum, maxRetained)
		}
		if ratio := float64(p.latency[6]) / float64(p.latency[0]); ratio < 2.99 || ratio > 3.01 {
			t.Errorf("kept latencies %v, want the distribution kept (bucket 6 three times bucket 0)", p.latency)
		}
	})
}

func TestFitLatency(t *testing.T) {
	for _, tc := range []struct {
		in    [numLatencyBuckets]int64
		total int64
		want  [numLatencyBuckets]int64
	}{
		{[numLatencyBuckets]int64{3, 4}, 7, [numLatencyBuckets]int64{3, 4}},
		{[numLatencyBuckets]int64{3, 4}, 10, [numLatencyBuckets]int64{3, 4}},
		{[numLatencyBuckets]int64{3, 4}, 6, [numLatencyBuckets]int64{2, 4}},
		{[numLatencyBuckets]int64{3, 4, 0, 5}, 2, [numLatencyBuckets]int64{0, 0, 0, 2}},
		{[numLatencyBuckets]int64{3}, 0, [numLatencyBuckets]int64{}},
	} {
		if got := fitLatency(tc.in, tc.total); got != tc.want {
			t.Errorf("fitLatency(%v, %d) = %v, want %v", tc.in, tc.total, got, tc.want)
		}
	}
}

// A handler that panics is observed as a failure, and its writer is not
// handed to a later request: the panicking handler's goroutines may hold it.
func TestMiddlewareDoesNotReuseAPanickedWriter(t *testing.T) {
	c := at(t, majorState(time.Now()))
	var seen []http.ResponseWriter
	h := Middleware(c, PriorityFromHeader("X-Priority", 80))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, w)
		if r.URL.Path == "/panic" {
			panic(http.ErrAbortHandler)
		}
	}))
	func() {
		defer func() { _ = recover() }()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/panic", nil))
	}()
	for range 3 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] == seen[0] {
			t.Errorf("request %d got the writer of the request that panicked", i)
		}
	}
	if s, f, _ := counted(c); s != 3 || f != 1 {
		t.Errorf("observed %d successes %d failures, want 3 and 1 (the panic)", s, f)
	}
}

// Streaming handlers keep working through the middleware: Flush passes
// through, and http.ResponseController reaches the connection.
func TestMiddlewareKeepsFlushAndResponseController(t *testing.T) {
	c := at(t, majorState(time.Now()))
	var flushed, controlled bool
	h := Middleware(c, PriorityFromHeader("X-Priority", 80))(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		f, ok := w.(http.Flusher)
		if ok {
			f.Flush()
			flushed = true
		}
		controlled = http.NewResponseController(w).Flush() == nil
	}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if !flushed || !controlled || !w.Flushed {
		t.Errorf("Flusher %v, ResponseController.Flush %v, recorder flushed %v; want all true", flushed, controlled, w.Flushed)
	}
}

// Observe is on every timed request's path: one atomic add, no allocation.
func TestObserveDoesNotAllocate(t *testing.T) {
	c := at(t, majorState(time.Now()))
	if n := testing.AllocsPerRun(1000, func() { c.Observe(true, 3*time.Millisecond) }); n != 0 {
		t.Errorf("Observe allocates %v times, want 0", n)
	}
}
