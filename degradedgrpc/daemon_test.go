package degradedgrpc

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/degraded/degraded/client"
)

// daemon is a hand-written fake of the daemon's documented protocol, as
// much as a client needs: GET /v1/level (the state document, which the
// client long-polls since there is no stream here) and POST /v1/outcomes,
// whose counts it sums. The daemon's module runs the client against the
// real daemon; this module only needs a client at a known level.
type daemon struct {
	srv   *httptest.Server
	state client.State

	mu                 sync.Mutex
	success, failure   int64
	latency            int64 // observations in latency_counts
	wouldShed          map[string]int64
	admitted, shedSome int64 // from "admission"
}

// level is the state of the default table's level name.
func level(name string) client.State {
	thresholds := map[string]int{"Normal": 0, "Minor": 10, "Moderate": 30, "Major": 50, "Severe": 70, "Emergency": 100}
	index := map[string]int{"Normal": 0, "Minor": 1, "Moderate": 2, "Major": 3, "Severe": 4, "Emergency": 5}
	recovery := time.Now().Add(90 * time.Second)
	st := client.State{Level: name, Index: index[name], PriorityThreshold: thresholds[name], Source: client.SourceOverride,
		Since: time.Now(), Sequence: 7, DisabledFeatures: []string{}}
	if name != "Normal" {
		st.EarliestRecoveryAt = &recovery
	}
	st.Signals.Status = map[string]string{"latency": "off"} // a daemon that keeps latency counts
	return st
}

// startDaemon serves st and returns a client following it. Stop the
// client with the returned func before reading the counts: Run flushes
// once more as it returns.
func startDaemon(t *testing.T, st client.State) (*daemon, *client.Client, func()) {
	t.Helper()
	d := &daemon{state: st}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/level", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("wait") {
			select { // nothing changes: hold the long-poll until the client goes
			case <-r.Context().Done():
				return
			case <-time.After(time.Minute):
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(d.state)
	})
	mux.HandleFunc("POST /v1/outcomes", func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			Success, Failure int64
			LatencyCounts    []int64          `json:"latency_counts"`
			WouldShed        map[string]int64 `json:"would_shed"`
			Admission        *struct {
				Admitted    int64 `json:"admitted"`
				ShedPartial int64 `json:"shed_partial"`
				ShedBelow   int64 `json:"shed_below"`
			} `json:"admission"`
		}
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		d.mu.Lock()
		d.success += b.Success
		d.failure += b.Failure
		for _, n := range b.LatencyCounts {
			d.latency += n
		}
		for l, n := range b.WouldShed {
			if d.wouldShed == nil {
				d.wouldShed = map[string]int64{}
			}
			d.wouldShed[l] += n
		}
		if a := b.Admission; a != nil {
			d.admitted += a.Admitted
			d.shedSome += a.ShedPartial + a.ShedBelow
		}
		d.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	})
	d.srv = httptest.NewServer(mux)
	t.Cleanup(d.srv.Close)

	c, err := client.New(d.srv.URL, client.WithReportInterval(time.Hour), client.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	arrived := make(chan struct{})
	var once sync.Once
	cancelWatch := c.OnChange(func(_, _ client.State) { once.Do(func() { close(arrived) }) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	stop := sync.OnceFunc(func() {
		cancel()
		<-done
	})
	t.Cleanup(stop)
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the client got no state from the fake daemon")
	}
	cancelWatch()
	return d, c, stop
}

// counts returns what the daemon was sent: outcomes, latency
// observations, and the admission report's admitted and shed.
func (d *daemon) counts() (success, failure, latency, admitted, shed int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.success, d.failure, d.latency, d.admitted, d.shedSome
}
