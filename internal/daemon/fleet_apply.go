package daemon

import (
	"errors"
	"fmt"
	"time"

	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/fleet"
	"github.com/degraded/degraded/levels"
)

// errRefused wraps the error of a fleet override that was refused (and
// logged, counted and shown as such).
var errRefused = errors.New("fleet override refused")

// apply hands one fleet override update to the controller, which checks
// a fleet override as a local one (a level its table has, pin or floor,
// a reason of 1 to 500 characters, the ttl clamped to max_override_ttl).
// One this instance cannot follow (refused by the fleet package, or by
// the controller) is refused loudly: an ERROR, a count in
// degraded_fleet_override_refused_total, and /v1/fleet's
// override_refused; either way the fleet layer in force, which etcd no
// longer holds, is dropped. One already expired by this instance's clock
// is logged, and ends the layer likewise. watched is false for the update
// of this instance's own PUT or DELETE, which never carries a rollback.
func (s *fleetService) apply(u fleet.OverrideUpdate, watched bool) error {
	now := time.Now()
	cu := controller.FleetUpdate{Revision: u.Revision, Expired: u.Expired, Actor: u.Actor}
	if watched {
		s.mu.Lock()
		cu.Reset = u.Epoch != s.epoch
		s.epoch = u.Epoch
		s.mu.Unlock()
	}
	if o := u.Override; o != nil && u.Refused == nil {
		cu.Override = &controller.Override{Level: o.Level, Mode: controller.Mode(o.Mode), Reason: o.Reason, SetAt: o.SetAt,
			ExpiresAt: o.ExpiresAt, Actor: o.Actor}
		cu.TTL = o.TTL
		if most := s.maxTTL(); o.TTL > most || o.ExpiresAt.After(now.Add(most)) {
			s.log.Info("fleet: a fleet override's ttl is clamped to max_override_ttl", "revision", u.Revision, "ttl", o.TTL, "max_override_ttl", most)
		}
	}
	_, err := s.ctrl.ApplyFleet(cu)
	refusal := u.Refused
	switch {
	case errors.Is(err, controller.ErrInvalidOverride):
		refusal, err = err, nil
	case errors.Is(err, levels.ErrExpiredOverride):
		o := u.Override
		s.log.Warn("fleet: a fleet override arrived already expired by this instance's clock; not applied (check the clocks)",
			"revision", u.Revision, "level", o.Level, "actor", o.Actor, "expires_at", o.ExpiresAt)
		err = nil
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

// refuse records and reports a refused fleet override.
func (s *fleetService) refuse(u fleet.OverrideUpdate, why error, now time.Time) {
	r := api.FleetRefusal{Revision: u.Revision, Error: why.Error(), At: now.UTC()}
	var ro *fleet.RefusedOverride
	switch o := u.Override; {
	case o != nil:
		r.Level, r.Actor = o.Level, o.Actor
	case errors.As(why, &ro):
		r.Level, r.Actor = ro.Level, ro.Actor
	}
	s.refusedTotal.Add(1)
	s.mu.Lock()
	s.refused = &r
	s.mu.Unlock()
	s.log.Error("fleet: the fleet override in etcd is refused; this instance follows no fleet override until a valid one is set",
		"revision", r.Revision, "level", r.Level, "actor", r.Actor, "err", why)
}
