package signals

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/degraded/degraded/levels"
)

// TestPressureReadings: PSI reads as three signals, avg10 as the value and
// avg60 as the recovery value; a missing file fails its signal alone.
func TestPressureReadings(t *testing.T) {
	dir := copyTree(t, "psi-cgroup")
	writeFile(t, dir, "cpu.pressure", "some avg10=45.00 avg60=30.00 avg300=10.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
	removeFile(t, dir, "io.pressure")
	p, err := NewPressure("cgroup", dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[levels.Signal]levels.Reading{}
	for _, r := range p.Read(context.Background(), time.Now()) {
		got[r.Signal] = r
	}
	if c := got[levels.CPUPressure]; c.State != levels.Available || c.Value != 45 || c.Recovery == nil || *c.Recovery != 30 {
		t.Errorf("cpu_pressure %+v, want available 45 with avg60 30", c)
	}
	if m := got[levels.MemoryPressure]; m.State != levels.Available {
		t.Errorf("memory_pressure %+v, want available", m)
	}
	if io := got[levels.IOPressure]; io.State != levels.Failed || io.Err == nil || !strings.Contains(io.Err.Error(), "io.pressure") {
		t.Errorf("io_pressure %+v, want failed naming io.pressure", io)
	}
}

// TestPushedReadings: warming until the first value, available while
// fresh, failed once older than its ttl; a reconfigure keeps the values
// of the signals that stay.
func TestPushedReadings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var p Pushed
		p.Configure([]PushedSignal{{Name: "queue_depth", TTL: time.Minute}, {Name: "backlog", TTL: time.Hour}}, nil)
		state := func(name levels.Signal) levels.Reading {
			for _, r := range p.Read(context.Background(), time.Now()) {
				if r.Signal == name {
					return r
				}
			}
			t.Fatalf("no reading of %s", name)
			return levels.Reading{}
		}
		if r := state("queue_depth"); r.State != levels.Warming {
			t.Fatalf("before any value: %+v, want warming", r)
		}
		if err := p.Set("queue_depth", 1234, time.Now()); err != nil {
			t.Fatal(err)
		}
		if r := state("queue_depth"); r.State != levels.Available || r.Value != 1234 {
			t.Fatalf("fresh: %+v, want available 1234", r)
		}
		time.Sleep(61 * time.Second)
		if r := state("queue_depth"); r.State != levels.Failed || !strings.Contains(r.Err.Error(), "ttl 1m") {
			t.Fatalf("61s after with a 1m ttl: %+v, want failed naming the ttl", r)
		}
		p.Set("queue_depth", 7, time.Now())
		p.Configure([]PushedSignal{{Name: "queue_depth", TTL: time.Minute}}, nil)
		if r := state("queue_depth"); r.Value != 7 {
			t.Fatalf("after a reconfigure that keeps it: %+v, want the value kept", r)
		}
		if err := p.Set("backlog", 1, time.Now()); err == nil || !strings.Contains(err.Error(), "no such custom signal") {
			t.Fatalf("a dropped signal: %v, want ErrUnknownSignal", err)
		}
	})
}

// TestStalePushedErrorIsStable: a stale pushed signal's error is the same
// at every health check until a value arrives (the controller logs a
// failing signal once per change of its error, so an age in the text
// logged a WARN every tick), and names when the last value came.
func TestStalePushedErrorIsStable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var p Pushed
		p.Configure([]PushedSignal{{Name: "queue_depth", TTL: time.Minute}}, nil)
		last := time.Now()
		if err := p.Set("queue_depth", 1, last); err != nil {
			t.Fatal(err)
		}
		var msgs []string
		for range 3 {
			time.Sleep(61 * time.Second)
			r := p.Read(context.Background(), time.Now())[0]
			if r.State != levels.Failed || r.Err == nil {
				t.Fatalf("%v after the last value: %+v, want failed", time.Since(last), r)
			}
			msgs = append(msgs, r.Err.Error())
		}
		if msgs[0] != msgs[1] || msgs[1] != msgs[2] {
			t.Errorf("the stale error changed between health checks:\n%s", strings.Join(msgs, "\n"))
		}
		if want := last.UTC().Format(time.RFC3339Nano); !strings.Contains(msgs[0], want) || !strings.Contains(msgs[0], "ttl 1m") {
			t.Errorf("stale error %q, want it to name the last value's time %s and the ttl", msgs[0], want)
		}
	})
}

// TestQueriesRun: each query is evaluated at once and then on its
// interval; before its first answer it is warming.
func TestQueriesRun(t *testing.T) {
	answers := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(<-answers))
	}))
	defer srv.Close()
	q, err := NewQueries(srv.URL, time.Second, []QuerySpec{{Name: "queue_depth", Query: "max(queue_depth)", Interval: time.Hour}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := q.Read(context.Background(), time.Now()); r[0].State != levels.Warming {
		t.Fatalf("before the first answer: %+v, want warming", r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- q.Run(ctx) }()
	answers <- `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1234"]}]}}`
	deadline := time.Now().Add(10 * time.Second)
	for q.Read(ctx, time.Now())[0].State != levels.Available {
		if time.Now().After(deadline) {
			t.Fatal("the first evaluation never arrived")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r := q.Read(ctx, time.Now())[0]; r.Value != 1234 {
		t.Fatalf("after the first answer: %+v, want 1234", r)
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
}
