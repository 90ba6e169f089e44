package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/failsafe-go/failsafe-go/priority"
)

func TestArrivalsRateAndMix(t *testing.T) {
	phases := []phaseSpec{
		{Name: "a", Seconds: 200, Rates: mixRates(100, 1)}, // 100/s
		{Name: "idle", Seconds: 5, Rates: []float64{0, 0, 0, 0}},
		{Name: "b", Seconds: 50, Rates: spikeRates(100, 1, 12)}, // 10+20+30+480 = 540/s
	}
	a := newArrivals(7, phases)
	counts := make([][]float64, len(phases))
	for i := range counts {
		counts[i] = make([]float64, len(overloadClasses))
	}
	var gaps []float64
	last := 0.0
	for {
		at, class, ok := a.next()
		if !ok {
			break
		}
		if at < last {
			t.Fatalf("arrival at %v after one at %v: not in order", at, last)
		}
		p, _ := phaseAt(phases, at)
		if p == 1 {
			t.Fatalf("arrival at %v in the phase of rate 0", at)
		}
		if p == 0 {
			gaps = append(gaps, at-last)
		}
		last = at
		counts[p][class]++
	}
	if last >= 255 {
		t.Errorf("last arrival at %v, after the 255 s the phases last", last)
	}
	for _, i := range []int{0, 2} {
		ph := phases[i]
		var n float64
		for c, r := range ph.Rates {
			n += counts[i][c]
			want := r * ph.Seconds
			// Poisson: within 4 standard deviations.
			if d := math.Abs(counts[i][c] - want); d > 4*math.Sqrt(want) {
				t.Errorf("phase %s, class p%d: %v arrivals, want about %v", ph.Name, overloadClasses[c].Priority, counts[i][c], want)
			}
		}
		if want := ph.Offered() * ph.Seconds; math.Abs(n-want) > 4*math.Sqrt(want) {
			t.Errorf("phase %s: %v arrivals, want about %v", ph.Name, n, want)
		}
	}
	// Exponential gaps: mean 1/rate, coefficient of variation 1.
	var sum, sq float64
	for _, g := range gaps {
		sum += g
	}
	mean := sum / float64(len(gaps))
	for _, g := range gaps {
		sq += (g - mean) * (g - mean)
	}
	cv := math.Sqrt(sq/float64(len(gaps))) / mean
	if math.Abs(mean-0.01) > 0.0005 || math.Abs(cv-1) > 0.05 {
		t.Errorf("gaps at 100/s: mean %v s, CV %v; want 0.01 s and 1 (Poisson)", mean, cv)
	}
	// The same seed gives the same arrivals: every system sees the same load.
	x, y := newArrivals(3, phases), newArrivals(3, phases)
	for range 1000 {
		a1, c1, _ := x.next()
		a2, c2, _ := y.next()
		if a1 != a2 || c1 != c2 {
			t.Fatal("two arrival processes with one seed differ")
		}
	}
}

// serveAt runs the service model on requests arriving at the given
// offsets (from now, inside a synctest bubble) and returns each one's
// outcome and time in the service.
func serveAt(s *serviceModel, offsets []time.Duration) (errs []error, took []time.Duration) {
	errs, took = make([]error, len(offsets)), make([]time.Duration, len(offsets))
	start := time.Now()
	var wg sync.WaitGroup
	for i, off := range offsets {
		time.Sleep(time.Until(start.Add(off)))
		wg.Go(func() {
			t0 := time.Now()
			errs[i] = s.do(context.Background(), t0)
			took[i] = time.Since(t0)
		})
	}
	wg.Wait()
	return errs, took
}

func evenly(n int, gap time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i) * gap
	}
	return out
}

func TestServiceModelUnderCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 400/s evenly against 8 workers x 10 ms: never more than 4 busy.
		s := newServiceModel(8, 400*time.Millisecond, sleepFor(10*time.Millisecond))
		errs, took := serveAt(s, evenly(400, 2500*time.Microsecond))
		for i := range errs {
			if errs[i] != nil || took[i] != 10*time.Millisecond {
				t.Fatalf("request %d: %v after %v; want served in exactly the 10 ms service time", i, errs[i], took[i])
			}
		}
	})
}

func TestServiceModelCapacityAndQueueWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 2000/s for 1 s against 800/s: the workers serve 800/s while the
		// queue is not empty; a request waits at most 400 ms, then fails.
		s := newServiceModel(8, 400*time.Millisecond, sleepFor(10*time.Millisecond))
		offsets := evenly(2000, 500*time.Microsecond)
		errs, took := serveAt(s, offsets)
		var served int
		doneBy := map[int]int{} // completions by whole 100 ms
		for i := range errs {
			switch {
			case errs[i] == nil:
				served++
				if took[i] > 410*time.Millisecond {
					t.Errorf("request %d served after %v, beyond the 400 ms wait and the 10 ms service", i, took[i])
				}
				doneBy[int((offsets[i]+took[i])/(100*time.Millisecond))]++
			case errors.Is(errs[i], errQueueTimeout):
				if took[i] != 400*time.Millisecond {
					t.Errorf("request %d failed after %v, want after the 400 ms wait", i, took[i])
				}
			default:
				t.Fatalf("request %d: %v", i, errs[i])
			}
		}
		// 800/s from 10 ms to 1.4 s (the last arrival's wait): about 1120.
		if served < 1110 || served > 1125 {
			t.Errorf("served %d of 2000 at 2000/s for 1 s, want about 1120 (800/s for 1.4 s)", served)
		}
		for w := 2; w <= 12; w++ {
			if doneBy[w] != 80 {
				t.Errorf("%d completions in [%d00, %d00) ms, want 80 (800/s)", doneBy[w], w, w+1)
			}
		}
		// A request whose wait already ran out in a gate before it is not served.
		if err := s.do(context.Background(), time.Now().Add(-time.Second)); !errors.Is(err, errQueueTimeout) {
			t.Errorf("a request that arrived 1 s ago: %v, want errQueueTimeout", err)
		}
	})
}

func TestServiceModelKeepsCapacityWhenWorkersAreLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Every worker hands over 1 ms after its deadline, as a late timer
		// or a descheduled goroutine would. Kept by deadline, the next
		// request on it still starts on time, so the service completes
		// 800/s, not the 727/s of 8 workers x 11 ms.
		const late = time.Millisecond
		sleep := sleepFor(10 * time.Millisecond)
		s := newServiceModel(8, 400*time.Millisecond, func(start time.Time) time.Time {
			end := sleep(start)
			time.Sleep(late)
			return end
		})
		offsets := evenly(2000, 500*time.Microsecond)
		errs, took := serveAt(s, offsets)
		doneBy := map[int]int{}
		for i := range errs {
			if errs[i] == nil {
				doneBy[int((offsets[i]+took[i])/(100*time.Millisecond))]++
			}
		}
		for w := 2; w <= 12; w++ {
			if doneBy[w] < 79 || doneBy[w] > 81 {
				t.Errorf("%d completions in [%d00, %d00) ms with workers 1 ms late, want 80 (800/s)", doneBy[w], w, w+1)
			}
		}
	})
}

func TestServiceModelRepaysAStallByOneServiceTimeAtMost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A worker that hands over 50 ms late (a stalled process) serves
		// the next request at once, but not five of them: it catches up
		// by one service time, then runs at its rate again.
		sleep := sleepFor(10 * time.Millisecond)
		stalled := false
		s := newServiceModel(1, time.Second, func(start time.Time) time.Time {
			end := sleep(start)
			if !stalled {
				stalled = true
				time.Sleep(50 * time.Millisecond)
			}
			return end
		})
		errs, took := serveAt(s, make([]time.Duration, 4))
		var ends []time.Duration
		for i := range errs {
			if errs[i] != nil {
				t.Fatalf("request %d: %v", i, errs[i])
			}
			ends = append(ends, took[i])
		}
		slices.Sort(ends)
		want := []time.Duration{60 * time.Millisecond, 60 * time.Millisecond, 70 * time.Millisecond, 80 * time.Millisecond}
		if !slices.Equal(ends, want) {
			t.Errorf("completions after a 50 ms stall at %v, want %v", ends, want)
		}
	})
}

