package daemon

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/errwindow"
	"github.com/degraded/degraded/internal/timeline"
	"github.com/degraded/degraded/signals"
	"github.com/prometheus/client_golang/prometheus"
)

// Loader reads the configuration; reload is true for a reload, where an
// empty file is an error rather than "the defaults".
type Loader func(reload bool) (*config.Config, []string, error)

// Options are what New needs beside the config. The zero value serves
// nothing, cannot reload and logs nowhere.
type Options struct {
	// Load re-reads the configuration for Reload (SIGHUP, POST /-/reload);
	// nil makes POST /-/reload a 404 and Reload an error.
	Load Loader
	// Listener, if set, is where Run serves the API: wrapped to enforce
	// max_connections and, with tls configured, TLS. Its address is the
	// one protected mode is judged against on a reload.
	Listener net.Listener
	// ResetState moves an unusable state file aside (--reset-state).
	ResetState bool
	// Log receives the daemon's log in the config's format; nil discards.
	Log io.Writer
	// CPU and Memory, when set, replace the samplers the config would
	// build (test rigs and benchmarks feed known values this way).
	CPU, Memory controller.Sampler
	// Store, when set, replaces the state file in data_dir.
	Store controller.Store
}

// Daemon is one wired daemon. Build it with New, serve Handler (or give
// Options.Listener) and call Run, which runs every part and joins every
// goroutine it started before it returns; Close releases the data_dir
// lock. Its methods are safe for concurrent use.
type Daemon struct {
	log      *slog.Logger
	logs     *logs // d.log's level and format, for a reload
	ctrl     *controller.Controller
	metrics  *api.Metrics
	registry *prometheus.Registry
	windows  windows // the error window in force (windows.go)
	api      *api.Server
	ln       net.Listener
	load     Loader
	override struct{ cpu, memory controller.Sampler }
	bound    string
	unlock   func()

	tokens atomic.Pointer[api.Tokens]
	cfg    atomic.Pointer[config.Config]

	reloadMu sync.Mutex         // one reload at a time (SIGHUP and POST /-/reload)
	opts     controller.Options // in force; guarded by reloadMu after New

	recorder *timeline.Recorder // the timeline; nil without a data_dir

	fleet  *fleetService     // fleet mode (fleet.go); nil when off
	pushed *signals.Pushed   // pushed custom signals; one store for the daemon's life
	psi    *signals.Pressure // the PSI source in force, if any
	runner queryRunner       // runs the Prometheus queries in force

	refused    atomic.Int64 // connections closed at accept (max_connections)
	refusedLog atomic.Int64 // when that was last logged, Unix nanoseconds
}

// New builds a daemon from a valid cfg: it takes the data_dir lock,
// removes crash leftovers, loads the state and builds every part, but
// starts nothing. Its errors name the cause (the data_dir in use, a state
// file that cannot be used); the caller logs warnings of the config load.
func New(cfg *config.Config, o Options) (*Daemon, error) {
	w := o.Log
	if w == nil {
		w = io.Discard
	}
	d := &Daemon{logs: newLogs(cfg.Log, w), load: o.Load, unlock: func() {}, pushed: &signals.Pushed{}}
	d.log = d.logs.log
	d.override.cpu, d.override.memory = o.CPU, o.Memory
	d.cfg.Store(cfg)
	d.bound = cfg.Listen
	if o.Listener != nil {
		d.bound = o.Listener.Addr().String()
	}
	opts, commit, err := d.controllerOptions(cfg, nil)
	if err != nil {
		return nil, err
	}
	commit() // nothing was in force before
	tokens, err := tokensOf(cfg)
	if err != nil {
		return nil, err
	}
	d.tokens.Store(tokens)
	d.registry = prometheus.NewRegistry()
	d.metrics = api.NewMetrics(d.registry, levelNames(opts))
	opts.Observer, opts.Logger = d.metrics, d.log
	if cfg.DataDir != "" {
		d.recorder = timeline.New(timeline.Options{Dir: filepath.Join(cfg.DataDir, "timeline"), Settings: recordSettings(cfg),
			Dropped: d.metrics.TimelineDropped, Logger: d.log, Reserve: stateReserve(cfg.DataDir)})
		opts.Recorder = d.recorder
	}
	// What can refuse the start without the state goes first: opening
	// the state reserves a block of sequences and marks the file unclean,
	// and a start refused after that left both behind, and a restart
	// entry at the next start for a daemon that never ran.
	maxConns, err := api.ConnectionLimit(cfg.MaxConnections)
	if err != nil {
		return nil, err
	}
	if o.Listener != nil {
		if d.ln, err = d.wrapListener(cfg, o.Listener, maxConns); err != nil {
			return nil, err
		}
	}
	if err := d.openFleet(cfg, &opts); err != nil {
		return nil, err
	}
	api.RegisterFleetMetrics(d.registry, d.fleetStatus())
	if err := d.openState(cfg, o, &opts); err != nil {
		d.Close()
		return nil, err
	}
	if d.fleet != nil {
		d.fleet.ctrl = d.ctrl
	}
	d.api = d.newAPI(cfg, maxConns)
	return d, nil
}

