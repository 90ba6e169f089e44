package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The client's tests run against daemon, a hand-written fake of the
// documented protocol: the state document (GET /v1/level, long-polled with
// ?wait=D&after=N), the SSE stream (GET /v1/level/stream: "retry: 2000",
// one "event: level" per change, a ": ping" every 15s) and POST
// /v1/outcomes. The module then needs nothing but the standard library;
// internal/roundtrip in the daemon's module runs the client against the
// real daemon.

// fakeLevels is the fake daemon's level table: threshold and disabled
// features of each level, Normal first.
var fakeLevels = []struct {
	name      string
	threshold int
	disabled  []string
}{
	{"Normal", 0, nil},
	{"Minor", 10, []string{"recommendations"}},
	{"Moderate", 30, []string{"recommendations"}},
	{"Major", 50, []string{"recommendations", "search"}},
	{"Severe", 70, []string{"recommendations", "search"}},
}

const (
	fakeHeartbeat = 15 * time.Second // the daemon's default SSE ping period
	fakeMaxWait   = 60 * time.Second // the daemon's default long-poll bound
)

// window sums the outcomes and latency counts the fake daemon accepted,
// forever.
type window struct {
	mu                sync.Mutex
	success, failures int64
	latency           [numLatencyBuckets]int64
}

func (w *window) Record(_ time.Time, s, f int64) {
	w.mu.Lock()
	w.success += s
	w.failures += f
	w.mu.Unlock()
}

func (w *window) Totals(time.Time) (int64, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.success + w.failures, w.failures
}

func (w *window) latencies() [numLatencyBuckets]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latency
}

// daemon is the fake daemon served over an in-memory network (net.Pipe),
// so that tests run inside a synctest bubble in fake time. It can be
// stopped and started again, like a restarted daemon; its state survives.
type daemon struct {
	t    testing.TB
	win  *window
	http *http.Client

	mu      sync.Mutex
	state   State
	changed chan struct{} // closed and replaced on every change
	ln      *pipeListener
	srv     *http.Server
	streams []time.Time // when each stream request arrived
	wrap    func(http.Handler) http.Handler
	// keepsLatency makes the daemon one that publishes the latency signal
	// (signals.status.latency) and accepts "latency_counts"; without it,
	// it refuses them as an unknown field, like a daemon from before the
	// latency signal.
	keepsLatency bool
	// shadow makes the daemon one in shadow mode (State.Shadow), which
	// accepts "would_shed" and adds it to wouldShed; without it, it
	// refuses the field as an unknown one, like a daemon from before
	// shadow mode.
	shadow    bool
	wouldShed map[string]int64
	// noPartial makes the daemon one from before partial admission: its
	// state document lacks the key "partial", and it refuses "admission"
	// as an unknown field.
	noPartial bool
	// noArrival makes the daemon one from before "admission.arrival_seconds":
	// it refuses the field as an unknown one.
	noArrival bool
	// unsampled makes the daemon one that has not run its first health
	// check: its signals have sampled_at and status null. Once it is
	// false, sampled_at is when the daemon started.
	unsampled bool
	// admissions are the "admission" objects accepted, in order, with
	// when each arrived.
	admissions []receivedAdmission
}

// receivedAdmission is an "admission" object the fake daemon accepted.
type receivedAdmission struct {
	admissionReport
	at time.Time
}

func newDaemon(t testing.TB) *daemon {
	t.Helper()
	d := &daemon{t: t, win: &window{}, changed: make(chan struct{})}
	d.state = State{Level: "Normal", Source: SourceAuto, Recommended: "Normal", Reason: "start", Since: time.Now(), DisabledFeatures: []string{}}
	tr := &http.Transport{DialContext: d.dial, MaxIdleConnsPerHost: 100}
	d.http = &http.Client{Transport: tr}
	t.Cleanup(func() {
		d.stop()
		tr.CloseIdleConnections()
	})
	return d
}

