package openapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/controller"
)

// fakeFleet is the daemon's fleet service without etcd: a commit bumps
// the revision and is applied to the controller; down answers as an
// unreachable etcd, unsaved as a state file that cannot be written.
type fakeFleet struct {
	c             *controller.Controller
	mu            sync.Mutex
	rev           int64
	down, unsaved bool
	log           []api.FleetAuditEntry
}

func (f *fakeFleet) commit(u controller.FleetUpdate, e api.FleetAuditEntry) error {
	f.mu.Lock()
	down, unsaved := f.down, f.unsaved
	if !down {
		f.rev++
		u.Revision = f.rev
		e.Seq, e.Instance, e.At = int64(len(f.log)+1), "web-1", time.Now().UTC()
		f.log = append([]api.FleetAuditEntry{e}, f.log...)
	}
	f.mu.Unlock()
	switch {
	case down:
		return fmt.Errorf("%w: context deadline exceeded", api.ErrFleetUnavailable)
	case unsaved:
		return fmt.Errorf("apply: %w", controller.ErrNotSaved)
	}
	_, err := f.c.ApplyFleet(u)
	return err
}

func (f *fakeFleet) SetOverride(_ context.Context, r controller.OverrideRequest) error {
	now := time.Now().UTC()
	exp := now.Add(r.TTL)
	return f.commit(controller.FleetUpdate{Override: &controller.Override{Level: r.Level, Mode: r.Mode, Reason: r.Reason, SetAt: now, ExpiresAt: exp}, TTL: r.TTL},
		api.FleetAuditEntry{Action: "set", Level: r.Level, Mode: string(r.Mode), TTL: r.TTL.String(), Reason: r.Reason, Actor: r.Actor, ExpiresAt: &exp})
}

func (f *fakeFleet) ClearOverride(context.Context, string) error {
	return f.commit(controller.FleetUpdate{}, api.FleetAuditEntry{Action: "clear", Reason: "INC-42", Actor: "admin"})
}

func (f *fakeFleet) Document(context.Context, int) api.FleetDocument {
	rate := 12.0
	return api.FleetDocument{Name: "shop", Instance: "web-1", Connected: !f.down, Override: f.c.FleetOverride(),
		Aggregator:      &api.FleetAggregator{Instance: "web-2", Term: 17, At: time.Now().UTC()},
		OverrideRefused: &api.FleetRefusal{Revision: 41, Level: "Panic", Actor: "alice", Error: `invalid override: level "Panic" is not configured here`, At: time.Now().UTC()},
		InstancesTotal:  1,
		Instances: []api.FleetInstance{{Instance: "web-1", Level: "Major", Index: 3, Source: "fleet",
			Signals: json.RawMessage(`{"cpu_percent":12.5}`), SeenAt: time.Now().UTC()}},
		Levels: map[string]int{"Major": 1}, ErrorRatePercent: &rate, WindowAttempts: 100, WindowFailures: 12}
}

func (f *fakeFleet) History(_ context.Context, limit int) ([]api.FleetAuditEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, fmt.Errorf("%w: context deadline exceeded", api.ErrFleetUnavailable)
	}
	return f.log[:min(limit, len(f.log))], nil
}

