package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// reactionConfig is the daemon's configuration for DESIGN.md's reaction
// method: `error_rate_window: 10s` and the defaults otherwise (the 30s
// health check, host CPU and memory, the default data_dir, so every
// override is saved before it is answered); warn-level logs only, since
// logging is not a measurement setting.
const reactionConfig = "error_rate_window: 10s\nlog: {level: warn}\n"

// Each trial's requests. The reset is a Normal pin and its DELETE; the
// report's 100 failures lift the window's error rate over at least Minor's
// 1% (how far over depends on the successes still in the window).
const (
	resetBody   = `{"level":"Normal","mode":"pin","ttl":"1m","reason":"bench reset"}`
	failureBody = `{"success":0,"failure":100}`
	// warmBody keeps the window's throughput up while it warms: its one
	// failure (0.5%, below Minor's 1%) makes the daemon evaluate the
	// window at once, so GET /v1/level shows the signal's state.
	warmBody = `{"success":200,"failure":1}`
)

// reactionTimeout bounds the wait for each trial's events.
const reactionTimeout = 2 * time.Second

// Before a trial's clock starts, the daemon must be idle: the reset's
// fan-out is over when every subscriber holds it, but on 2 cores the
// subscribers reading 10,000 events starve the daemon's writer threads,
// which then finish their round milliseconds after the last subscriber
// has read, holding the cores a report needs. The trial waits until no
// thread of the daemon is running or runnable in two reads quietPoll
// apart, at most quietWithin; a trial that starts without it is counted.
const (
	quietPoll   = 500 * time.Microsecond
	quietWithin = 250 * time.Millisecond
)

// reactionSeries is one series of trials at one number of subscribers.
type reactionSeries struct {
	Others int       // SSE subscribers connected beside the measuring one
	Trials []float64 // ms: the POST's first byte -> the measuring subscriber's `event: level` read
	// Arrivals are ms from the POST's first byte to the kernel's receive
	// time of that event on the measuring subscriber's socket: Trials
	// without the reader's own wait for a core. Empty without receive
	// timestamps.
	Arrivals []float64
	Levels   []string // the level each trial's event published
	// OthersMs is, per trial, ms from the POST's first byte to the first,
	// the median and the last of the Others holding the event (Others > 0).
	OthersMs []changeStats
	Discards int // trials redone because a health check escalated before the POST
	// Busy counts the trials whose clock started with a thread of the
	// daemon still running or runnable after quietWithin.
	Busy int
}

// reactionResult is what `degbench reaction` writes.
type reactionResult struct {
	Config    string  // the daemon's configuration file, but listen and data_dir
	WarmS     float64 // seconds from the daemon ready to error_rate available
	Series    []reactionSeries
	Subscribe string // the stream every subscriber reads
}

// levelEvent is what the measuring subscriber keeps of an `event: level`.
type levelEvent struct {
	id    uint64 // the state's sequence
	index int    // the level's index: 0 is Normal
	name  string
	since int64 // Unix ns: when the daemon decided the published level
	at    int64 // now() when the event had been read
	// arrived is when its bytes reached the socket (kernel receive
	// time); 0 if unknown.
	arrived int64
}

