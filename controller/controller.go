package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/degraded/degraded/levels"
)

// Sampler measures one resource signal as a percentage. An error makes the
// signal unavailable for this health check: levels.ErrWarmingUp reads as
// warming, levels.ErrAbsent as absent, any other error as failed (see
// [levels.ReadingOf]).
type Sampler interface {
	Sample(ctx context.Context, now time.Time) (float64, error)
}

// ErrorRate is the rolling window services report outcomes into.
type ErrorRate interface {
	Totals(now time.Time) (attempts, failures int64)
}

// LatencyWindow is an ErrorRate that also keeps latencies, one count per
// latency bucket (levels.LatencyBounds). When Options.Errors implements
// it, the latency signal is read from it and timeline lines carry the
// counts, so that a replay can compute another quantile.
type LatencyWindow interface {
	LatencyCounts(now time.Time) [levels.NumLatencyBuckets]int64
}

// Source reads signals at a health check: one reading per signal it feeds
// (PSI feeds three; pushed and queried custom signals one each). Instant
// reports whether its values change between health checks (pushed ones):
// an event-driven evaluation reads only those again.
type Source interface {
	Read(ctx context.Context, now time.Time) []levels.Reading
	Instant() bool
}

// Observer is told what the controller does, for metrics. Its methods are
// called from the controller's goroutine, outside any lock, and must not
// block.
type Observer interface {
	// Published is called with every state document the controller
	// publishes.
	Published(s *State)
	// Transition is called on every change of the published level.
	Transition(from, to, source string)
	// HealthCheck is called after each health check with its duration and
	// the names of the signals that failed to sample.
	HealthCheck(d time.Duration, failed []string)
	// SaveFailed is called with whether the last save of the state failed
	// (degraded_state_save_failed).
	SaveFailed(failed bool)
}

// Options configures a Controller. Zero fields take the documented
// defaults, which match config/default.yaml.
type Options struct {
	// Table is the level table; required.
	Table *levels.Table
	// Rules are the level machine's tunables (dwell, escalation,
	// hysteresis, blind hold, jitter, override ttl, min_throughput, mode
	// and admission mode). A zero EscalateAfter means 1 and a zero
	// MaxOverrideTTL 24h.
	Rules levels.Rules
	// HealthCheckInterval is the tick period (default 30s).
	HealthCheckInterval time.Duration
	// Rand draws uniformly from [0, 1) for the recovery jitter (default
	// math/rand/v2's Float64); tests fix it.
	Rand func() float64
	// CPU and Memory sample resources; nil means the signal is off. A
	// sampler that is the same value across a Reconfigure keeps its blind
	// clock; a new one starts warming.
	CPU, Memory Sampler
	// Errors is the error window; nil means the error rate is off. If it
	// is a LatencyWindow, it feeds the latency signal too.
	Errors ErrorRate
	// Sources feed the other signals (pressure, pushed, queried).
	Sources []Source
	// ErrorWindow is the span of Errors: the error rate is warming until
	// Errors has been in use that long (0: never warming).
	ErrorWindow time.Duration
	// Store persists state; nil keeps it in memory only.
	Store Store
	// Observer receives metrics events; nil ignores them.
	Observer Observer
	// Logger logs transitions and failures; nil discards.
	Logger *slog.Logger
	// Recorder receives one timeline line per input of the level machine;
	// nil records nothing. Like Store, Observer and Logger, the one given
	// to New is kept across Reconfigure.
	Recorder Recorder
	// Fleet is fleet mode's identity for the state document; nil when
	// fleet mode is off. Fleet overrides arrive by ApplyFleet.
	Fleet *FleetInfo
	// FleetErrors, when set (error_rate_scope: fleet), makes the error
	// rate the fleet's; nil keeps it local.
	FleetErrors FleetErrorRate
	// Measured names, as text, the config keys that decide what is
	// measured (config.Config.Measured): the timeline's start and reload
	// lines carry them for `degraded replay`.
	Measured map[string]string
}

