package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/degraded/degraded/levels"
)

// Sampler measures one resource signal as a percentage. An error makes the
// signal unavailable for this health check.
type Sampler interface {
	Sample(ctx context.Context, now time.Time) (float64, error)
}

// ErrorRate is the rolling window services report outcomes into.
type ErrorRate interface {
	Totals(now time.Time) (attempts, failures int64)
}

// Observer is told what the controller does, for metrics. Its methods are
// called outside the controller's lock and must not block.
type Observer interface {
	// Published is called with every state document the controller
	// publishes: after each health check and each override change.
	Published(s *State)
	// Transition is called on every change of the published level.
	Transition(from, to, source string)
	// HealthCheck is called after each health check with its duration and
	// the names of the signals that failed to sample.
	HealthCheck(d time.Duration, failed []string)
}

// Options configures a Controller. Zero fields take the documented
// defaults, which match config/default.yaml.
type Options struct {
	// Table is the level table; required.
	Table *levels.Table
	// HealthCheckInterval is the tick period (default 30s).
	HealthCheckInterval time.Duration
	// MinimumLevelDuration is the dwell before each recovery step (0: none).
	MinimumLevelDuration time.Duration
	// EscalationDelay is how long the current level must have been held
	// before escalating (0: escalate at once).
	EscalationDelay time.Duration
	// EscalateAfter is the number of consecutive ticks that must ask for a
	// higher level (default 1).
	EscalateAfter int
	// MinThroughput is the number of attempts below which the error rate is
	// unavailable (0: any attempt counts).
	MinThroughput int64
	// Hysteresis scales thresholds by (1 - Hysteresis) for recovery.
	Hysteresis float64
	// ManualOnly turns automatic transitions off: signals are still sampled
	// and the recommendation published, but only overrides change the level
	// (config enable_auto_adjustment: false).
	ManualOnly bool
	// MaxOverrideTTL bounds an override's ttl (default 24h).
	MaxOverrideTTL time.Duration
	// CPU and Memory sample resources; nil means the signal is off.
	CPU, Memory Sampler
	// Errors is the error window; nil means the error rate is off.
	Errors ErrorRate
	// Store persists state; nil keeps it in memory only.
	Store Store
	// Observer receives metrics events; nil ignores them.
	Observer Observer
	// Logger logs transitions and failures; nil discards.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.HealthCheckInterval <= 0 {
		o.HealthCheckInterval = 30 * time.Second
	}
	if o.EscalateAfter < 1 {
		o.EscalateAfter = 1
	}
	if o.MaxOverrideTTL <= 0 {
		o.MaxOverrideTTL = 24 * time.Hour
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Controller decides and publishes the degradation level. Create it with
// [New], start it with [Controller.Run]. All methods are safe for concurrent
// use; [Controller.State] is a lock-free atomic load.
type Controller struct {
	saveMu sync.Mutex // serialises Store.Save; taken before mu, never inside it

	mu          sync.Mutex // guards everything below
	opts        Options
	pub         int       // published level index
	since       time.Time // when pub last changed: the dwell clock
	reason      string
	auto        int // automatic level, computed even under an override
	autoSince   time.Time
	ovr         *Override
	ovrIndex    int
	ovrEnds     time.Time // ExpiresAt with the monotonic reading, while this process runs
	seq         uint64
	history     []Transition // oldest first, at most HistoryLimit
	pending     int          // consecutive ticks asking for more than auto
	pendingMin  int
	recommended int
	signals     Signals
	samples     []Signals // ring of recent health checks, oldest first
	ready       bool

	state    atomic.Pointer[State]
	levelCh  notifier // fires when Sequence changes
	sampleCh notifier // fires after every health check
	reload   chan struct{}
	unsaved  atomic.Bool // the last save failed: retry on each tick

	// Fixed at New; Reconfigure keeps them.
	store    Store
	observer Observer
	log      *slog.Logger
}

// New returns a controller resumed from o.Store, if it holds a state. It
// does no sampling and starts no goroutines.
func New(o Options) (*Controller, error) {
	if o.Table == nil {
		return nil, errors.New("controller: no level table")
	}
	o = o.withDefaults()
	c := &Controller{opts: o, reload: make(chan struct{}, 1), store: o.Store, observer: o.Observer, log: o.Logger}
	now := time.Now()
	c.since, c.autoSince = now, now
	c.reason = "started"
	if c.store != nil {
		p, err := c.store.Load()
		if err != nil {
			return nil, fmt.Errorf("load state: %w", err)
		}
		if p != nil {
			c.restore(p)
		}
	}
	c.state.Store(c.build())
	return c, nil
}

// restore adopts a saved state, mapping levels by name onto the current
// table and clamping what no longer exists to the most severe level.
func (c *Controller) restore(p *Persisted) {
	t := c.opts.Table
	c.pub = lookup(t, p.Level, p.Index)
	c.auto = lookup(t, p.Auto, p.AutoIndex)
	c.since, c.autoSince = p.Since, p.AutoSince
	c.reason = p.Reason
	c.seq = p.Sequence
	c.history = append([]Transition(nil), p.History...)
	if len(c.history) > HistoryLimit {
		c.history = c.history[len(c.history)-HistoryLimit:]
	}
	if p.Override != nil {
		o := *p.Override
		c.ovr = &o
		c.ovrIndex = lookup(t, o.Level, t.Len()-1)
		c.ovrEnds = o.ExpiresAt
		c.ovr.Level = t.Level(c.ovrIndex).Name
	}
}

// lookup returns the index of name, or fallback clamped to the table.
func lookup(t *levels.Table, name string, fallback int) int {
	if i, err := t.Index(name); err == nil {
		return i
	}
	return t.Clamp(fallback)
}

// State returns the latest published state document. It never blocks.
func (c *Controller) State() *State { return c.state.Load() }

// LevelChanged returns a channel closed at the next change of the level or
// the override (the next Sequence). Take the channel, then read State.
func (c *Controller) LevelChanged() <-chan struct{} { return c.levelCh.wait() }

// Sampled returns a channel closed after the next health check.
func (c *Controller) Sampled() <-chan struct{} { return c.sampleCh.wait() }

// Ready reports whether the first health check has run.
func (c *Controller) Ready() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

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
// most SamplesLimit, covering about SamplesSpan.
func (c *Controller) Samples() []Signals {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Signals(nil), c.samples...)
}