// reactionCmd times DESIGN.md's reaction method against one daemon: a
// series with only the measuring subscriber, then one with -subscribers
// more connected after it.
func reactionCmd(args []string) error {
	fs := flag.NewFlagSet("reaction", flag.ExitOnError)
	binary := fs.String("binary", "./degraded", "degraded binary")
	trials := fs.Int("trials", 200, "measured trials per series")
	others := fs.Int("subscribers", 10000, "SSE subscribers beside the measuring one in the second series (0: only the first series)")
	out := fs.String("out", "reaction.json", "result file")
	_ = fs.Parse(args)
	if *trials < 1 {
		return fmt.Errorf("-trials %d: want at least 1", *trials)
	}
	if *others < 0 {
		return fmt.Errorf("-subscribers %d: want 0 or more", *others)
	}

	d, err := startDaemon(*binary, reactionConfig)
	if err != nil {
		return err
	}
	defer d.stop()
	res := reactionResult{Config: reactionConfig, Subscribe: "/v1/level/stream"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The measuring subscriber connects first, before any other.
	s, err := dialSSE(ctx, d.url+res.Subscribe)
	if err != nil {
		return err
	}
	defer s.Close()
	events := make(chan levelEvent, 1024)
	go func() {
		defer close(events)
		_ = s.follow(func(ev sseEvent) {
			if l, ok := parseLevelEvent(ev); ok {
				events <- l
			}
		})
	}()

	hc := &http.Client{Timeout: 10 * time.Second}
	start := time.Now()
	if err := warmWindow(d, hc, 40*time.Second); err != nil {
		return err
	}
	res.WarmS = time.Since(start).Seconds()
	fmt.Fprintf(os.Stderr, "reaction: error_rate available %.1fs after the daemon was ready\n", res.WarmS)

	run := reactionRun{host: strings.TrimPrefix(d.url, "http://"), events: events, proc: fmt.Sprintf("/proc/%d", d.cmd.Process.Pid)}
	one, err := run.series(*trials, 0, nil)
	if err != nil {
		return err
	}
	res.Series = append(res.Series, one)
	if *others > 0 {
		start := time.Now()
		subs, err := startSubscribers("sse", d.url+res.Subscribe, *others)
		if err != nil {
			return err
		}
		defer subs.stop()
		fmt.Fprintf(os.Stderr, "reaction: %d more SSE subscribers connected in %.1fs\n", *others, time.Since(start).Seconds())
		many, err := run.series(*trials, *others, subs)
		if err != nil {
			return err
		}
		res.Series = append(res.Series, many)
	}
	return writeJSON(*out, res)
}

// parseLevelEvent reads an `event: level`; other events are not.
func parseLevelEvent(ev sseEvent) (levelEvent, bool) {
	if ev.Event != "level" {
		return levelEvent{}, false
	}
	var st struct {
		Level string
		Index int
		Since time.Time
	}
	if json.Unmarshal(ev.Data, &st) != nil {
		return levelEvent{}, false
	}
	return levelEvent{id: ev.ID, index: st.Index, name: st.Level, since: st.Since.UnixNano(), at: ev.At, arrived: ev.Arrived}, true
}

// warmWindow reports outcomes until the daemon's error_rate signal is
// available: the window has covered one error_rate_window since the start
// and holds min_throughput outcomes (DESIGN.md "signals.status").
func warmWindow(d *daemon, hc *http.Client, within time.Duration) error {
	deadline := time.Now().Add(within)
	state := ""
	for ; time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if _, err := d.post(hc, "/v1/outcomes", warmBody); err != nil {
			return err
		}
		b, err := do(hc, mustRequest(http.MethodGet, d.url+"/v1/level"))
		if err != nil {
			return err
		}
		var st struct {
			Signals struct{ Status map[string]string }
		}
		if err := json.Unmarshal(b, &st); err != nil {
			return fmt.Errorf("GET /v1/level: %w", err)
		}
		if state = st.Signals.Status["error_rate"]; state == "available" {
			return nil
		}
	}
	return fmt.Errorf("error_rate still %q after %v of reports", state, within)
}

// reactionRun is the measuring side of one daemon: the address reports go
// to and the measuring subscriber's level events.
type reactionRun struct {
	host   string
	events <-chan levelEvent
	proc   string // the daemon's /proc directory
}

// trialOutcome is one trial: its reaction, or that it was spoiled.
type trialOutcome struct {
	ms        float64
	arrivedMs float64 // -1: no receive timestamp
	others    changeStats
	level     string
	discarded bool
	busy      bool // the daemon was not idle when the clock started
}