func (o Options) withDefaults() Options {
	if o.HealthCheckInterval <= 0 {
		o.HealthCheckInterval = 30 * time.Second
	}
	if o.Rules.EscalateAfter < 1 {
		o.Rules.EscalateAfter = 1
	}
	if o.Rules.MaxOverrideTTL <= 0 {
		o.Rules.MaxOverrideTTL = 24 * time.Hour
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// machineConfig is the level machine's configuration in o.
func (o Options) machineConfig() levels.Config { return levels.Config{Table: o.Table, Rules: o.Rules} }

// ErrStopped is returned by a request made after Run has returned.
var ErrStopped = errors.New("controller stopped")

// Controller decides and publishes the degradation level. Create it with
// [New] and start it with [Controller.Run]: one goroutine, Run's, owns the
// level machine; health checks, events, overrides, fleet updates and
// reloads are requests to it, served in order. Every method is safe for
// concurrent use; [Controller.State] is a lock-free atomic load. Requests
// (SetOverride, ClearOverride, ApplyFleet, Reconfigure, Check) wait for Run
// to serve them, and fail with ErrStopped once it has returned.
type Controller struct {
	store    Store
	observer Observer
	recorder Recorder
	log      *slog.Logger

	reqs    chan func()   // requests, run by Run's goroutine
	wake    chan struct{} // a report is pending
	stopped chan struct{} // closed when Run returns

	pendMu  sync.Mutex
	pending []levels.Report // reports not yet evaluated

	mu      sync.Mutex // guards history and samples, which Run writes and readers copy
	history []Transition
	samples []levels.Sample

	state atomic.Pointer[State]
	held  atomic.Bool // changes are held unpublished (publish)
	// failure is why saves of the state fail, nil while they succeed
	// (saved).
	failure  atomic.Pointer[SaveFailure]
	config   atomic.Pointer[levels.Config]
	levelCh  notifier // fires when Sequence changes
	sampleCh notifier // fires after every evaluation

	run run // owned by Run's goroutine (and New, before it)
}

// run is the state the controller's goroutine owns.
type run struct {
	m    levels.Machine
	opts Options
	// capacityAt is the time of the capacity estimate the store last
	// saved (capacityDue).
	capacityAt time.Time
	// seq is the last published sequence, ceiling the highest one the
	// store has reserved (math.MaxUint64 without a store).
	seq, ceiling uint64
	// held are changes not yet published because publishing them would
	// pass the ceiling; heldSteps their sequence steps.
	held      []Transition
	heldSteps int
	dirty     bool // a durable change not yet saved
	unsaved   bool // the last save failed
	// failedSaves counts the saves that failed since the last that did;
	// saveErr and saveLog are the error last logged and when.
	failedSaves int
	saveErr     string
	saveLog     time.Time
	holdLog     time.Time // when holding at the ceiling was last logged
	// overflowSeen is the admission law's count of reporters forgotten for
	// its bound when last logged, overflowLog when (noteOverflow).
	overflowSeen uint64
	overflowLog  time.Time
	errSince     time.Time // when the error window came into use
	failing      map[levels.Signal]string
	lastEvent    time.Time
	timer        *time.Timer // a due event evaluation; nil when none
	ticker       *time.Ticker
}

// New returns a controller resumed from o.Store, if it holds a state. It
// does no sampling and starts no goroutines. With a store, it saves at
// once to reserve the next block of sequence numbers (see [SequenceBlock]).
// It fails if it cannot, unless the disk failed in an incident
// ([DiskFailed]): then it serves the state the file saved, holds every
// change, and saves again at every health check (startHeld).
func New(o Options) (*Controller, error) {
	if o.Table == nil {
		return nil, errors.New("controller: no level table")
	}
	o = o.withDefaults()
	c := &Controller{store: o.Store, observer: o.Observer, recorder: o.Recorder, log: o.Logger,
		reqs: make(chan func()), wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	now := time.Now()
	r := &c.run
	r.opts, r.errSince, r.ceiling, r.failing = o, now, math.MaxUint64, map[levels.Signal]string{}
	r.m = levels.NewMachine(o.machineConfig(), now)
	cfg := o.machineConfig()
	c.config.Store(&cfg)
	var entries []levels.Entry
	var p *Persisted
	if c.store != nil {
		var fromPrev bool
		var err error
		p, fromPrev, err = c.store.Load()
		if err != nil {
			return nil, fmt.Errorf("load state: %w", err)
		}
		if p != nil {
			entries = c.restore(now, p, fromPrev)
		}
		// Nothing new is published before the reservation below is
		// saved (restore put r.seq past what readers may have seen); New
		// says why it holds, not publish.
		r.ceiling, r.holdLog = r.seq, now
	}
	c.publish(now, levels.Output{Entries: entries})
	if c.store != nil {
		if err := c.write(false); err != nil {
			if !DiskFailed(err, p != nil) {
				return nil, fmt.Errorf("reserve sequence numbers: %w: %w", ErrNotSaved, err)
			}
			c.startHeld(p, err)
		} else {
			r.holdLog = time.Time{}
		}
	}
	return c, nil
}

// DiskFailed reports whether err, a failure to write the data dir at
// start, is the disk's in an incident rather than the daemon's setup: no
// room (ENOSPC, EDQUOT), what an incident's logs do to a shared disk; or,
// where a state file was saved before (saved), a disk the kernel
// remounted read-only after I/O errors (EROFS) or failing (EIO). Any other
// failure (a directory the daemon may not write; a read-only or failing
// one it never saved in) is a fault of its setup, and the start fails on
// it, naming it. New holds the start on such a disk; the daemon's checks
// of the data dir before it let the same failures through.
func DiskFailed(err error, saved bool) bool {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return true
	case errors.Is(err, syscall.EROFS), errors.Is(err, syscall.EIO):
		return saved
	}
	return false
}

// startHeld starts on a disk that cannot save the reservation of
// sequence numbers (DiskFailed), rather than exit: a daemon that exits on
// a full disk in an incident is restarted into the same failure until the
// supervisor gives up (the shipped systemd unit stops after five failed
// starts in two minutes), and its clients, stale, admit everything
// (FailOpen). The daemon serves the state its file saved, under the
// sequence saved with it, holds every change, saves again at every health
// check, and publishes what it held at the first save that succeeds. Nothing new can be published before
// then: after an unclean stop, readers may have seen any sequence up to
// the file's ceiling; after a clean one, the file still says clean, and a
// crash now would restart from its sequence again. (A reader that saw a
// later sequence sees this one go back; the Go client follows it with a
// warning. The alternative, no state at all, leaves every client to its
// fail mode.)
func (c *Controller) startHeld(p *Persisted, err error) {
	r := &c.run
	if c.state.Load() == nil && p != nil {
		st := c.build()
		st.Sequence = p.Sequence
		c.state.Store(st)
	}
	st := c.state.Load()
	c.logSaveError(err) // the health checks' retries say it again a minute on, not at once
	c.log.Error("cannot reserve sequence numbers at start: the state file cannot be saved; serving the restored state and holding every change until a save succeeds (retried on every health check)",
		"err", err, "sequence", st.Sequence, "level", st.Level, "ceiling", r.ceiling, "changes_held", r.heldSteps)
}

// State returns the latest published state document. It never blocks.
func (c *Controller) State() *State { return c.state.Load() }

// Held reports whether changes of the state are held unpublished: the
// state file cannot be saved, and publishing them would pass the reserved
// sequence ceiling (or a start could not reserve one). They are published
// at the first save that succeeds. It never blocks.
func (c *Controller) Held() bool { return c.held.Load() }

// SaveFailure is why the state file cannot be saved, while it cannot.
type SaveFailure struct {
	// Error is the last failed save's error, naming the file and the
	// cause (e.g. "no space left on device").
	Error string
	// Since is when the saves began to fail: the first failure since the
	// last save that succeeded.
	Since time.Time
}

// SaveFailure returns why the last save of the state failed, nil when it
// succeeded (or nothing is saved): what the live part of GET /v1/level
// and `degraded status` show, beside Held. It never blocks.
func (c *Controller) SaveFailure() *SaveFailure { return c.failure.Load() }

// LevelChanged returns a channel closed at the next change of the state
// document (the next Sequence). Take the channel, then read State.
func (c *Controller) LevelChanged() <-chan struct{} { return c.levelCh.wait() }

// Sampled returns a channel closed after the next evaluation.
func (c *Controller) Sampled() <-chan struct{} { return c.sampleCh.wait() }

// Ready reports whether the first health check has run.
func (c *Controller) Ready() bool { return c.State().ready }

// History returns up to limit transitions, newest first.
func (c *Controller) History(limit int) []Transition {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(max(limit, 0), len(c.history))
	out := make([]Transition, 0, n)
	for i := len(c.history) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, c.history[i])
	}
	return out
}