func TestServiceHTTP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := withArrival(newServiceModel(1, 50*time.Millisecond, sleepFor(100*time.Millisecond)))
		codes := make([]int, 2)
		var wg sync.WaitGroup
		for i := range codes {
			wg.Go(func() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/work", nil))
				codes[i] = w.Code
			})
			time.Sleep(time.Millisecond)
		}
		wg.Wait()
		if codes[0] != 200 || codes[1] != 500 {
			t.Errorf("one worker busy for 100 ms, a 50 ms wait: answers %v, want [200 500]", codes)
		}
	})
}

func TestCalibrateBurn(t *testing.T) {
	n := calibrateBurn(time.Millisecond)
	start := time.Now()
	spin(n * 20)
	if got := time.Since(start); got < 15*time.Millisecond {
		t.Errorf("20 calibrated bursts of 1 ms took %v, want at least 15 ms", got)
	}
}

func TestFailsafePriority(t *testing.T) {
	for p, want := range map[int]priority.Priority{100: priority.VeryHigh, 60: priority.High, 40: priority.Medium, 10: priority.Low, 0: priority.Low} {
		if got := failsafePriority(p); got != want {
			t.Errorf("failsafePriority(%d) = %v, want %v", p, got, want)
		}
	}
}

func TestReadAnswer(t *testing.T) {
	for _, c := range []struct {
		in     string
		status int
		keep   bool
		err    bool
	}{
		{"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n\r\nok\n", 200, true, false},
		{"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 5\r\nConnection: close\r\n\r\nshed\n", 503, false, false},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nok\n\r\n0\r\n\r\n", 0, false, true},
		{"HTTP/1.1 200 OK\r\n\r\n", 0, false, true},
		{"garbage\r\n", 0, false, true},
	} {
		status, keep, err := readAnswer(bufio.NewReader(strings.NewReader(c.in)))
		if status != c.status || keep != c.keep || (err != nil) != c.err {
			t.Errorf("readAnswer(%q) = %d, %v, %v; want %d, %v, error %v", c.in, status, keep, err, c.status, c.keep, c.err)
		}
	}
	if _, _, err := readAnswer(bufio.NewReader(strings.NewReader(""))); !errors.Is(err, errNothingRead) {
		t.Errorf("an empty answer: %v, want errNothingRead", err)
	}
}

func TestLoadGenCountsEveryOutcome(t *testing.T) {
	// A server that serves p100, sheds p10, fails p40 and closes p60's
	// connection after answering.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("X-Priority") {
		case "100":
			_, _ = w.Write([]byte("ok"))
		case "60":
			w.Header().Set("Connection", "close")
			_, _ = w.Write([]byte("ok"))
		case "40":
			http.Error(w, "queue", http.StatusInternalServerError)
		default:
			shedAnswer(w)
		}
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	phases := []phaseSpec{{Name: "x", Seconds: 0.5, Rates: mixRates(1000, 1)}}
	rec := newRecorder(phases, 0.25, 100*time.Millisecond)
	newLoadGen(u.Host, 64, rec).run(newArrivals(1, phases), time.Now())
	for c, cl := range overloadClasses {
		b := sumBins(rec.bins, 0, len(rec.bins), c)
		if b.Offered == 0 || b.OK+b.Shed+b.Failed != b.Offered {
			t.Errorf("p%d: %+v: every offered request must be ok, shed or failed", cl.Priority, b)
		}
		var want *int64
		switch cl.Priority {
		case 100, 60:
			want = &b.OK
		case 40:
			want = &b.Failed
		default:
			want = &b.Shed
		}
		if *want != b.Offered {
			t.Errorf("p%d: %+v, want all %d in one outcome", cl.Priority, b, b.Offered)
		}
	}
}

func TestLoadGenCapHit(t *testing.T) {
	// A server that never answers in time: the cap of 2 connections is
	// reached at once, and the rest count as failed without being sent.
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	phases := []phaseSpec{{Name: "x", Seconds: 0.2, Rates: mixRates(200, 1)}}
	rec := newRecorder(phases, 0.1, 100*time.Millisecond)
	time.AfterFunc(300*time.Millisecond, func() { close(release) })
	newLoadGen(u.Host, 2, rec).run(newArrivals(1, phases), time.Now())
	b := sumBins(rec.bins, 0, len(rec.bins), -1)
	if b.CapHit != b.Offered-2 || b.Failed != b.CapHit || b.OK != 2 {
		t.Errorf("cap 2, a stuck server: %+v; want 2 answered and the rest failed at the cap", b)
	}
}