// openState opens the store (the data_dir's state file unless o.Store is
// set) and builds the controller from it.
func (d *Daemon) openState(cfg *config.Config, o Options, opts *controller.Options) error {
	switch {
	case o.Store != nil:
		opts.Store = o.Store
	case cfg.DataDir != "":
		file := &controller.FileStore{Dir: cfg.DataDir}
		unlock, err := file.Lock()
		if err != nil {
			return err
		}
		d.unlock = unlock
		if err := openStore(file, o.ResetState, d.log); err != nil {
			return err
		}
		opts.Store = recoveryLogged{file, d}
	}
	d.opts = *opts
	var err error
	d.ctrl, err = controller.New(*opts)
	if errors.Is(err, controller.ErrCorruptState) {
		return fmt.Errorf("%w; start with --reset-state to move it aside and begin at Normal", err)
	}
	if err != nil {
		return err
	}
	return nil
}

// recoveryLogged is the state file, whose fall back to state.json.prev at
// Load is logged and counted (degraded_state_recovered).
type recoveryLogged struct {
	*controller.FileStore
	d *Daemon
}

func (s recoveryLogged) Load() (*controller.Persisted, bool, error) {
	p, fromPrev, err := s.FileStore.Load()
	if fromPrev {
		s.d.log.Error("state.json was damaged or missing; resumed from state.json.prev, and republished above the reserved sequence ceiling", "path", s.Path())
		s.d.metrics.StateRecovered()
	}
	return p, fromPrev, err
}

// newAPI builds the HTTP API over the daemon's parts; Run runs it.
func (d *Daemon) newAPI(cfg *config.Config, maxConns int) *api.Server {
	var reload func(actor string) error
	if d.load != nil {
		reload = d.Reload
	}
	var tl api.Timeline
	if d.recorder != nil {
		tl = d.recorder
	}
	return api.NewServer(api.Deps{
		Controller:   d.ctrl,
		Outcomes:     &d.windows,
		Reported:     d.ctrl.Reported,
		Pusher:       d.pushed,
		Timeline:     tl,
		Tokens:       func() api.Tokens { return *d.tokens.Load() },
		Reload:       reload,
		Gatherer:     d.registry,
		Metrics:      d.metrics,
		SSE:          sseOf(cfg),
		MaxStreams:   api.StreamLimit(maxConns),
		ListenHost:   listenHost(cfg.Listen),
		AllowedHosts: func() []string { return d.cfg.Load().AllowedHosts },
		Logger:       d.log,
		Fleet:        d.fleetAPI(),
	})
}

// Handler returns the daemon's HTTP API. Its event streams are served
// while Run runs.
func (d *Daemon) Handler() http.Handler { return d.api.Handler() }

// Controller returns the daemon's controller, for test rigs and tools.
func (d *Daemon) Controller() *controller.Controller { return d.ctrl }

// Window returns the daemon's error window in force, for test rigs and
// tools (a reload that changes its span or buckets replaces it).
func (d *Daemon) Window() *errwindow.Window { return d.windows.cur.Load() }

// Logger returns the daemon's logger.
func (d *Daemon) Logger() *slog.Logger { return d.log }

// Addr returns the address the API listens on (Options.Listener's), or
// nil without a listener.
func (d *Daemon) Addr() net.Addr {
	if d.ln == nil {
		return nil
	}
	return d.ln.Addr()
}

// Close releases the data_dir lock. Call it after Run has returned, or
// when Run was never called.
func (d *Daemon) Close() { d.unlock() }

// rejected logs a connection closed at accept because max_connections
// was reached, at most once every 10s.
func (d *Daemon) rejected() {
	n := d.refused.Add(1)
	now := time.Now().UnixNano()
	last := d.refusedLog.Load()
	if now-last < int64(10*time.Second) || !d.refusedLog.CompareAndSwap(last, now) {
		return
	}
	d.log.Warn("connection refused at accept: max_connections reached", "refused_total", n)
}