// Table returns the level table in force.
func (c *Controller) Table() *levels.Table {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opts.Table
}

// Run performs a health check at once, then one every
// HealthCheckInterval, until ctx ends. It saves the state before
// returning ctx.Err().
func (c *Controller) Run(ctx context.Context) error {
	c.Check(ctx)
	t := time.NewTicker(c.interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = c.save() // save logs its own failure
			return ctx.Err()
		case <-c.reload:
			t.Reset(c.interval())
		case <-t.C:
			c.Check(ctx)
		}
	}
}

func (c *Controller) interval() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opts.HealthCheckInterval
}

// Check runs one health check now: sample, evaluate, publish. Run calls it
// on every tick; tests and tools may call it directly.
func (c *Controller) Check(ctx context.Context) {
	start := time.Now()
	c.mu.Lock()
	cpu, memory, errs := c.opts.CPU, c.opts.Memory, c.opts.Errors
	minThroughput := c.opts.MinThroughput
	c.mu.Unlock()

	var failed []string
	sample := levels.Sample{SampledAt: start.UTC()}
	for _, sig := range []struct {
		name string
		s    Sampler
		dst  **float64
	}{{"cpu", cpu, &sample.CPUPercent}, {"memory", memory, &sample.MemoryPercent}} {
		v, ok := c.sampleOne(ctx, sig.name, sig.s, start)
		if !ok {
			failed = append(failed, sig.name)
		}
		*sig.dst = v
	}
	if errs != nil {
		a, f := errs.Totals(start)
		sample.WindowAttempts, sample.WindowFailures = a, f
		if a > 0 && a >= minThroughput {
			rate := float64(f) / float64(a) * 100
			sample.ErrorRatePercent = &rate
		}
	}

	c.mu.Lock()
	before := c.seq
	moves := c.evaluate(start, sample)
	st := c.publishLocked()
	c.mu.Unlock()

	if err := c.announce(moves, st, before != st.Sequence); err == nil && c.unsaved.Load() {
		_ = c.save() // retry a save that failed earlier; save logs
	}
	c.sampleCh.broadcast()
	if c.observer != nil {
		c.observer.HealthCheck(time.Since(start), failed)
	}
}

// sampleOne returns the signal's value, or nil when it is off, warming up
// or failed; ok is false only for a failure, which it logs.
func (c *Controller) sampleOne(ctx context.Context, name string, s Sampler, now time.Time) (v *float64, ok bool) {
	if s == nil {
		return nil, true
	}
	x, err := s.Sample(ctx, now)
	switch {
	case errors.Is(err, levels.ErrWarmingUp):
		return nil, true
	case err != nil:
		c.log.Warn("sample failed", "signal", name, "err", err)
		return nil, false
	}
	return &x, true
}

// publishLocked stores a fresh state document and returns it.
func (c *Controller) publishLocked() *State {
	st := c.build()
	c.state.Store(st)
	return st
}

// ErrNotSaved is wrapped by the error of a change that is in force but
// could not be written to the state file, so a restart would lose it.
var ErrNotSaved = errors.New("change in force but not saved")

// announce notifies observers and subscribers and saves the state after a
// change, outside the lock. It returns the save's error.
func (c *Controller) announce(moves []Transition, st *State, changed bool) error {
	if c.observer != nil {
		c.observer.Published(st)
	}
	for _, m := range moves {
		if m.From != m.To {
			c.log.Info("level changed", "from", m.From, "to", m.To, "source", m.Source, "reason", m.Reason, "sequence", m.Sequence)
			if c.observer != nil {
				c.observer.Transition(m.From, m.To, m.Source)
			}
		} else {
			c.log.Info("override changed", "level", m.To, "reason", m.Reason, "sequence", m.Sequence)
		}
	}
	var err error
	if changed {
		err = c.save()
		c.levelCh.broadcast()
	}
	return err
}

// save writes the latest state to the store. Saves are serialised and each
// writes the state as it is when the save starts, so the file never goes
// back in time.
//
// A failed save is logged and retried on every health check until one
// succeeds; the state in memory stays in force meanwhile.
func (c *Controller) save() error {
	if c.store == nil {
		return nil
	}
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	c.mu.Lock()
	p := c.persisted()
	c.mu.Unlock()
	err := c.store.Save(p)
	c.unsaved.Store(err != nil)
	if err != nil {
		c.log.Error("cannot save state; will retry on the next health check", "err", err)
		return fmt.Errorf("%w: %w", ErrNotSaved, err)
	}
	return nil
}

func (c *Controller) persisted() *Persisted {
	t := c.opts.Table
	p := &Persisted{
		Version: persistedVersion,
		Level:   t.Level(c.pub).Name, Index: c.pub, Since: c.since, Reason: c.reason,
		Auto: t.Level(c.auto).Name, AutoIndex: c.auto, AutoSince: c.autoSince,
		Sequence: c.seq,
		History:  append([]Transition(nil), c.history...),
	}
	if c.ovr != nil {
		o := *c.ovr
		p.Override = &o
	}
	return p
}
