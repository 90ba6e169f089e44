package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/errwindow"
	"github.com/degraded/degraded/signals"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
)

func serveCmd(environ []string, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon",
		Args:  cobra.NoArgs,
	}
	path := cmd.Flags().String("config", "", "YAML config file (default: the embedded defaults)")
	cmd.Flags().String("listen", "", "address to listen on (overrides the config's listen)")
	reset := cmd.Flags().Bool("reset-state", false, "move an unusable state file aside and start at Normal")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		load := func(reload bool) (*config.Config, []string, error) {
			return config.Load(config.LoadOptions{Path: *path, Environ: environ, Flags: cmd.Flags(), Reload: reload})
		}
		return serve(cmd.Context(), load, *reset, stdout, stderr)
	}
	return cmd
}

// loader reads the config; reload is true for a reload, where an empty
// file is an error rather than "the defaults".
type loader func(reload bool) (*config.Config, []string, error)

// daemon is the wired program: everything serve starts and reload touches.
type daemon struct {
	reloadMu sync.Mutex // one reload at a time (SIGHUP and POST /-/reload)
	log      *slog.Logger
	ctrl     *controller.Controller
	metrics  *api.Metrics
	tokens   atomic.Pointer[api.Tokens]
	window   *errwindow.Window
	cfg      atomic.Pointer[config.Config]
	opts     controller.Options // in force; guarded by reloadMu after start
	bound    string             // the address the socket is bound to

	refused    atomic.Int64 // connections closed at accept (max_connections)
	refusedLog atomic.Int64 // when that was last logged, Unix nanoseconds
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.Level)) // validated by config
	opts := &slog.HandlerOptions{Level: lvl}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// controllerOptions maps a config onto the controller's options; the
// window, store, observer and logger are supplied by the caller. With a
// previous config and its options, samplers whose source and path did not
// change are kept, so a reload does not make them warm up again.
func controllerOptions(c *config.Config, window controller.ErrorRate, prev *config.Config, prevOpts controller.Options) (controller.Options, error) {
	table, err := c.Table()
	if err != nil {
		return controller.Options{}, err
	}
	same := func(a, b config.SignalSource) bool {
		return prev != nil && a == b && prev.Signals.CgroupPath == c.Signals.CgroupPath
	}
	var cpu, mem signals.Sampler
	switch {
	case prev != nil && same(prev.Signals.CPU, c.Signals.CPU):
		cpu = prevOpts.CPU
	default:
		if cpu, err = signals.CPU(c.Signals.CPU.Source, c.Signals.CgroupPath); err != nil {
			return controller.Options{}, err
		}
	}
	switch {
	case prev != nil && same(prev.Signals.Memory, c.Signals.Memory):
		mem = prevOpts.Memory
	default:
		if mem, err = signals.Memory(c.Signals.Memory.Source, c.Signals.CgroupPath); err != nil {
			return controller.Options{}, err
		}
	}
	o := controller.Options{
		Table:                table,
		HealthCheckInterval:  c.HealthCheckInterval,
		MinimumLevelDuration: c.MinimumLevelDuration,
		EscalationDelay:      c.EscalationDelay,
		EscalateAfter:        c.EscalateAfter,
		MinThroughput:        c.MinThroughput,
		Hysteresis:           c.Hysteresis,
		ManualOnly:           !c.EnableAutoAdjustment,
		MaxOverrideTTL:       c.MaxOverrideTTL,
		Errors:               window,
		ErrorWindow:          c.ErrorRateWindow,
		BlindHold:            c.BlindHold,
	}
	// A nil signals.Sampler must stay a nil interface: "off".
	if cpu != nil {
		o.CPU = cpu
	}
	if mem != nil {
		o.Memory = mem
	}
	return o, nil
}

func tokensOf(c *config.Config) (*api.Tokens, error) {
	admin, err := c.AdminToken()
	if err != nil {
		return nil, err
	}
	return &api.Tokens{Admin: admin, Report: c.Auth.ReportToken}, nil
}

