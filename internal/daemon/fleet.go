package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/fleet"
)

// fleetService is fleet mode wired: the etcd member, the controller it
// feeds, and the API's view of both. nil when fleet mode is off.
type fleetService struct {
	f    *fleet.Fleet
	ctrl *controller.Controller
	log  *slog.Logger
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
	tlsCfg, err := etcdTLS(cfg.Fleet.Etcd.TLS)
	if err != nil {
		return err
	}
	f, err := fleet.New(fleet.Options{
		Endpoints: cfg.Fleet.Etcd.Endpoints, Username: cfg.Fleet.Etcd.Username, Password: password, TLS: tlsCfg,
		DialTimeout: cfg.Fleet.Etcd.DialTimeout, Prefix: cfg.Fleet.Prefix, Name: cfg.Fleet.Name, Instance: instance,
		InstanceTTL: cfg.FleetInstanceTTL(), Logger: d.log,
	})
	if err != nil {
		return err
	}
	d.fleet = &fleetService{f: f, log: d.log}
	opts.Fleet = &controller.FleetInfo{Name: cfg.Fleet.Name, Instance: instance, Connected: f.Connected}
	opts.FleetErrors = d.fleetErrors(cfg)
	return nil
}

// etcdTLS builds the etcd client's TLS from fleet.etcd.tls; nil when no
// file is set.
func etcdTLS(t config.EtcdTLS) (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("fleet.etcd.tls.ca_file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("fleet.etcd.tls.ca_file: no PEM certificate in %s", t.CAFile)
		}
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("fleet.etcd.tls: load key pair: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
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
	f := d.fleet.f
	return func() api.FleetStatus {
		return api.FleetStatus{Connected: f.Connected(), Instances: f.Instances(), Conflict: f.Conflict()}
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
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.f.Run(ctx) }) // returns ctx.Err() only
	wg.Go(func() { s.applyUpdates(ctx) })
	wg.Go(func() { s.report(ctx) })
	go func() { wg.Wait(); close(done) }()
	return done
}

// applyUpdates applies every fleet override update the member delivers.
func (s *fleetService) applyUpdates(ctx context.Context) {
	for {
		u, changed := s.f.Override()
		if u.Revision > 0 {
			if _, err := s.ctrl.ApplyFleet(toController(u)); err != nil {
				s.log.Error("fleet override not applied", "revision", u.Revision, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
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

func toController(u fleet.OverrideUpdate) controller.FleetUpdate {
	cu := controller.FleetUpdate{Revision: u.Revision, Expired: u.Expired}
	if o := u.Override; o != nil {
		cu.Override = &controller.Override{Level: o.Level, Mode: controller.Mode(o.Mode), Reason: o.Reason, SetAt: o.SetAt, ExpiresAt: o.ExpiresAt}
		cu.TTL = o.TTL
	}
	return cu
}

// unavailable maps the fleet's ErrUnavailable onto the API's.
func unavailable(err error) error {
	if errors.Is(err, fleet.ErrUnavailable) {
		return fmt.Errorf("%w: %w", api.ErrFleetUnavailable, err)
	}
	return err
}

func (s *fleetService) SetOverride(ctx context.Context, r controller.OverrideRequest) error {
	u, err := s.f.SetOverride(ctx, fleet.Override{Level: r.Level, Mode: string(r.Mode), TTL: r.TTL, Reason: r.Reason})
	if err != nil {
		return unavailable(err)
	}
	_, err = s.ctrl.ApplyFleet(toController(u))
	return err
}

func (s *fleetService) ClearOverride(ctx context.Context) error {
	reason := "cleared"
	if o := s.ctrl.FleetOverride(); o != nil {
		reason = o.Reason
	}
	u, err := s.f.ClearOverride(ctx, reason)
	if err != nil {
		return unavailable(err)
	}
	_, err = s.ctrl.ApplyFleet(toController(u))
	return err
}

func (s *fleetService) Document() api.FleetDocument {
	v := s.f.View()
	doc := api.FleetDocument{Name: s.f.Name(), Instance: s.f.Instance(), Connected: v.Connected, Override: s.ctrl.FleetOverride(),
		Instances: make([]api.FleetInstance, 0, len(v.Instances)), Levels: v.Levels,
		WindowAttempts: v.WindowAttempts, WindowFailures: v.WindowFailures}
	for _, in := range v.Instances {
		doc.Instances = append(doc.Instances, api.FleetInstance{Instance: in.Instance, Level: in.Level, Index: in.Index,
			Source: in.Source, Signals: in.Signals, SeenAt: in.SeenAt})
	}
	if v.WindowAttempts > 0 {
		p := 100 * float64(v.WindowFailures) / float64(v.WindowAttempts)
		doc.ErrorRatePercent = &p
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

// fleetWindow is the fleet member's error window as the controller reads it.
type fleetWindow struct{ f *fleet.Fleet }

var _ controller.FleetErrorRate = fleetWindow{}

func (w fleetWindow) ErrorRate() controller.FleetWindow {
	a, f, n, ok := w.f.ErrorRate()
	if !ok {
		return controller.FleetWindow{Local: "fleet unreachable"}
	}
	return controller.FleetWindow{Attempts: a, Failures: f, Instances: n}
}