// newClient returns a client of this daemon.
func (d *daemon) newClient(opts ...Option) *Client {
	d.t.Helper()
	c, err := New("http://degraded.test", append([]Option{WithHTTPClient(d.http)}, opts...)...)
	if err != nil {
		d.t.Fatal(err)
	}
	return c
}

// override pins level for an hour, one step of the sequence, as PUT
// /v1/override does.
func (d *daemon) override(level string) {
	d.t.Helper()
	for i, l := range fakeLevels {
		if l.name != level {
			continue
		}
		now := time.Now()
		d.mu.Lock()
		defer d.mu.Unlock()
		reason := "test " + level
		d.state = State{
			Level: level, Index: i, PriorityThreshold: l.threshold,
			DisabledFeatures: append([]string{}, l.disabled...),
			Source:           SourceOverride, Recommended: "Normal",
			Reason: "override set: pin " + level + " for 1h0m0s: " + reason, Since: now,
			Sequence: d.state.Sequence + 1,
			Override: &Override{Level: level, Mode: "pin", Reason: reason, SetAt: now, ExpiresAt: now.Add(time.Hour)},
		}
		close(d.changed)
		d.changed = make(chan struct{})
		return
	}
	d.t.Fatalf("the fake daemon has no level %q", level)
}

// current returns the state and a channel closed at its next change.
func (d *daemon) current() (State, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.state
	if !d.unsampled {
		at := d.state.Since
		st.Signals.SampledAt = &at
		st.Signals.Status = map[string]string{}
		if d.keepsLatency {
			st.Signals.Status["latency"] = "off"
		}
	}
	st.Shadow = d.shadow
	return st, d.changed
}

// sequence is the daemon's current sequence number.
func (d *daemon) sequence() uint64 {
	st, _ := d.current()
	return st.Sequence
}

// ServeHTTP answers the routes of the protocol the client speaks.
func (d *daemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/level":
		d.level(w, r)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/level/stream":
		d.stream(w, r)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/outcomes":
		d.outcomes(w, r)
	default:
		writeFakeJSON(w, http.StatusNotFound, map[string]string{"error": "no route " + r.Method + " " + r.URL.Path})
	}
}

// level serves the state document; with ?wait=D&after=N it waits until
// the sequence passes N or D (at most fakeMaxWait) elapses.
func (d *daemon) level(w http.ResponseWriter, r *http.Request) {
	st, changed := d.current()
	if q := r.URL.Query(); q.Has("wait") || q.Has("after") {
		wait, err := time.ParseDuration(q.Get("wait"))
		if err != nil || wait < 0 {
			writeFakeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("wait must be a duration (was %q)", q.Get("wait"))})
			return
		}
		after, err := strconv.ParseUint(q.Get("after"), 10, 64)
		if err != nil {
			writeFakeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("after must be a sequence number (was %q)", q.Get("after"))})
			return
		}
		if wait > 0 && st.Sequence <= after {
			timer := time.NewTimer(min(wait, fakeMaxWait))
			select {
			case <-changed:
			case <-timer.C:
			case <-r.Context().Done():
			}
			timer.Stop()
			st, _ = d.current()
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(d.encode(st))
}

// stream serves the SSE stream: the retry hint and the state, then one
// event per change and a ping every heartbeat.
func (d *daemon) stream(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	d.streams = append(d.streams, time.Now())
	d.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	st, changed := d.current()
	fmt.Fprint(w, "retry: 2000\n\n")
	d.writeEvent(w, st)
	ping := time.NewTicker(fakeHeartbeat)
	defer ping.Stop()
	for {
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			fmt.Fprint(w, ": ping\n\n")
		case <-changed:
			st, changed = d.current()
			d.writeEvent(w, st)
		}
	}
}

