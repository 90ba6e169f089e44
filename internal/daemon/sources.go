package daemon

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/levels"
	"github.com/degraded/degraded/signals"
)

// sources builds the controller's sources for cfg: pressure, pushed and
// queried signals. Each is kept across a reload when its configuration did
// not change (its identity: the pressure source and path; the pushed
// store always, reconfigured; the queries' url, timeout and specs), so a
// reload does not make it warm up again.
//
// Building changes nothing in force: commit puts the pressure source, the
// pushed signals and the queries in force, and is called only once the
// controller took the new options, so a refused reload leaves them as
// they were.
func (d *Daemon) sources(cfg, prev *config.Config) (out []controller.Source, commit func(), err error) {
	p, err := d.pressure(cfg, prev)
	if err != nil {
		return nil, nil, err
	}
	if p != nil {
		out = append(out, p)
	}
	out = append(out, d.pushed)
	q, changed, err := d.queriesFor(cfg, prev)
	if err != nil {
		return nil, nil, err
	}
	if q != nil {
		out = append(out, q)
	}
	commit = func() {
		d.psi = p
		d.pushed.Configure(pushedSignals(cfg), cfg.QueriedNames())
		if changed {
			d.runner.swap(q)
		}
	}
	return out, commit, nil
}

// pressure returns the PSI source: the one in force if its source and
// cgroup path are unchanged, else a new one whose files were checked. A
// kernel without PSI is a configuration problem (serve exits 2).
func (d *Daemon) pressure(cfg, prev *config.Config) (*signals.Pressure, error) {
	src := cfg.Signals.Pressure.Source
	if prev != nil && d.psi != nil && prev.Signals.Pressure == cfg.Signals.Pressure && prev.Signals.CgroupPath == cfg.Signals.CgroupPath {
		return d.psi, nil
	}
	if err := signals.CheckPressure(src, cfg.Signals.CgroupPath); err != nil {
		return nil, &config.ValidationError{Problems: []string{fmt.Sprintf("signals.pressure.source: %v (was %s)", err, src)}}
	}
	return signals.NewPressure(src, cfg.Signals.CgroupPath)
}

// queriesFor returns the queries for cfg: the running ones if nothing
// about them changed, else new ones (nil without queries) for the runner
// to switch to, with changed set.
func (d *Daemon) queriesFor(cfg, prev *config.Config) (q *signals.Queries, changed bool, err error) {
	specs := querySpecs(cfg)
	if prev != nil && d.runner.current() != nil && prev.Signals.Prometheus.URL == cfg.Signals.Prometheus.URL &&
		prev.Signals.Prometheus.Timeout == cfg.Signals.Prometheus.Timeout && slices.Equal(querySpecs(prev), specs) {
		return d.runner.current(), false, nil
	}
	if len(specs) == 0 {
		return nil, true, nil
	}
	q, err = signals.NewQueries(cfg.Signals.Prometheus.URL, cfg.Signals.Prometheus.Timeout, specs, nil)
	if err != nil {
		return nil, false, err
	}
	return q, true, nil
}

// pushedSignals is cfg's signals.custom in config order, as
// signals.Pushed.Configure takes them.
func pushedSignals(cfg *config.Config) []signals.PushedSignal {
	out := make([]signals.PushedSignal, len(cfg.Signals.Custom))
	for i, s := range cfg.Signals.Custom {
		out[i] = signals.PushedSignal{Name: levels.Signal(s.Name), TTL: s.TTL}
	}
	return out
}

// querySpecs is cfg's signals.prometheus.queries in config order, as
// signals.NewQueries takes them with the url and timeout.
func querySpecs(cfg *config.Config) []signals.QuerySpec {
	out := make([]signals.QuerySpec, len(cfg.Signals.Prometheus.Queries))
	for i, q := range cfg.Signals.Prometheus.Queries {
		out[i] = signals.QuerySpec{Name: levels.Signal(q.Name), Query: q.Query, Interval: q.Interval}
	}
	return out
}

// queryRunner runs the Prometheus queries in force while the daemon runs,
// switching to new ones on a reload. It is safe for concurrent use.
type queryRunner struct {
	mu     sync.Mutex
	cur    *signals.Queries
	ctx    context.Context // set by start: the daemon is running
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (r *queryRunner) current() *signals.Queries {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// start runs the current queries (and later ones) until stop.
func (r *queryRunner) start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctx = ctx
	r.launchLocked()
}

// swap replaces the queries, stopping the old ones.
func (r *queryRunner) swap(q *signals.Queries) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		r.cancel()
		r.cancel = nil
	}
	r.cur = q
	r.launchLocked()
}

func (r *queryRunner) launchLocked() {
	if r.ctx == nil || r.cur == nil {
		return
	}
	ctx, cancel := context.WithCancel(r.ctx)
	r.cancel = cancel
	q := r.cur
	r.wg.Go(func() { _ = q.Run(ctx) }) // Run returns ctx.Err() only
}

// stop ends the queries and waits for them.
func (r *queryRunner) stop() {
	r.mu.Lock()
	if r.cancel != nil {
		r.cancel()
	}
	r.ctx = nil
	r.mu.Unlock()
	r.wg.Wait()
}