// fleetExchanges drives /v1/fleet* on a daemon in fleet mode and on one
// without it, and the state document with a fleet override in force.
func fleetExchanges(t *testing.T, c *contract) {
	f := &fakeFleet{}
	r := newRig(t, api.Deps{Fleet: f})
	f.c = r.c
	r.c.Check(context.Background())
	r.tokens.Store(&api.Tokens{Admin: "adm"})
	srv := httptest.NewServer(r.h)
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()
	admin := []string{"Authorization", "Bearer adm"}
	evil := []string{"Origin", "https://evil.example"}
	body := `{"level":"Major","mode":"pin","ttl":"15m","reason":"INC-42"}`
	run := func(exs ...exchange) {
		t.Helper()
		for _, ex := range exs {
			t.Run("fleet: "+ex.name, func(t *testing.T) { c.do(t, srv.Client(), srv.URL, ex) })
		}
	}
	run(
		exchange{name: "view", method: "GET", target: "/v1/fleet", want: 200},
		exchange{name: "view, 5 instances", method: "GET", target: "/v1/fleet?limit=5", want: 200},
		exchange{name: "view, limit 0", method: "GET", target: "/v1/fleet?limit=0", want: 400, spec: specRejects},
		exchange{name: "history, empty", method: "GET", target: "/v1/fleet/history", want: 200},
		exchange{name: "set without a token", method: "PUT", target: "/v1/fleet/override", body: body, want: 401},
		exchange{name: "set an unknown level", method: "PUT", target: "/v1/fleet/override", body: `{"level":"Panic","ttl":"1m","reason":"x"}`, header: admin, want: 400, spec: specSilent},
		exchange{name: "set with a bad ttl", method: "PUT", target: "/v1/fleet/override", body: `{"level":"Major","ttl":"soon","reason":"x"}`, header: admin, want: 400, spec: specRejects},
		exchange{name: "set text/plain", method: "PUT", target: "/v1/fleet/override", body: body, header: append([]string{"Content-Type", "text/plain"}, admin...), want: 415, spec: specRejects},
		exchange{name: "set over 64 KiB", method: "PUT", target: "/v1/fleet/override", body: `{"level":"Major","ttl":"1m","reason":"x"` + strings.Repeat(" ", 70<<10) + `}`, header: admin, want: 413, spec: specSilent},
		exchange{name: "set cross-site", method: "PUT", target: "/v1/fleet/override", body: body, header: append(evil, admin...), want: 403, spec: specSilent},
		exchange{name: "set", method: "PUT", target: "/v1/fleet/override", body: body, header: admin, want: 200},
		exchange{name: "level under a fleet override", method: "GET", target: "/v1/level", want: 200},
		exchange{name: "view with an override", method: "GET", target: "/v1/fleet", want: 200},
		exchange{name: "history", method: "GET", target: "/v1/fleet/history?limit=5", want: 200},
		exchange{name: "history limit 0", method: "GET", target: "/v1/fleet/history?limit=0", want: 400, spec: specRejects},
		exchange{name: "clear without a token", method: "DELETE", target: "/v1/fleet/override", want: 401},
		exchange{name: "clear cross-site", method: "DELETE", target: "/v1/fleet/override", header: append(evil, admin...), want: 403, spec: specSilent},
		exchange{name: "clear", method: "DELETE", target: "/v1/fleet/override", header: admin, want: 200},
	)
	f.unsaved = true
	run(
		exchange{name: "set, not saved", method: "PUT", target: "/v1/fleet/override", body: body, header: admin, want: 500},
		exchange{name: "clear, not saved", method: "DELETE", target: "/v1/fleet/override", header: admin, want: 500},
	)
	f.unsaved, f.down = false, true
	run(
		exchange{name: "set, etcd unreachable", method: "PUT", target: "/v1/fleet/override", body: body, header: admin, want: 503},
		exchange{name: "clear, etcd unreachable", method: "DELETE", target: "/v1/fleet/override", header: admin, want: 503},
		exchange{name: "history, etcd unreachable", method: "GET", target: "/v1/fleet/history", want: 503},
	)

	off := newRig(t, api.Deps{})
	offSrv := httptest.NewServer(off.h)
	defer offSrv.Close()
	defer offSrv.Client().CloseIdleConnections()
	for _, ex := range []exchange{
		{name: "view, fleet mode off", method: "GET", target: "/v1/fleet", want: 404},
		{name: "history, fleet mode off", method: "GET", target: "/v1/fleet/history", want: 404},
		{name: "set, fleet mode off", method: "PUT", target: "/v1/fleet/override", body: body, want: 404},
		{name: "clear, fleet mode off", method: "DELETE", target: "/v1/fleet/override", want: 404},
	} {
		t.Run("fleet: "+ex.name, func(t *testing.T) { c.do(t, offSrv.Client(), offSrv.URL, ex) })
	}
}