// Samples returns the signals of recent health checks, oldest first: at
// most SamplesLimit, covering about SamplesSpan. The samples are shared
// and must not be modified.
func (c *Controller) Samples() []levels.Sample {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]levels.Sample(nil), c.samples...)
}

// Table returns the level table in force.
func (c *Controller) Table() *levels.Table { return c.config.Load().Table }

// FleetOverride returns the fleet override in force, or nil.
func (c *Controller) FleetOverride() *FleetOverride {
	if o := c.State().fleetOvr; o != nil {
		cp := *o
		return &cp
	}
	return nil
}

// CheckOverride validates r as SetOverride does (the fleet override takes
// the same body), and returns it with the level spelled as the table
// spells it. Errors wrap ErrInvalidOverride.
func (c *Controller) CheckOverride(r OverrideRequest) (OverrideRequest, error) {
	return c.config.Load().CheckOverride(r)
}

// Run owns the level machine until ctx ends: it runs a health check at
// once, then one every HealthCheckInterval, evaluates reports as they
// arrive (at most four evaluations a second, except one that escalates),
// and serves the requests. It then saves the state one last time, marked
// as a clean shutdown, and returns ctx.Err(), or an error wrapping
// ErrNotSaved if that save failed.
func (c *Controller) Run(ctx context.Context) error {
	defer close(c.stopped)
	r := &c.run
	c.tick(ctx, levels.TriggerStart)
	r.ticker = time.NewTicker(r.opts.HealthCheckInterval)
	defer r.ticker.Stop()
	for {
		var due <-chan time.Time
		if r.timer != nil {
			due = r.timer.C
		}
		select {
		case <-ctx.Done():
			if r.timer != nil {
				r.timer.Stop()
			}
			if err := c.save(true); err != nil {
				return fmt.Errorf("final save: %w", err)
			}
			return ctx.Err()
		case f := <-c.reqs:
			f()
		case <-r.ticker.C:
			c.tick(ctx, levels.TriggerTick)
		case <-c.wake:
			c.reported(ctx)
		case <-due:
			r.timer = nil
			c.event(ctx)
		}
	}
}

// do runs f on Run's goroutine and waits for it; ErrStopped once Run has
// returned.
func (c *Controller) do(f func()) error {
	done := make(chan struct{})
	select {
	case c.reqs <- func() { f(); close(done) }:
	case <-c.stopped:
		return ErrStopped
	}
	<-done
	return nil
}

// Check asks for a health check now and waits for it: sample, evaluate,
// publish. Run makes one on every tick; tools and tests may ask for more.
func (c *Controller) Check(ctx context.Context) {
	_ = c.do(func() { c.tick(ctx, levels.TriggerTick) }) // after Run: nothing to check
}

// draw is a recovery draw r for the machine: uniform in [0,
// recovery_jitter).
func (c *Controller) draw() float64 {
	j := c.run.opts.Rules.RecoveryJitter
	if j <= 0 {
		return 0
	}
	return j * c.run.opts.Rand()
}