// series runs trials until n were measured, redoing each one a health
// check spoiled. subs holds the others subscribers (nil: none).
func (x reactionRun) series(n, others int, subs *subscriberProcess) (reactionSeries, error) {
	s := reactionSeries{Others: others}
	for len(s.Trials) < n {
		o, err := x.trial(len(s.Trials)+1, subs)
		if err != nil {
			return s, fmt.Errorf("%d subscribers: %w", others+1, err)
		}
		if o.discarded {
			if s.Discards++; s.Discards > n {
				return s, fmt.Errorf("%d subscribers: %d trials discarded, more than the %d asked for", others+1, s.Discards, n)
			}
			continue
		}
		s.Trials, s.Levels = append(s.Trials, o.ms), append(s.Levels, o.level)
		if o.busy {
			s.Busy++
		}
		if o.arrivedMs >= 0 {
			s.Arrivals = append(s.Arrivals, o.arrivedMs)
		}
		if subs != nil {
			s.OthersMs = append(s.OthersMs, o.others)
		}
	}
	fmt.Fprintf(os.Stderr, "reaction: %s: %d trials (%d discarded, %d started with the daemon busy), to the measuring subscriber p50/p90/p99/max %.2f/%.2f/%.2f/%.2f ms",
		s.who(), len(s.Trials), s.Discards, s.Busy, quantile(s.Trials, .5), quantile(s.Trials, .9), quantile(s.Trials, .99), quantile(s.Trials, 1))
	if len(s.Arrivals) > 0 {
		fmt.Fprintf(os.Stderr, " (read); arrived at its socket p50/p90/p99/max %.2f/%.2f/%.2f/%.2f ms",
			quantile(s.Arrivals, .5), quantile(s.Arrivals, .9), quantile(s.Arrivals, .99), quantile(s.Arrivals, 1))
	}
	if subs != nil {
		fmt.Fprintf(os.Stderr, "; to the first of the %d others p50 %.2f ms, to the last p50/p99 %.2f/%.2f ms",
			others, quantile(firstMs(s.OthersMs), .5), quantile(lastMs(s.OthersMs), .5), quantile(lastMs(s.OthersMs), .99))
	}
	fmt.Fprintln(os.Stderr)
	return s, nil
}

// trial runs trial number n on a connection of its own.
func (x reactionRun) trial(n int, subs *subscriberProcess) (trialOutcome, error) {
	c, err := dialRaw(x.host)
	if err != nil {
		return trialOutcome{}, fmt.Errorf("trial %d: %w", n, err)
	}
	defer c.Close()
	o, err := x.measure(c, subs)
	if err != nil {
		return o, fmt.Errorf("trial %d: %w", n, err)
	}
	return o, nil
}

// measure resets the level to Normal with a pin and its DELETE, then
// times the failing report from the first byte of its POST to the
// measuring subscriber's `event: level` above Normal. A trial whose level
// was decided before the POST (a health check escalated on the window's
// earlier failures between the reset and the report) is discarded.
func (x reactionRun) measure(c *rawConn, subs *subscriberProcess) (trialOutcome, error) {
	pin, err := c.do(http.MethodPut, "/v1/override", resetBody, http.StatusOK)
	if err != nil {
		return trialOutcome{}, err
	}
	p, err := stateSequence(pin)
	if err != nil {
		return trialOutcome{}, err
	}
	// Every subscriber holds the reset before the report, so that no
	// fan-out of the reset is still under way when the clock starts.
	if subs != nil {
		if err := subs.expect(p + 1); err != nil {
			return trialOutcome{}, err
		}
	}
	del, err := c.do(http.MethodDelete, "/v1/override", "", http.StatusOK)
	if err != nil {
		return trialOutcome{}, err
	}
	seq, err := stateSequence(del)
	if err != nil {
		return trialOutcome{}, err
	}
	var missed error
	if subs != nil {
		_, missed = subs.result(p+1, now())
	}
	if seq != p+1 {
		return trialOutcome{discarded: true}, nil // something else changed the state
	}
	reset, err := awaitState(x.events, seq, reactionTimeout)
	if err != nil {
		return trialOutcome{}, err
	}
	// A health check that escalated right after the reset spoils the
	// trial; the stream may then carry only the newer state, so the
	// others never see the reset's.
	if reset.index != 0 || reset.id != seq {
		return trialOutcome{discarded: true}, nil
	}
	if missed != nil {
		return trialOutcome{}, fmt.Errorf("the reset: %w", missed)
	}
	if subs != nil {
		if err := subs.expect(seq + 1); err != nil {
			return trialOutcome{}, err
		}
	}
	quiet, err := awaitQuiet(x.proc, quietWithin)
	if err != nil {
		return trialOutcome{}, err
	}
	report := c.request(http.MethodPost, "/v1/outcomes", failureBody)
	t0 := now()
	if err := c.send(report); err != nil {
		return trialOutcome{}, fmt.Errorf("POST /v1/outcomes: %w", err)
	}
	if _, err := c.answer("POST /v1/outcomes", http.StatusAccepted); err != nil {
		return trialOutcome{}, err
	}
	ev, err := awaitEscalation(x.events, seq, reactionTimeout)
	if err != nil {
		return trialOutcome{}, err
	}
	o := trialOutcome{ms: float64(ev.at-t0) / 1e6, arrivedMs: -1, level: ev.name, discarded: ev.since < t0, busy: !quiet}
	if ev.arrived != 0 {
		o.arrivedMs = float64(ev.arrived-t0) / 1e6
	}
	if subs != nil {
		cs, err := subs.result(seq+1, t0)
		if o.discarded {
			return o, nil
		}
		if err != nil {
			return o, err
		}
		o.others = cs
	}
	if !o.discarded && ev.id != seq+1 {
		return o, fmt.Errorf("the report's event has sequence %d, want %d (the reset's %d + 1)", ev.id, seq+1, seq)
	}
	return o, nil
}