// outcomes adds the reported counts to the window. It checks
// "latency_counts" as the daemon does, or refuses it as an unknown field
// unless keepsLatency.
func (d *daemon) outcomes(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Success, Failure int64
		LatencyCounts    []int64          `json:"latency_counts"`
		WouldShed        map[string]int64 `json:"would_shed"`
		Admission        *admissionReport `json:"admission"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Success < 0 || body.Failure < 0 {
		writeFakeJSON(w, http.StatusBadRequest, map[string]string{"error": "body must be {\"success\": N, \"failure\": N}"})
		return
	}
	d.mu.Lock()
	keepsLatency, shadow, noPartial, noArrival := d.keepsLatency, d.shadow, d.noPartial, d.noArrival
	d.mu.Unlock()
	var sum int64
	for _, n := range body.LatencyCounts {
		sum += n
	}
	switch {
	case body.Admission != nil && noPartial:
		writeFakeJSON(w, http.StatusBadRequest, map[string]string{"error": `unknown field "admission"`})
		return
	case body.Admission != nil && noArrival && body.Admission.Arrival != 0:
		writeFakeJSON(w, http.StatusBadRequest, map[string]string{"error": `unknown field "admission.arrival_seconds"`})
		return
	case body.Admission != nil && !validAdmission(body.Admission):
		writeFakeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("bad admission %+v", *body.Admission)})
		return
	case body.WouldShed != nil && !shadow:
		writeFakeJSON(w, http.StatusBadRequest, map[string]string{"error": `unknown field "would_shed"`})
		return
	case body.LatencyCounts != nil && !keepsLatency:
		writeFakeJSON(w, http.StatusBadRequest, map[string]string{"error": `unknown field "latency_counts"`})
		return
	case body.LatencyCounts != nil && (len(body.LatencyCounts) != numLatencyBuckets || sum > body.Success+body.Failure):
		writeFakeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("latency_counts: %d counts summing to %d", len(body.LatencyCounts), sum)})
		return
	}
	d.win.Record(time.Now(), body.Success, body.Failure)
	d.win.mu.Lock()
	for i, n := range body.LatencyCounts {
		d.win.latency[i] += n
	}
	d.win.mu.Unlock()
	d.mu.Lock()
	if body.Admission != nil {
		d.admissions = append(d.admissions, receivedAdmission{*body.Admission, time.Now()})
	}
	for level, n := range body.WouldShed {
		if d.wouldShed == nil {
			d.wouldShed = map[string]int64{}
		}
		d.wouldShed[level] += n
	}
	d.mu.Unlock()
	writeFakeJSON(w, http.StatusAccepted, map[string]int64{"accepted": body.Success + body.Failure})
}

func writeFakeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (d *daemon) writeEvent(w http.ResponseWriter, st State) {
	fmt.Fprintf(w, "id: %d\nevent: level\ndata: %s\n\n", st.Sequence, d.encode(st))
}

func (d *daemon) start() {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := http.Handler(d)
	if d.wrap != nil {
		h = d.wrap(h)
	}
	d.ln = &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	d.srv = &http.Server{Handler: h}
	go d.srv.Serve(d.ln)
}

// stop closes the listener and every connection, as a dying daemon does.
func (d *daemon) stop() {
	d.mu.Lock()
	srv := d.srv
	d.srv, d.ln = nil, nil
	d.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

func (d *daemon) streamTimes() []time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Time(nil), d.streams...)
}

var errRefused = errors.New("connection refused")

func (d *daemon) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	d.mu.Lock()
	ln := d.ln
	d.mu.Unlock()
	if ln == nil {
		return nil, errRefused
	}
	cli, srv := net.Pipe()
	select {
	case ln.conns <- srv:
		return cli, nil
	case <-ln.done:
	case <-ctx.Done():
	}
	cli.Close()
	srv.Close()
	return nil, errRefused
}

type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "degraded.test:80" }

// running starts c.Run and returns a func that stops it and reports Run's
// error.
func running(t testing.TB, c *Client) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func isCanceled(err error) bool { return errors.Is(err, context.Canceled) }

// setShadow switches the daemon's mode, one step of the sequence, as a
// reload does.
func (d *daemon) setShadow(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.shadow = on
	d.state.Sequence++
	close(d.changed)
	d.changed = make(chan struct{})
}

// shedReports returns the would-shed counts the daemon accepted.
func (d *daemon) shedReports() map[string]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.wouldShed)
}