func serve(ctx context.Context, load loader, resetState bool, stdout, stderr io.Writer) error {
	cfg, warnings, err := load(false)
	if err != nil {
		return configError(err)
	}
	d := &daemon{log: newLogger(cfg.Log, stderr)}
	d.cfg.Store(cfg)
	for _, w := range warnings {
		d.log.Warn("config: " + w)
	}
	d.window, err = errwindow.New(errwindow.Options{Window: cfg.ErrorRateWindow, Buckets: cfg.ErrorRateWindowBuckets})
	if err != nil {
		return err
	}
	opts, err := controllerOptions(cfg, d.window, nil, controller.Options{})
	if err != nil {
		return err
	}
	tokens, err := tokensOf(cfg)
	if err != nil {
		return err
	}
	d.tokens.Store(tokens)

	reg := prometheus.NewRegistry()
	d.metrics = api.NewMetrics(reg, levelNames(opts))
	opts.Observer, opts.Logger = d.metrics, d.log
	var store *controller.FileStore
	if cfg.DataDir != "" {
		store = &controller.FileStore{Dir: cfg.DataDir}
		unlock, err := store.Lock()
		if err != nil {
			return err
		}
		defer unlock()
		if err := openStore(store, resetState, d.log); err != nil {
			return err
		}
		opts.Store = observedStore{store, d.metrics}
	}
	d.opts = opts
	d.ctrl, err = controller.New(opts)
	if errors.Is(err, controller.ErrCorruptState) {
		return fmt.Errorf("%w; start with --reset-state to move it aside and begin at Normal", err)
	}
	if err != nil {
		return err
	}
	if store != nil && store.Recovered() != nil {
		d.log.Error("state.json was damaged; resumed from state.json.prev", "err", store.Recovered())
		d.metrics.StateRecovered()
	}

	maxConns, err := api.ConnectionLimit(cfg.MaxConnections)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	d.bound = ln.Addr().String()
	ln = api.LimitListener(ln, maxConns, d.rejected)
	if cfg.TLS.Enabled() {
		cert, err := tls.LoadX509KeyPair(cfg.TLS.CertFile, cfg.TLS.KeyFile)
		if err != nil {
			ln.Close()
			return fmt.Errorf("load tls key pair: %w", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}

	base, endStreams := context.WithCancel(context.Background())
	defer endStreams()
	handler := api.NewServer(api.Deps{
		Controller:     d.ctrl,
		Outcomes:       d.window,
		Reported:       d.ctrl.Reported,
		Tokens:         func() api.Tokens { return *d.tokens.Load() },
		Reload:         func() error { return d.reload(load) },
		Gatherer:       reg,
		Metrics:        d.metrics,
		Heartbeat:      cfg.SSE.Heartbeat,
		MaxSubscribers: cfg.SSE.MaxSubscribers,
		MaxStreams:     api.StreamLimit(maxConns),
		WriteTimeout:   cfg.SSE.WriteTimeout,
		Shutdown:       base.Done(),
		ListenHost:     listenHost(cfg.Listen),
		AllowedHosts:   func() []string { return d.cfg.Load().AllowedHosts },
		Logger:         d.log,
	})
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      90 * time.Second, // above the 60s long-poll cap; SSE lifts it per stream
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	}

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	ctrlDone := make(chan error, 1)
	go func() { ctrlDone <- d.ctrl.Run(runCtx) }()
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Serve(ln) }()

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	scheme := "http"
	if cfg.TLS.Enabled() {
		scheme = "https"
	}
	d.log.Info("degraded serving", "addr", scheme+"://"+ln.Addr().String(), "levels", len(levelNames(opts)), "data_dir", cfg.DataDir)
	fmt.Fprintf(stdout, "degraded listening on %s://%s\n", scheme, ln.Addr())

	var serveErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-hup:
			if err := d.reload(load); err != nil {
				d.log.Error("reload refused, keeping the old config", "err", err)
			}
		case serveErr = <-srvDone:
			break loop
		}
	}
	d.log.Info("shutting down")
	endStreams()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		d.log.Warn("shutdown", "err", err)
	}
	stopRun()
	if err := <-ctrlDone; !errors.Is(err, context.Canceled) {
		return fmt.Errorf("state not saved at shutdown; the next start will resume from the last saved state: %w", err)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	return nil
}

