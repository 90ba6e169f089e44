package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/fleet"
)

// fleetService is fleet mode wired: the etcd member, the controller it
// feeds, and the API's view of both. nil when fleet mode is off.
type fleetService struct {
	f      *fleet.Fleet
	ctrl   *controller.Controller
	log    *slog.Logger
	maxTTL func() time.Duration // max_override_ttl in force

	settle time.Duration // how long a PUT or DELETE waits for its own change to come by the watch

	refusedTotal atomic.Uint64
	mu           sync.Mutex
	refused      *api.FleetRefusal // the fleet override etcd holds that was refused, if any
	epoch        int               // the fleet's rollback epoch last applied
	applied      int64             // the revision of the last update applied from the watch
	appliedErr   error             // and what applying it returned
	appliedCh    chan struct{}     // closed and replaced at each update applied from the watch
}

var _ api.FleetService = (*fleetService)(nil)

// openFleet builds the fleet member when fleet mode is on, and tells the
// controller options about it. It starts nothing.
func (d *Daemon) openFleet(cfg *config.Config, opts *controller.Options) error {
	if !cfg.Fleet.Enabled {
		return nil
	}
	instance, err := cfg.FleetInstance()
	if err != nil {
		return fmt.Errorf("fleet.instance: no hostname to default to: %w", err)
	}
	password, err := cfg.EtcdPassword()
	if err != nil {
		return err
	}
	var files *fleet.TLSFiles
	if t := cfg.Fleet.Etcd.TLS; t.Enabled() {
		files = &fleet.TLSFiles{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile}
		if err := files.Check(); err != nil {
			return err
		}
	}
	f, err := fleet.New(fleet.Options{
		Endpoints: cfg.Fleet.Etcd.Endpoints, Username: cfg.Fleet.Etcd.Username, Password: password, TLSFiles: files,
		DialTimeout: cfg.Fleet.Etcd.DialTimeout, Prefix: cfg.Fleet.Prefix, Name: cfg.Fleet.Name, Instance: instance,
		InstanceTTL: cfg.FleetInstanceTTL(), Tick: cfg.HealthCheckInterval, Logger: d.log,
	})
	if err != nil {
		return err
	}
	d.fleet = &fleetService{f: f, log: d.log, maxTTL: func() time.Duration { return d.cfg.Load().MaxOverrideTTL },
		settle: min(cfg.Fleet.Etcd.DialTimeout, 2*time.Second), appliedCh: make(chan struct{})}
	opts.Fleet = &controller.FleetInfo{Name: cfg.Fleet.Name, Instance: instance, Connected: f.Connected}
	opts.FleetErrors = d.fleetErrors(cfg)
	return nil
}

// fleetAPI is what the API serves /v1/fleet* from: nil when fleet mode is
// off (a nil interface, not a nil pointer).
func (d *Daemon) fleetAPI() api.FleetService {
	if d.fleet == nil {
		return nil
	}
	return d.fleet
}

// fleetStatus feeds the fleet metrics; nil when fleet mode is off. Each
// scrape calls it once per gauge: it reads counts, not the whole view.
func (d *Daemon) fleetStatus() func() api.FleetStatus {
	if d.fleet == nil {
		return nil
	}
	s := d.fleet
	return func() api.FleetStatus {
		st := api.FleetStatus{Connected: s.f.Connected(), Conflict: s.f.Conflict(), Aggregator: s.f.Aggregating() > 0,
			OverridesRefused: s.refusedTotal.Load()}
		if a := s.f.Aggregate(time.Now()); a != nil {
			st.Instances = a.Instances
		}
		return st
	}
}

// startFleet runs the fleet member, applies each fleet override update to
// the controller, and hands the fleet each health check's report, until
// ctx ends. The returned channel closes when all of it has ended.
func (d *Daemon) startFleet(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if d.fleet == nil {
		close(done)
		return done
	}
	s := d.fleet
	if o := s.ctrl.FleetOverride(); o != nil {
		s.f.SawRevision(o.ModRevision) // a cluster below it was restored or replaced
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.f.Run(ctx) }) // returns ctx.Err() only
	wg.Go(func() { s.applyUpdates(ctx) })
	wg.Go(func() { s.report(ctx) })
	go func() { wg.Wait(); close(done) }()
	return done
}

// applyUpdates applies every fleet override update the member delivers,
// in etcd's order.
func (s *fleetService) applyUpdates(ctx context.Context) {
	for {
		u, err := s.f.Next(ctx)
		if err != nil {
			return
		}
		err = s.apply(u, true)
		if err != nil && !errors.Is(err, errRefused) {
			s.log.Error("fleet override not applied", "revision", u.Revision, "err", err)
		}
		s.mu.Lock()
		s.applied, s.appliedErr = u.Revision, err
		ch := s.appliedCh
		s.appliedCh = make(chan struct{})
		s.mu.Unlock()
		close(ch)
	}
}

// report hands the member this instance's state after every health check.
func (s *fleetService) report(ctx context.Context) {
	for {
		sampled := s.ctrl.Sampled()
		select {
		case <-ctx.Done():
			return
		case <-sampled:
		}
		st := s.ctrl.State()
		sigs, err := json.Marshal(st.Signals)
		if err != nil {
			s.log.Error("fleet report: encode signals", "err", err)
			continue
		}
		s.f.Report(fleet.Report{Level: st.Level, Index: st.Index, Source: st.Source, Recommended: st.Recommended, Signals: sigs,
			WindowAttempts: st.Signals.WindowAttempts, WindowFailures: st.Signals.WindowFailures, Sequence: st.Sequence, At: st.Signals.SampledAt})
	}
}