func TestRunGroups(t *testing.T) {
	sys := []string{sysNone, sysFailsafe, sysLevels, sysGraduated}
	for _, c := range []struct {
		sc   scenarioSpec
		want int
	}{
		{overloadScenarios(fullLengths, 800, 400)[0], 1}, // 3x: 2400/s, 4 at once
		{overloadScenarios(fullLengths, 800, 400)[1], 4}, // 10x: one at a time
		{overloadScenarios(fullLengths, 800, 400)[2], 2}, // the spike: 3456/s, two
		{overloadScenarios(fullLengths, 800, 400)[4], 4}, // CPU-bound: one at a time
	} {
		if got := runGroups(sys, c.sc, 10000); len(got) != c.want {
			t.Errorf("%s: %d groups, want %d", c.sc.Name, len(got), c.want)
		}
	}
	if got := runGroups(sys, overloadScenarios(quickLengths, 800, 400)[1], math.Inf(1)); len(got) != 1 {
		t.Errorf("an unbounded budget: %d groups, want 1", len(got))
	}
	if got := rotate([]string{"a", "b", "c"}, 4); strings.Join(got, "") != "bca" {
		t.Errorf("rotate = %v", got)
	}
}

func TestParseLevelPoint(t *testing.T) {
	start := time.Unix(100, 0)
	ev := sseEvent{Event: "level", At: start.Add(1500 * time.Millisecond).UnixNano(),
		Data: []byte(`{"level":"Major","index":3,"priority_threshold":50,"partial":{"from":30,"fraction":0.25}}`)}
	p, ok := parseLevelPoint(ev, start)
	if !ok || p.At != 1.5 || p.Index != 3 || !p.HasPartial || p.Partial == nil || *p.Partial != (partialAdmission{30, 0.25}) {
		t.Errorf("parseLevelPoint = %+v, %v", p, ok)
	}
	ev.Data = []byte(`{"level":"Major","index":3,"partial":null}`)
	if p, _ := parseLevelPoint(ev, start); !p.HasPartial || p.Partial != nil {
		t.Errorf("partial null: %+v, want HasPartial and no Partial", p)
	}
	ev.Data = []byte(`{"level":"Major","index":3}`)
	if p, _ := parseLevelPoint(ev, start); p.HasPartial {
		t.Errorf("no partial key: %+v, want HasPartial false", p)
	}
	if _, ok := parseLevelPoint(sseEvent{Event: "sample", Data: []byte(`{}`)}, start); ok {
		t.Error("an event: sample read as a level")
	}
}

// TestGateAnswers runs failsafe-go's and aegis' gates for real: idle, they
// admit; the service's answer passes through.
func TestGateAnswers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc := newServiceModel(2, 50*time.Millisecond, func(time.Time) time.Time { return time.Now() })
	for name, g := range map[string]func(http.Handler) http.Handler{
		"failsafe": failsafeGate(ctx, 50*time.Millisecond),
		"aegis":    aegisGate(800),
	} {
		h := withArrival(g(svc))
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/work", nil)
		r.Header.Set("X-Priority", "100")
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Errorf("%s, idle: %d, want 200", name, w.Code)
		}
	}
}

