package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/degraded/degraded/controller"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeFleet commits to memory and applies to the controller, as the
// daemon's fleet service does with etcd; down makes etcd unreachable.
type fakeFleet struct {
	c     *controller.Controller
	mu    sync.Mutex
	rev   int64
	down  bool
	why   error // wrapped with ErrFleetUnavailable when down: ErrFleetAuth, ErrFleetTLS, ErrFleetTooLarge
	log   []FleetAuditEntry
	limit int // the last Document's
}

func (f *fakeFleet) SetOverride(_ context.Context, r controller.OverrideRequest) error {
	f.mu.Lock()
	if f.down {
		f.mu.Unlock()
		if f.why != nil {
			return fmt.Errorf("%w: %w: rpc error: code = InvalidArgument desc = etcdserver: authentication failed, invalid user ID or password", ErrFleetUnavailable, f.why)
		}
		return fmt.Errorf("%w: dial tcp 127.0.0.1:2379: connection refused", ErrFleetUnavailable)
	}
	f.rev++
	now := time.Now().UTC()
	u := controller.FleetUpdate{Override: &controller.Override{Level: r.Level, Mode: r.Mode, Reason: r.Reason, SetAt: now, ExpiresAt: now.Add(r.TTL)}, TTL: r.TTL, Revision: f.rev}
	f.log = append([]FleetAuditEntry{{Seq: int64(len(f.log) + 1), Action: "set", Level: r.Level, Mode: string(r.Mode), TTL: r.TTL.String(), Reason: r.Reason, Instance: "web-1", At: now}}, f.log...)
	f.mu.Unlock()
	_, err := f.c.ApplyFleet(u)
	return err
}

func (f *fakeFleet) ClearOverride(context.Context, string) error {
	f.mu.Lock()
	f.rev++
	u := controller.FleetUpdate{Revision: f.rev}
	f.mu.Unlock()
	_, err := f.c.ApplyFleet(u)
	return err
}

func (f *fakeFleet) Document(_ context.Context, limit int) FleetDocument {
	f.mu.Lock()
	f.limit = limit
	f.mu.Unlock()
	return FleetDocument{Name: "shop", Instance: "web-1", Connected: !f.down, Override: f.c.FleetOverride(),
		Instances: []FleetInstance{}, Levels: map[string]int{}}
}

func (f *fakeFleet) History(_ context.Context, limit int) ([]FleetAuditEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.log[:min(limit, len(f.log))], nil
}

func TestFleetRoutesWhenOff(t *testing.T) {
	r := newRig(t, Deps{})
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/fleet", ""}, {"GET", "/v1/fleet/history", ""},
		{"PUT", "/v1/fleet/override", `{"level":"Major","ttl":"15m","reason":"INC-42"}`}, {"DELETE", "/v1/fleet/override", ""},
	} {
		w := r.do(c.method, c.path, c.body)
		if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), `"fleet mode is off"`) {
			t.Errorf("%s %s with fleet mode off: %d %s, want 404 fleet mode is off", c.method, c.path, w.Code, w.Body)
		}
	}
}