// unavailable maps the fleet's errors onto the API's.
func unavailable(err error) error {
	switch {
	case errors.Is(err, fleet.ErrAuth):
		return fmt.Errorf("%w: %w: %w", api.ErrFleetUnavailable, api.ErrFleetAuth, err)
	case errors.Is(err, fleet.ErrTLS):
		return fmt.Errorf("%w: %w: %w", api.ErrFleetUnavailable, api.ErrFleetTLS, err)
	case errors.Is(err, fleet.ErrTooLarge):
		return fmt.Errorf("%w: %w: %w", api.ErrFleetUnavailable, api.ErrFleetTooLarge, err)
	case errors.Is(err, fleet.ErrUnavailable):
		return fmt.Errorf("%w: %w", api.ErrFleetUnavailable, err)
	}
	return err
}

func (s *fleetService) SetOverride(ctx context.Context, r controller.OverrideRequest) error {
	u, err := s.f.SetOverride(ctx, fleet.Override{Level: r.Level, Mode: string(r.Mode), TTL: r.TTL, Reason: r.Reason, Actor: r.Actor})
	if err != nil {
		return unavailable(err)
	}
	return s.own(ctx, u)
}

// own applies this instance's own committed change: it waits (up to
// settle) for the watch to bring it, so that every change etcd committed
// before it is applied first, in order, and this instance's history
// misses none; if the watch is slow (the session is moving to another
// member) it applies it directly.
func (s *fleetService) own(ctx context.Context, u fleet.OverrideUpdate) error {
	t := time.NewTimer(s.settle)
	defer t.Stop()
	for {
		s.mu.Lock()
		applied, err, ch := s.applied, s.appliedErr, s.appliedCh
		s.mu.Unlock()
		switch {
		case applied == u.Revision:
			return err
		case applied > u.Revision:
			return nil
		}
		select {
		case <-ch:
		case <-t.C:
			return s.apply(u, false)
		case <-ctx.Done():
			return s.apply(u, false)
		}
	}
}

func (s *fleetService) ClearOverride(ctx context.Context, actor string) error {
	reason := "cleared"
	if o := s.ctrl.FleetOverride(); o != nil {
		reason = o.Reason
	}
	u, err := s.f.ClearOverride(ctx, reason, actor)
	if err != nil {
		return unavailable(err)
	}
	return s.own(ctx, u)
}

func (s *fleetService) Document(ctx context.Context, limit int) api.FleetDocument {
	v := s.f.Document(ctx, limit)
	s.mu.Lock()
	var refused *api.FleetRefusal
	if s.refused != nil {
		r := *s.refused
		refused = &r
	}
	s.mu.Unlock()
	doc := api.FleetDocument{Name: s.f.Name(), Instance: s.f.Instance(), Connected: v.Connected, Override: s.ctrl.FleetOverride(),
		OverrideRefused: refused, Instances: make([]api.FleetInstance, 0, len(v.Instances)), InstancesTotal: v.InstancesTotal,
		Levels: map[string]int{}}
	for _, in := range v.Instances {
		doc.Instances = append(doc.Instances, api.FleetInstance{Instance: in.Instance, Level: in.Level, Index: in.Index,
			Source: in.Source, Signals: in.Signals, SeenAt: in.SeenAt})
	}
	if a := v.Aggregate; a != nil {
		doc.Aggregator = &api.FleetAggregator{Instance: a.Leader, Term: a.Term, At: a.At, Stale: a.Stale}
		doc.Levels, doc.WindowAttempts, doc.WindowFailures = a.Levels, a.Attempts, a.Failures
		if doc.Levels == nil {
			doc.Levels = map[string]int{}
		}
		if a.Attempts > 0 {
			p := 100 * float64(a.Failures) / float64(a.Attempts)
			doc.ErrorRatePercent = &p
		}
	}
	return doc
}

func (s *fleetService) History(ctx context.Context, limit int) ([]api.FleetAuditEntry, error) {
	es, err := s.f.History(ctx, limit)
	if err != nil {
		return nil, unavailable(err)
	}
	out := make([]api.FleetAuditEntry, len(es))
	for i, e := range es {
		out[i] = api.FleetAuditEntry(e)
	}
	return out, nil
}

// fleetErrors is the controller's fleet error window when
// error_rate_scope is fleet; nil otherwise (a nil interface).
func (d *Daemon) fleetErrors(cfg *config.Config) controller.FleetErrorRate {
	if d.fleet == nil || cfg.Fleet.ErrorRateScope != "fleet" {
		return nil
	}
	return fleetWindow{d.fleet.f}
}

// fleetWindow is the fleet aggregate's error window as the controller
// reads it.
type fleetWindow struct{ f *fleet.Fleet }

var _ controller.FleetErrorRate = fleetWindow{}

func (w fleetWindow) ErrorRate() controller.FleetWindow {
	v := w.f.ErrorRate(time.Now())
	return controller.FleetWindow{Attempts: v.Attempts, Failures: v.Failures, Instances: v.Instances, Local: v.Local}
}
