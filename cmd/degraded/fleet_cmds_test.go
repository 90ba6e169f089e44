package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/controller/controllertest"
	"github.com/degraded/degraded/internal/daemon/daemontest"
	"github.com/degraded/degraded/levels"
)

// cliFleet is the daemon's fleet service without etcd: a commit is an
// increment of the revision, applied to the controller at once.
type cliFleet struct {
	ctl *controller.Controller
	mu  sync.Mutex
	rev int64
}

func (f *cliFleet) next() int64 { f.mu.Lock(); defer f.mu.Unlock(); f.rev++; return f.rev }

func (f *cliFleet) SetOverride(_ context.Context, r controller.OverrideRequest) error {
	now := time.Now().UTC()
	_, err := f.ctl.ApplyFleet(controller.FleetUpdate{Override: &controller.Override{Level: r.Level, Mode: r.Mode, Reason: r.Reason,
		SetAt: now, ExpiresAt: now.Add(r.TTL), Actor: r.Actor}, TTL: r.TTL, Revision: f.next()})
	return err
}

func (f *cliFleet) ClearOverride(context.Context, string) error {
	_, err := f.ctl.ApplyFleet(controller.FleetUpdate{Revision: f.next()})
	return err
}

func (f *cliFleet) Document(context.Context, int) api.FleetDocument {
	rate := 10.0
	return api.FleetDocument{Name: "shop", Instance: "web-1", Connected: true, Override: f.ctl.FleetOverride(),
		Aggregator:     &api.FleetAggregator{Instance: "web-2", Term: 4711, At: time.Now().Add(-time.Second)},
		InstancesTotal: 3,
		Instances: []api.FleetInstance{
			{Instance: "web-1", Level: "Major", Index: 2, Source: "fleet", Signals: json.RawMessage(`{"cpu_percent":12.5,"memory_percent":null,"error_rate_percent":9}`), SeenAt: time.Now().Add(-2 * time.Second)},
			{Instance: "web-2", Level: "Major", Index: 2, Source: "fleet", Signals: json.RawMessage(`{}`), SeenAt: time.Now().Add(-time.Second)},
		},
		Levels: map[string]int{"Major": 2}, ErrorRatePercent: &rate, WindowAttempts: 1000, WindowFailures: 100}
}

func (f *cliFleet) History(context.Context, int) ([]api.FleetAuditEntry, error) { return nil, nil }

func newFleetCLIDaemon(t *testing.T) (*controller.Controller, []string) {
	t.Helper()
	tab, err := levels.NewTable([]levels.Level{
		{Name: "Minor", PriorityThreshold: 10, Thresholds: levels.Thresholds{levels.CPU: 60}},
		{Name: "Major", PriorityThreshold: 50, Thresholds: levels.Thresholds{levels.CPU: 80}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := controller.New(controller.Options{Table: tab, Fleet: &controller.FleetInfo{Name: "shop", Instance: "web-1", Connected: func() bool { return true }}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, ctl)
	h := api.NewServer(api.Deps{Controller: ctl, Outcomes: &cliWindow{}, Tokens: func() api.Tokens { return api.Tokens{Admin: "adm"} },
		Fleet: &cliFleet{ctl: ctl}})
	srv := daemontest.NewServer(t, h.Handler())
	daemontest.RunAPI(t, h)
	return ctl, []string{"DEGRADED_ADDR=" + srv.URL, "DEGRADED_TOKEN=adm"}
}

func TestFleetOverrideCommands(t *testing.T) {
	ctl, env := newFleetCLIDaemon(t)
	code, out, errOut := runCLI(t, env, "override", "set", "major", "--ttl", "15m", "--reason", "INC-42", "--fleet")
	if code != 0 || !strings.Contains(out, "fleet override pin Major until") || !strings.Contains(out, "(INC-42) committed for fleet shop") {
		t.Fatalf("override set --fleet: exit %d %q %q", code, out, errOut)
	}
	if st := ctl.State(); st.Level != "Major" || st.Source != "fleet" {
		t.Fatalf("daemon after set --fleet: %s from %s, want Major from fleet", st.Level, st.Source)
	}

	code, out, _ = runCLI(t, env, "override", "clear")
	if code != 0 || !strings.Contains(out, "no override was active; fleet override still in force (pin Major until") {
		t.Errorf("a local clear under a fleet override: exit %d %q, want it to say the fleet override remains", code, out)
	}
	if st := ctl.State(); st.Source != "fleet" {
		t.Errorf("a local clear changed the source to %s", st.Source)
	}

	code, out, _ = runCLI(t, env, "fleet", "status")
	for _, want := range []string{
		"Fleet       shop (this instance: web-1; connected to etcd)",
		"Aggregator  web-2, term 4711, published 1s ago",
		"Override    fleet pin Major until",
		"by admin (INC-42)",
		"Errors      10.00% (100 failures of 1000 attempts over 2 instances)",
		"Listed      2 of 3 instances (--limit to see more)",
		"INSTANCE  LEVEL  SOURCE  SIGNALS                    AGE",
		"web-1     Major  fleet   cpu 12.5% error_rate 9.0%  2s ago",
		"web-2     Major  fleet   -                          1s ago",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("fleet status (exit %d) lacks %q:\n%s", code, want, out)
		}
	}

	code, out, _ = runCLI(t, env, "override", "clear", "--fleet")
	if code != 0 || !strings.Contains(out, "fleet override cleared for fleet shop") {
		t.Errorf("override clear --fleet: exit %d %q", code, out)
	}
	if st := ctl.State(); st.Source != "auto" || st.Reason != "fleet override cleared: INC-42" {
		t.Errorf("after clear --fleet: source %s reason %q", st.Source, st.Reason)
	}
}

func TestFleetStatusWhenFleetModeIsOff(t *testing.T) {
	d := newCLIDaemon(t)
	code, _, errOut := runCLI(t, d.env, "fleet", "status")
	if code != 1 || !strings.Contains(errOut, "answered 404: fleet mode is off") {
		t.Errorf("fleet status against a daemon not in fleet mode: exit %d %q", code, errOut)
	}
	code, _, errOut = runCLI(t, d.env, "override", "set", "Major", "--ttl", "1m", "--reason", "x", "--fleet")
	if code != 1 || !strings.Contains(errOut, "fleet mode is off") {
		t.Errorf("override set --fleet with fleet mode off: exit %d %q", code, errOut)
	}
	if code, _, _ := runCLI(t, d.env, "override", "clear", "--fleet"); code != 1 {
		t.Errorf("override clear --fleet with fleet mode off: exit %d, want 1", code)
	}
}