func TestParseFixed(t *testing.T) {
	for in, want := range map[string]fixedAdmission{
		"60":         {Threshold: 60},
		"60,40:0.3":  {Threshold: 60, From: 40, Fraction: 0.3},
		"100,0:1":    {Threshold: 100, Fraction: 1},
		"60,40:0.25": {Threshold: 60, From: 40, Fraction: 0.25},
	} {
		got, err := parseFixed(in)
		if err != nil || got != want {
			t.Errorf("parseFixed(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if back, err := parseFixed(got.String()); err != nil || back != got {
			t.Errorf("parseFixed(%q.String() = %q) = %+v, %v; want it back", in, got.String(), back, err)
		}
	}
	for in, names := range map[string]string{
		"":          `threshold ""`,
		"x":         `threshold "x"`,
		"60,40":     `partial "40"`,
		"60,70:0.3": `from "70"`,
		"60,40:1.5": `fraction "1.5"`,
		"60,40:NaN": `fraction "NaN"`,
	} {
		if _, err := parseFixed(in); err == nil || !strings.Contains(err.Error(), names) {
			t.Errorf("parseFixed(%q) = %v, want an error naming %s", in, err, names)
		}
	}
}

// TestFixedGateAdmitsItsFraction: the fixed gate passes what its
// threshold admits, sheds what is below its partial band, and admits the
// band at its fraction.
func TestFixedGateAdmitsItsFraction(t *testing.T) {
	var served atomic.Int64
	h := fixedGate(fixedAdmission{Threshold: 60, From: 40, Fraction: 0.3})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
	}))
	admitted := func(p string, n int) int {
		start := served.Load()
		for range n {
			before := served.Load()
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodGet, "/work", nil)
			r.Header.Set("X-Priority", p)
			h.ServeHTTP(w, r)
			if ok := served.Load() > before; ok != (w.Code == http.StatusOK) {
				t.Fatalf("priority %s: answered %d, served %v", p, w.Code, ok)
			}
		}
		return int(served.Load() - start)
	}
	if got := admitted("100", 100); got != 100 {
		t.Errorf("priority 100: %d of 100 admitted, want all", got)
	}
	if got := admitted("60", 100); got != 100 {
		t.Errorf("priority 60: %d of 100 admitted, want all", got)
	}
	if got := admitted("10", 100); got != 0 {
		t.Errorf("priority 10: %d of 100 admitted, want none", got)
	}
	// 10,000 draws at 0.3: the standard deviation is 46, so 2,800-3,200
	// is more than four of them either side.
	if got := admitted("40", 10000); got < 2800 || got > 3200 {
		t.Errorf("priority 40: %d of 10000 admitted, want about 3000", got)
	}
}

// TestLevelFollowerReadsAcrossARestart: the stream ends (crash3x kills the
// daemon) and the follower dials again, so the levels the restarted
// daemon publishes are in the run's points too.
func TestLevelFollowerReadsAcrossARestart(t *testing.T) {
	var served atomic.Int32
	levels := []string{"Major", "Moderate", "Major"}
	back := make(chan struct{}) // the follower dialled after the last stream ended
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(served.Add(1)) - 1
		w.Header().Set("Content-Type", "text/event-stream")
		if n >= len(levels) {
			w.(http.Flusher).Flush()
			if n == len(levels) {
				close(back)
			}
			<-r.Context().Done() // the last daemon stays up
			return
		}
		fmt.Fprintf(w, "event: level\ndata: {\"level\":%q,\"index\":%d}\n\n", levels[n], n)
		// returning ends the stream, as a SIGKILL does
	}))
	defer srv.Close()
	f, err := followLevels(t.Context(), srv.URL, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-back:
	case <-time.After(10 * time.Second):
		t.Fatalf("the follower did not dial again within 10s (%d streams served)", served.Load())
	}
	points := f.stop()
	var got []string
	for _, p := range points {
		got = append(got, p.Level)
	}
	if !slices.Equal(got, levels) {
		t.Errorf("followed %v across three streams, want %v", got, levels)
	}
}

func TestClosedLoopRate(t *testing.T) {
	var served atomic.Int64
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Priority") != "100" || r.Header.Get(sentHeader) == "" {
			http.Error(w, "no priority or send time", http.StatusBadRequest)
			return
		}
		served.Add(1)
	}))
	defer ok.Close()
	cr := capacityRun{conns: 2, warm: 10 * time.Millisecond, measure: 100 * time.Millisecond}
	m, err := closedLoopRate(ok.URL, cr)
	if err != nil {
		t.Fatal(err)
	}
	if counted := math.Round(m.Rate * m.Seconds); counted < 1 || counted > float64(served.Load()) || m.Conns != 2 {
		t.Errorf("counted %v answers with %d in flight; the server served %d", counted, m.Conns, served.Load())
	}

	shedding := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "shed", http.StatusServiceUnavailable)
	}))
	defer shedding.Close()
	if _, err := closedLoopRate(shedding.URL, cr); err == nil || !strings.Contains(err.Error(), "answered 503") {
		t.Errorf("a service answering 503: %v, want an error naming the 503", err)
	}
}