func firstMs(cs []changeStats) []float64 {
	v := make([]float64, len(cs))
	for i, c := range cs {
		v[i] = c.FirstMs
	}
	return v
}

// awaitState returns the first level event with a sequence of at least seq.
func awaitState(events <-chan levelEvent, seq uint64, within time.Duration) (levelEvent, error) {
	return awaitEvent(events, within, func(ev levelEvent) bool { return ev.id >= seq },
		fmt.Sprintf("with sequence %d or later within %v of the reset", seq, within))
}

// awaitEscalation returns the first level event after sequence seq whose
// level is above Normal.
func awaitEscalation(events <-chan levelEvent, seq uint64, within time.Duration) (levelEvent, error) {
	return awaitEvent(events, within, func(ev levelEvent) bool { return ev.id > seq && ev.index > 0 },
		fmt.Sprintf("above Normal within %v of the report", within))
}

// awaitEvent returns the first level event that matches; missing says,
// in the error, which event did not come in time.
func awaitEvent(events <-chan levelEvent, within time.Duration, match func(levelEvent) bool, missing string) (levelEvent, error) {
	timeout := time.After(within)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return levelEvent{}, errors.New("the measuring subscriber's stream ended")
			}
			if match(ev) {
				return ev, nil
			}
		case <-timeout:
			return levelEvent{}, errors.New("no event: level " + missing)
		}
	}
}

// stateSequence reads the sequence of a state document.
func stateSequence(b []byte) (uint64, error) {
	var st struct{ Sequence *uint64 }
	if err := json.Unmarshal(b, &st); err != nil || st.Sequence == nil {
		return 0, fmt.Errorf("no sequence in the state document %.100q", b)
	}
	return *st.Sequence, nil
}

// awaitQuiet waits until no thread of the process whose /proc directory
// is proc is running or runnable in two reads quietPoll apart, at most
// within, and reports whether it was so.
func awaitQuiet(proc string, within time.Duration) (bool, error) {
	deadline := time.Now().Add(within)
	for calm := 0; ; time.Sleep(quietPoll) {
		n, err := runnable(proc)
		if err != nil {
			return false, err
		}
		if n > 0 {
			calm = 0
		} else if calm++; calm == 2 {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
	}
}

// runnable counts the threads of the process whose /proc directory is
// proc that are running or runnable (state R in task/TID/stat). A thread
// that exits while it is read is not counted.
func runnable(proc string) (int, error) {
	tasks, err := os.ReadDir(filepath.Join(proc, "task"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(proc, "task", t.Name(), "stat"))
		if err != nil {
			continue
		}
		if f := statFields(b); len(f) > 0 && f[0] == "R" {
			n++
		}
	}
	return n, nil
}
