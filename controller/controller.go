package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
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

// LatencyWindow is an ErrorRate that also keeps latencies: Quantile
// returns the q-quantile of the latencies in the window, in milliseconds,
// and how many there are. When Options.Errors implements it, the latency
// signal is sampled from it.
type LatencyWindow interface {
	Quantile(now time.Time, q float64) (ms float64, observations int64)
}

// Source reads signals at a health check: one reading per signal it
// feeds (PSI feeds three; pushed and queried custom signals one each).
type Source interface {
	Read(ctx context.Context, now time.Time) []levels.Reading
}

// Instant is a Source whose Read is cheap and changes between health
// checks (pushed values): an event-driven evaluation reads it again.
type Instant interface {
	Source
	Instant()
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
	// RecoveryJitter (0 <= j < 1; 0: none) stretches each recovery step's
	// dwell by a factor 1 + r, r uniform in [0, RecoveryJitter), drawn
	// when a level is entered or an override ends.
	RecoveryJitter float64
	// Rand draws uniformly from [0, 1) for the jitter (default
	// math/rand/v2's Float64); tests fix it.
	Rand func() float64
	// MaxOverrideTTL bounds an override's ttl (default 24h).
	MaxOverrideTTL time.Duration
	// BlindHold is how long a warming or failed signal may hold recovery
	// while another signal can see (0: it never holds). See DESIGN.md
	// "Unknown is not healthy".
	BlindHold time.Duration
	// Shadow publishes the level with State.Shadow set (config mode:
	// shadow): readers admit everything and count what they would have
	// shed. A change by Reconfigure is one history entry.
	Shadow bool
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
	// Recorder receives one timeline line per evaluation; nil records
	// nothing. Like Store, Observer and Logger, the one given to New is
	// kept across Reconfigure.
	Recorder Recorder
	// Fleet is fleet mode's identity for the state document; nil when
	// fleet mode is off. Fleet overrides arrive by ApplyFleet.
	Fleet *FleetInfo
	// FleetErrors, when set (error_rate_scope: fleet), makes the error
	// rate the fleet's; nil keeps it local.
	FleetErrors FleetErrorRate
}

// rules are the options the pure rules of levels.Next take.
func (o Options) rules() levels.Rules {
	return levels.Rules{
		MinimumLevelDuration: o.MinimumLevelDuration,
		EscalationDelay:      o.EscalationDelay,
		EscalateAfter:        o.EscalateAfter,
		Hysteresis:           o.Hysteresis,
		BlindHold:            o.BlindHold,
		ManualOnly:           o.ManualOnly,
	}
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
	if o.Rand == nil {
		o.Rand = rand.Float64
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
	evalMu sync.Mutex // one evaluation (Check, Reconfigure) at a time; taken before saveMu and mu
	saveMu sync.Mutex // serialises Store.Save; taken before mu, never inside it
	obsMu  sync.Mutex // orders Observer.Published calls: the last one sees the latest state
	logMu  sync.Mutex // guards failing

	failing map[levels.Signal]string // signals failing now, with their error, for logFailure

	mu       sync.Mutex // guards everything below
	opts     Options
	pub      int       // published level index
	since    time.Time // when pub last changed: the dwell clock
	reason   string
	auto     levels.Auto // the automatic level, computed even under an override
	ovr      *Override
	ovrIndex int
	ovrEnds  time.Time  // ExpiresAt with the monotonic reading, while this process runs
	fleet    fleetLayer // the fleet override, between auto and ovr (fleet.go)
	seq      uint64
	history  []Transition    // oldest first, at most HistoryLimit
	errSince time.Time       // when the error window came into use
	signals  levels.Sample   // the last health check's sample
	samples  []levels.Sample // ring of recent health checks, oldest first
	ready    bool
	lastKey  docKey // what clients act on in the last published state

	state    atomic.Pointer[State]
	levelCh  notifier // fires when Sequence changes
	sampleCh notifier // fires after every health check
	reload   chan struct{}
	unsaved  atomic.Bool // the last save failed: retry on each tick

	eventDue   atomic.Bool  // an event-driven evaluation is due
	lastEvent  atomic.Int64 // when the last one ran, Unix nanoseconds
	timerMu    sync.Mutex   // guards eventTimer and stopped
	eventTimer *time.Timer  // a due evaluation, a millisecond after the last
	stopped    bool         // Run has ended: no more timers

	// Fixed at New; Reconfigure keeps them.
	store    Store
	observer Observer
	recorder Recorder
	log      *slog.Logger
}

// New returns a controller resumed from o.Store, if it holds a state. It
// does no sampling and starts no goroutines. With a store, it saves at
// once to reserve the next block of sequence numbers (see [SequenceBlock]),
// and fails if it cannot.
func New(o Options) (*Controller, error) {
	if o.Table == nil {
		return nil, errors.New("controller: no level table")
	}
	o = o.withDefaults()
	c := &Controller{opts: o, reload: make(chan struct{}, 1), store: o.Store, observer: o.Observer, recorder: o.Recorder, log: o.Logger}
	now := time.Now()
	c.since, c.errSince = now, now
	c.auto.Since = now
	c.auto.Seen = map[levels.Signal]time.Time{}
	for _, sig := range o.Table.Signals() {
		c.auto.Seen[sig] = now // every blind clock starts at the start
	}
	c.reason = "started"
	if c.store != nil {
		p, err := c.store.Load()
		if err != nil {
			return nil, fmt.Errorf("load state: %w", err)
		}
		if p != nil {
			c.restore(now, p, recoveredFrom(c.store))
		}
	}
	c.publishLocked(now, SourceConfig, "config changed")
	if c.store != nil {
		if err := c.save(false); err != nil {
			return nil, fmt.Errorf("reserve sequence numbers: %w", err)
		}
	}
	return c, nil
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
// most SamplesLimit, covering about SamplesSpan. The samples are shared
// and must not be modified.
func (c *Controller) Samples() []levels.Sample {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]levels.Sample(nil), c.samples...)
}

// Table returns the level table in force.
func (c *Controller) Table() *levels.Table {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opts.Table
}

// Run performs a health check at once, then one every
// HealthCheckInterval, until ctx ends. It then saves the state one last
// time, marked as a clean shutdown, and returns ctx.Err(), or an error
// wrapping ErrNotSaved if that save failed.
func (c *Controller) Run(ctx context.Context) error {
	c.check(ctx, levels.TriggerStart)
	t := time.NewTicker(c.interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			c.stopEvents()
			if err := c.save(true); err != nil {
				return fmt.Errorf("final save: %w", err)
			}
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

// publishLocked stores a fresh state document and returns it. A change of
// what clients act on (see docKey) that no history entry accounts for yet,
// such as a reload changing the current level's threshold, is recorded
// here as one entry with the given source and reason, so the sequence and
// the ETag always move with the document. c.mu must be held.
func (c *Controller) publishLocked(now time.Time, source, reason string) *State {
	st := c.build()
	if prev := c.state.Load(); prev != nil && keyOf(st) != c.lastKey && st.Sequence == prev.Sequence {
		name := c.opts.Table.Level(c.pub).Name
		c.record(now, name, source, reason)
		st = c.build()
	}
	c.lastKey = keyOf(st)
	c.state.Store(st)
	return st
}