// rejected logs a connection closed at accept because max_connections
// was reached, at most once every 10s.
func (d *daemon) rejected() {
	n := d.refused.Add(1)
	now := time.Now().UnixNano()
	last := d.refusedLog.Load()
	if now-last < int64(10*time.Second) || !d.refusedLog.CompareAndSwap(last, now) {
		return
	}
	d.log.Warn("connection refused at accept: max_connections reached", "refused_total", n)
}

// listenHost is the host part of a listen address, "" for all interfaces.
func listenHost(listen string) string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	return host
}

// openStore removes the temp files a crash left behind, checks that the
// data dir can be written, so a read-only disk fails at start rather than
// at the first override, and applies --reset-state. The caller holds the
// data dir's lock.
func openStore(s *controller.FileStore, reset bool, log *slog.Logger) error {
	if err := s.RemoveTemp(); err != nil {
		return fmt.Errorf("data_dir %s: %w", s.Dir, err)
	}
	f, err := os.CreateTemp(s.Dir, ".probe-*")
	if err != nil {
		return fmt.Errorf("data_dir %s is not writable: %w", s.Dir, err)
	}
	f.Close()
	os.Remove(f.Name())
	if reset {
		if err := s.Reset(); err != nil {
			return err
		}
		log.Warn("state reset: any previous state file was moved aside with the suffix .corrupt", "path", s.Path())
	}
	return nil
}

// observedStore counts failed saves.
type observedStore struct {
	controller.Store
	metrics *api.Metrics
}

func (s observedStore) Save(p *controller.Persisted) error {
	err := s.Store.Save(p)
	if err != nil {
		s.metrics.StateSaveFailed()
	}
	return err
}

func levelNames(o controller.Options) []string {
	var names []string
	for _, l := range o.Table.Levels() {
		names = append(names, l.Name)
	}
	return names
}

// apply puts a valid config in force: the controller's options, the
// tokens and the level names of the metrics. It runs no health check: a
// reload is not a tick. d.reloadMu must be held.
func (d *daemon) apply(cfg *config.Config) error {
	opts, err := controllerOptions(cfg, d.window, d.cfg.Load(), d.opts)
	if err != nil {
		return err
	}
	tokens, err := tokensOf(cfg)
	if err != nil {
		return err
	}
	if err := d.ctrl.Reconfigure(opts); err != nil {
		return err
	}
	d.opts = opts
	d.tokens.Store(tokens)
	d.metrics.SetLevelNames(levelNames(opts))
	return nil
}

// reload re-reads the config and applies it; an invalid config changes
// nothing. Keys that need a restart are logged when they change. Reloads
// are serialised.
func (d *daemon) reload(load loader) error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	cfg, warnings, err := load(true)
	if err == nil {
		// The socket stays where it was bound: the tokens protected mode
		// asks for are judged against it, not against the file's listen.
		err = config.CheckProtected(cfg, d.bound)
	}
	if err == nil {
		err = d.apply(cfg)
	}
	d.metrics.Reloaded(err == nil, time.Now())
	if err != nil {
		return err
	}
	old := d.cfg.Swap(cfg)
	for _, w := range warnings {
		d.log.Warn("config: " + w)
	}
	for key, changed := range map[string]bool{
		"listen":                    old.Listen != cfg.Listen,
		"data_dir":                  old.DataDir != cfg.DataDir,
		"tls":                       old.TLS != cfg.TLS,
		"max_connections":           old.MaxConnections != cfg.MaxConnections,
		"error_rate_window":         old.ErrorRateWindow != cfg.ErrorRateWindow,
		"error_rate_window_buckets": old.ErrorRateWindowBuckets != cfg.ErrorRateWindowBuckets,
		"sse":                       old.SSE != cfg.SSE,
		"log":                       old.Log != cfg.Log,
	} {
		if changed {
			d.log.Warn("config reloaded, but this key takes effect only after a restart", "key", key)
		}
	}
	d.log.Info("config reloaded")
	return nil
}
