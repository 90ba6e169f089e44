package daemon

import (
	"errors"
	"fmt"
	"time"

	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/fleet"
)

// errRefused wraps the error of a fleet override that was refused (and
// logged, counted and shown as such).
var errRefused = errors.New("fleet override refused")

// apply hands one fleet override update to the controller. An override
// this instance cannot follow (refused by the fleet package, or naming a
// level, mode or reason the controller refuses) is refused loudly: an
// ERROR, degraded_fleet_override_refused_total, and /v1/fleet's
// override_refused; the controller then gets "no fleet override" at that
// revision, so the fleet layer is dropped and never left at an override
// etcd no longer holds. An override already over by this instance's clock
// is logged and ends the layer likewise. The ttl is clamped to
// max_override_ttl as a local one is. watched is false for the update of
// this instance's own PUT or DELETE, which never carries a rollback.
func (s *fleetService) apply(u fleet.OverrideUpdate, watched bool) error {
	now := time.Now()
	cu := controller.FleetUpdate{Revision: u.Revision, Expired: u.Expired}
	if watched {
		s.mu.Lock()
		cu.Reset = u.Epoch != s.epoch
		s.epoch = u.Epoch
		s.mu.Unlock()
	}
	refusal := u.Refused
	if o := u.Override; o != nil && refusal == nil {
		var co *controller.Override
		co, cu.TTL, refusal = s.check(*o, u.Revision, now)
		switch {
		case refusal != nil:
		case !now.Before(co.ExpiresAt):
			s.log.Warn("fleet: a fleet override arrived already expired by this instance's clock; not applied (check the clocks)",
				"revision", u.Revision, "level", o.Level, "actor", o.Actor, "expires_at", o.ExpiresAt)
			cu.Expired, cu.TTL = true, 0
		default:
			cu.Override = co
		}
	}
	_, err := s.ctrl.ApplyFleet(cu)
	if errors.Is(err, controller.ErrInvalidOverride) {
		refusal = err
		cu.Override, cu.TTL = nil, 0
		_, err = s.ctrl.ApplyFleet(cu) // drop the layer; a no-op once the controller did
	}
	if refusal != nil {
		s.refuse(u, refusal, now)
		if err == nil {
			err = fmt.Errorf("%w: %w", errRefused, refusal)
		}
		return err
	}
	if err == nil {
		s.mu.Lock()
		s.refused = nil
		s.mu.Unlock()
	}
	return err
}

// check validates a fleet override against this instance's table and
// limits, as a local one is, and returns it for the controller with the
// ttl clamped to max_override_ttl.
func (s *fleetService) check(o fleet.Override, rev int64, now time.Time) (*controller.Override, time.Duration, error) {
	ttl := o.TTL
	if most := s.maxTTL(); ttl > most || o.ExpiresAt.After(now.Add(most)) {
		s.log.Info("fleet: a fleet override's ttl is clamped to max_override_ttl", "revision", rev, "ttl", o.TTL, "max_override_ttl", most)
		ttl = min(ttl, most)
		if o.ExpiresAt.After(now.Add(most)) {
			o.ExpiresAt = now.Add(most).UTC()
		}
	}
	req, err := s.ctrl.CheckOverride(controller.OverrideRequest{Level: o.Level, Mode: controller.Mode(o.Mode),
		TTL: max(ttl, time.Second), Reason: o.Reason, Actor: o.Actor})
	if err != nil {
		return nil, 0, err
	}
	return &controller.Override{Level: req.Level, Mode: req.Mode, Reason: o.Reason, SetAt: o.SetAt, ExpiresAt: o.ExpiresAt, Actor: o.Actor}, ttl, nil
}

// refuse records and reports a refused fleet override.
func (s *fleetService) refuse(u fleet.OverrideUpdate, why error, now time.Time) {
	r := api.FleetRefusal{Revision: u.Revision, Error: why.Error(), At: now.UTC()}
	if o := u.Override; o != nil {
		r.Level, r.Actor = o.Level, o.Actor
	}
	s.refusedTotal.Add(1)
	s.mu.Lock()
	s.refused = &r
	s.mu.Unlock()
	s.log.Error("fleet: the fleet override in etcd is refused; this instance follows no fleet override until a valid one is set",
		"revision", r.Revision, "level", r.Level, "actor", r.Actor, "err", why)
}
