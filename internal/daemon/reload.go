package daemon

import (
	"errors"
	"reflect"
	"time"

	"github.com/degraded/degraded/config"
)

// Reload re-reads the configuration through Options.Load and applies it.
// An invalid config changes nothing, and neither does one that would leave
// the socket actually bound without the tokens protected mode asks for
// (the socket does not move on a reload), nor one the controller refuses
// (a table without the level the override names). Keys that need a
// restart are logged when they change. Reloads are serialised; a reload is
// not a health check.
func (d *Daemon) Reload(actor string) error {
	if d.load == nil {
		return errors.New("reload: no config source")
	}
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	cfg, warnings, err := d.load(true)
	if err == nil {
		err = config.CheckProtected(cfg, d.bound)
	}
	if err == nil {
		err = d.apply(cfg, actor)
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
		"listen":          old.Listen != cfg.Listen,
		"data_dir":        old.DataDir != cfg.DataDir,
		"tls":             old.TLS != cfg.TLS,
		"max_connections": old.MaxConnections != cfg.MaxConnections,
		"fleet":           !reflect.DeepEqual(old.Fleet, cfg.Fleet),
	} {
		if changed {
			d.log.Warn("config reloaded, but this key takes effect only after a restart", "key", key)
		}
	}
	if d.ctrl.Held() {
		d.log.Warn("config reloaded, but the state file cannot be saved: the published state, and any change this reload makes to it, are held until a save succeeds")
	} else {
		d.log.Info("config reloaded")
	}
	return nil
}

// apply puts a valid config in force: the controller's options, the
// tokens, the level names of the metrics, the log and the event stream
// settings. d.reloadMu must be held.
func (d *Daemon) apply(cfg *config.Config, actor string) error {
	opts, commit, err := d.controllerOptions(cfg, d.cfg.Load())
	if err != nil {
		return err
	}
	tokens, err := tokensOf(cfg)
	if err != nil {
		return err
	}
	opts.Observer, opts.Logger, opts.Store, opts.Fleet, opts.FleetErrors = d.opts.Observer, d.opts.Logger, d.opts.Store, d.opts.Fleet, d.opts.FleetErrors
	if err := d.ctrl.Reconfigure(opts, actor); err != nil {
		return err
	}
	commit()
	d.opts = opts
	d.tokens.Store(tokens)
	if d.recorder != nil {
		d.recorder.Configure(recordSettings(cfg))
	}
	d.metrics.SetLevelNames(levelNames(opts))
	d.logs.configure(cfg.Log)
	d.api.SetSSE(sseOf(cfg))
	return nil
}