func TestFleetOverrideRoutes(t *testing.T) {
	f := &fakeFleet{}
	r := newRig(t, Deps{Fleet: f})
	f.c = r.c
	r.tokens.Store(&Tokens{Admin: "admin-secret"})
	body := `{"level":"major","mode":"pin","ttl":"15m","reason":"INC-42"}`

	if w := r.do("PUT", "/v1/fleet/override", body); w.Code != http.StatusUnauthorized {
		t.Errorf("PUT without the admin token: %d, want 401", w.Code)
	}
	auth := []string{"Authorization", "Bearer admin-secret"}
	if w := r.do("PUT", "/v1/fleet/override", `{"level":"Nope","ttl":"15m","reason":"x"}`, auth...); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "Nope") {
		t.Errorf("PUT with an unknown level: %d %s, want 400 naming it", w.Code, w.Body)
	}
	if w := r.do("PUT", "/v1/fleet/override", `{"level":"Major","ttl":"15m","reason":"INC-42\nall clear"}`, auth...); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "reason must be one line of text") {
		t.Errorf("PUT with a reason of two lines: %d %s, want 400 as a local override's", w.Code, w.Body)
	}
	w := r.do("PUT", "/v1/fleet/override", body, auth...)
	doc := decodeBody[FleetDocument](t, w)
	if w.Code != http.StatusOK || doc.Override == nil || doc.Override.Level != "Major" || doc.Name != "shop" {
		t.Fatalf("PUT: %d %+v, want 200 with the fleet document holding the Major pin", w.Code, doc)
	}
	if st := r.c.State(); st.Level != "Major" || st.Source != "fleet" {
		t.Errorf("after the PUT answered: level %s source %s, want Major from fleet already applied", st.Level, st.Source)
	}
	if w := r.do("DELETE", "/v1/override", "", auth...); w.Code != http.StatusOK || r.c.State().Source != "fleet" {
		t.Errorf("a local DELETE: %d, source %s; want the fleet override untouched", w.Code, r.c.State().Source)
	}
	w = r.do("GET", "/v1/fleet/history?limit=5", "")
	if h := decodeBody[map[string][]FleetAuditEntry](t, w); w.Code != http.StatusOK || len(h["entries"]) != 1 || h["entries"][0].Reason != "INC-42" {
		t.Errorf("history: %d %+v, want the one set", w.Code, h)
	}
	if w := r.do("GET", "/v1/fleet/history?limit=0", ""); w.Code != http.StatusBadRequest {
		t.Errorf("history limit=0: %d, want 400", w.Code)
	}
	w = r.do("DELETE", "/v1/fleet/override", "", auth...)
	if doc := decodeBody[FleetDocument](t, w); w.Code != http.StatusOK || doc.Override != nil {
		t.Errorf("DELETE: %d %+v, want 200 and no override", w.Code, doc)
	}

	f.down = true
	w = r.do("PUT", "/v1/fleet/override", body, auth...)
	if w.Code != http.StatusServiceUnavailable || strings.Contains(w.Body.String(), "2379") {
		t.Errorf("PUT with etcd down: %d %s, want 503 without internals", w.Code, w.Body)
	}
	for _, c := range []struct {
		why  error
		want string
	}{
		{ErrFleetAuth, `"etcd refused this daemon's credentials (fleet.etcd.username, fleet.etcd.password_file): the fleet override was not changed"`},
		{ErrFleetTLS, `"the TLS handshake with etcd failed (fleet.etcd.tls): the fleet override was not changed"`},
		{ErrFleetTooLarge, `"etcd's answer was over the size limit (keys written by hand under the fleet's prefix?): the fleet override was not changed"`},
	} {
		f.why = c.why
		w = r.do("PUT", "/v1/fleet/override", body, auth...)
		if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), c.want) || strings.Contains(w.Body.String(), "invalid user ID") {
			t.Errorf("PUT with etcd refusing (%v): %d %s, want 503 saying %s, without internals", c.why, w.Code, w.Body, c.want)
		}
	}
}

func TestFleetViewLimit(t *testing.T) {
	f := &fakeFleet{}
	r := newRig(t, Deps{Fleet: f})
	f.c = r.c
	for _, c := range []struct {
		query string
		code  int
		limit int
	}{{"", 200, 100}, {"?limit=7", 200, 7}, {"?limit=1000", 200, 1000}, {"?limit=0", 400, 0}, {"?limit=1001", 400, 0}, {"?limit=x", 400, 0}} {
		f.limit = 0
		w := r.do("GET", "/v1/fleet"+c.query, "")
		if w.Code != c.code || f.limit != c.limit {
			t.Errorf("GET /v1/fleet%s: %d, listed up to %d; want %d, up to %d", c.query, w.Code, f.limit, c.code, c.limit)
		}
	}
}

func TestFleetMetrics(t *testing.T) {
	off := prometheus.NewRegistry()
	RegisterFleetMetrics(off, nil)
	on := prometheus.NewRegistry()
	RegisterFleetMetrics(on, func() FleetStatus {
		return FleetStatus{Connected: true, Instances: 7, Conflict: true, Aggregator: true, OverridesRefused: 2}
	})
	for _, c := range []struct {
		reg  *prometheus.Registry
		want string
	}{
		{off, "degraded_fleet_aggregator 0\ndegraded_fleet_connected 0\ndegraded_fleet_instance_conflict 0\ndegraded_fleet_instances 0\ndegraded_fleet_override_refused_total 0\n"},
		{on, "degraded_fleet_aggregator 1\ndegraded_fleet_connected 1\ndegraded_fleet_instance_conflict 1\ndegraded_fleet_instances 7\ndegraded_fleet_override_refused_total 2\n"},
	} {
		mfs, err := c.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		for _, mf := range mfs {
			m := mf.GetMetric()[0]
			v := m.GetGauge().GetValue()
			if m.Counter != nil {
				v = m.GetCounter().GetValue()
			}
			fmt.Fprintf(&got, "%s %g\n", mf.GetName(), v)
		}
		if got.String() != c.want {
			t.Errorf("metrics:\n%s\nwant:\n%s", got.String(), c.want)
		}
		if problems, err := testutil.GatherAndLint(c.reg); err != nil || len(problems) > 0 {
			t.Errorf("lint: %v %v", problems, err)
		}
	}
}
