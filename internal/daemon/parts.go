package daemon

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/errwindow"
	"github.com/degraded/degraded/internal/timeline"
	"github.com/degraded/degraded/signals"
)

// controllerOptions maps a config onto the controller's options; the
// store, observer and logger are added by the caller. With the previous
// config, samplers whose source and cgroup path did not change are kept,
// and the error window when its span and buckets did not, so that a
// reload does not make them warm up again. commit puts the sources and the
// window in force once the controller took the options.
func (d *Daemon) controllerOptions(c *config.Config, prev *config.Config) (o controller.Options, commit func(), err error) {
	machine, err := c.Machine()
	if err != nil {
		return controller.Options{}, nil, err
	}
	cpu, err := d.sampler(c, prev, c.Signals.CPU, prevSource(prev, true), d.opts.CPU, d.override.cpu, signals.CPU)
	if err != nil {
		return controller.Options{}, nil, err
	}
	mem, err := d.sampler(c, prev, c.Signals.Memory, prevSource(prev, false), d.opts.Memory, d.override.memory, signals.Memory)
	if err != nil {
		return controller.Options{}, nil, err
	}
	sources, commitSources, err := d.sources(c, prev)
	if err != nil {
		return controller.Options{}, nil, err
	}
	window, err := d.windowFor(c, prev)
	if err != nil {
		return controller.Options{}, nil, err
	}
	commit = func() {
		commitSources()
		d.windows.cur.Store(window)
	}
	return controller.Options{
		Table:               machine.Table,
		Rules:               machine.Rules,
		Sources:             sources,
		HealthCheckInterval: c.HealthCheckInterval,
		Errors:              window,
		ErrorWindow:         c.ErrorRateWindow,
		CPU:                 cpu,
		Memory:              mem,
		Measured:            c.Measured(),
	}, commit, nil
}

func prevSource(prev *config.Config, cpu bool) config.SignalSource {
	switch {
	case prev == nil:
		return config.SignalSource{}
	case cpu:
		return prev.Signals.CPU
	default:
		return prev.Signals.Memory
	}
}

// sampler returns the sampler for one resource: the test override, the
// one in force when its source and path are unchanged, or a new one. A
// source that is off gives a nil interface.
func (d *Daemon) sampler(c, prev *config.Config, src, prevSrc config.SignalSource, current, override controller.Sampler,
	build func(source, dir string) (signals.Sampler, error)) (controller.Sampler, error) {
	switch {
	case override != nil:
		return override, nil
	case prev != nil && src == prevSrc && prev.Signals.CgroupPath == c.Signals.CgroupPath:
		return current, nil
	}
	s, err := build(src.Source, c.Signals.CgroupPath)
	if err != nil || s == nil {
		return nil, err // a nil signals.Sampler must stay a nil interface: "off"
	}
	return s, nil
}

// tokensOf reads the tokens of c, the token files' included (so a reload
// picks up rotated secrets).
func tokensOf(c *config.Config) (*api.Tokens, error) {
	admin, err := c.AdminToken()
	if err != nil {
		return nil, err
	}
	ops, err := c.OperatorTokens()
	if err != nil {
		return nil, err
	}
	t := &api.Tokens{Admin: admin, Report: c.Auth.ReportToken}
	for _, o := range ops {
		t.Operators = append(t.Operators, api.Operator{Name: o.Name, Token: o.Token})
	}
	return t, nil
}

func levelNames(o controller.Options) []string {
	var names []string
	for _, l := range o.Table.Levels() {
		names = append(names, l.Name)
	}
	return names
}

// listenHost is the host part of a listen address, "" for all interfaces.
func listenHost(listen string) string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	return host
}

// wrapListener enforces max_connections at accept and adds TLS when
// configured: api's TLS listener, whose event streams the hub serves as it
// serves plain ones, with a certificate whose files are re-read when they
// change.
func (d *Daemon) wrapListener(cfg *config.Config, ln net.Listener, maxConns int) (net.Listener, error) {
	ln = api.LimitListener(ln, maxConns, d.rejected)
	if !cfg.TLS.Enabled() {
		return ln, nil
	}
	certs, err := newCertFiles(cfg.TLS.CertFile, cfg.TLS.KeyFile, d.log)
	if err != nil {
		return nil, err
	}
	return api.TLSListener(ln, &tls.Config{GetCertificate: certs.get, MinVersion: tls.VersionTLS12}), nil
}

// openStore removes the temp files a crash left behind, checks that the
// data dir can be written, so a read-only disk fails at start rather than
// at the first override, and applies --reset-state. The caller holds the
// data dir's lock. A disk that failed in an incident (controller.DiskFailed:
// full, even of inodes, or read-only or failing where a state file was
// saved) is not refused here: the controller's first save meets it, and
// starts held (controller.New). A read-only or failing data dir with no
// state file is a setup's fault (a data_dir outside systemd's
// StateDirectory under ProtectSystem=strict), refused here.
func openStore(s *controller.FileStore, reset bool, log *slog.Logger) error {
	_, serr := os.Stat(s.Path())
	saved := serr == nil
	if err := s.RemoveTemp(); err != nil && !controller.DiskFailed(err, saved) {
		return fmt.Errorf("data_dir %s: %w", s.Dir, err)
	}
	f, err := os.CreateTemp(s.Dir, ".probe-*")
	switch {
	case err != nil && controller.DiskFailed(err, saved):
	case err != nil:
		return fmt.Errorf("data_dir %s is not writable: %w", s.Dir, err)
	default:
		f.Close()
		os.Remove(f.Name())
	}
	if reset {
		if err := s.Reset(); err != nil {
			return err
		}
		log.Warn("state reset: any previous state file was moved aside with the suffix .corrupt", "path", s.Path())
	}
	return nil
}

// The error window feeds the latency signal and the timeline its latency
// counts.
var _ controller.LatencyWindow = (*errwindow.Window)(nil)

// sseOf is the event stream settings of cfg (sse.*), which a reload
// applies at once.
func sseOf(cfg *config.Config) api.SSE {
	return api.SSE{Heartbeat: cfg.SSE.Heartbeat, WriteTimeout: cfg.SSE.WriteTimeout, MaxSubscribers: cfg.SSE.MaxSubscribers}
}

// recordSettings are the recorder's settings in cfg.
func recordSettings(cfg *config.Config) timeline.Settings {
	return timeline.Settings{Enabled: cfg.Record.Enabled, Retention: cfg.Record.Retention, MaxBytes: int64(cfg.Record.MaxBytes)}
}
