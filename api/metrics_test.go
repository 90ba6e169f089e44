package api

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/levels"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func gaugeValue(t *testing.T, r *rig, name string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestMetricsLint(t *testing.T) {
	r := newRig(t, Deps{})
	r.fail(t, 85, 15)
	problems, err := testutil.GatherAndLint(r.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

func TestMetricsFollowTheLevel(t *testing.T) {
	r := newRig(t, Deps{})
	r.fail(t, 85, 15) // Normal -> Major
	w := r.do("GET", "/metrics", "")
	if w.Code != 200 {
		t.Fatalf("/metrics: %d", w.Code)
	}
	body := w.Body.String()
	for _, want := range []string{
		`degraded_level 3`,
		`degraded_level_info{level="Major"} 1`,
		`degraded_level_info{level="Normal"} 0`,
		`degraded_recommended_level 3`,
		`degraded_priority_threshold 50`,
		`degraded_level_transitions_total{from="Normal",source="auto",to="Major"} 1`,
		`degraded_outcomes_total{result="failure"} 15`,
		`degraded_outcomes_total{result="success"} 85`,
		`degraded_signal_error_rate_percent 15`,
		`degraded_signal_cpu_percent NaN`,
		`degraded_override_active 0`,
		`degraded_health_check_duration_seconds_count 2`,
		`degraded_sample_errors_total{signal="cpu"} 0`,
		`degraded_config_last_reload_successful 1`,
		`go_goroutines `,
		`process_`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	st := decodeBody[controller.State](t, r.do("PUT", "/v1/override", `{"level":"Minor","mode":"pin","ttl":"1m","reason":"x"}`))
	if got, want := gaugeValue(t, r, "degraded_override_expiry_timestamp_seconds"), float64(st.Override.ExpiresAt.UnixMilli())/1e3; got != want {
		t.Errorf("override expiry gauge %v, want %v", got, want)
	}
	if err := testutil.CollectAndCompare(r.reg, strings.NewReader(`
# HELP degraded_override_active 1 while an operator override is active.
# TYPE degraded_override_active gauge
degraded_override_active 1
`), "degraded_override_active"); err != nil {
		t.Error(err)
	}
	if !strings.Contains(r.do("GET", "/metrics", "").Body.String(), `degraded_level_transitions_total{from="Major",source="override",to="Minor"} 1`) {
		t.Error("an override's level change must count as a transition with source override")
	}
}

// TestCountersExportedAtZero: a counter whose labels are known at start
// is exported at 0 for each of them, so that increase() and the alerts see
// its first event.
func TestCountersExportedAtZero(t *testing.T) {
	r := newRig(t, Deps{})
	body := r.do("GET", "/metrics", "").Body.String()
	var want []string
	for _, s := range []string{"auto", "override", "fleet", "config", "restart"} {
		want = append(want, `degraded_level_changes_total{source="`+s+`"} 0`)
	}
	for _, s := range []string{"write_timeout", "write_error", "limit", "shutdown"} {
		want = append(want, `degraded_sse_dropped_total{reason="`+s+`"} 0`)
	}
	for _, s := range []string{"outcomes", "signals", "override", "fleet_override", "reload"} {
		want = append(want, `degraded_auth_failures_total{route="`+s+`"} 0`)
	}
	want = append(want, "degraded_blind 0")
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("/metrics at start lacks %q", w)
		}
	}
}

// TestLevelChangesCounted: every change of the published level counts in
// level_changes_total{source}, beside level_transitions_total.
func TestLevelChangesCounted(t *testing.T) {
	r := newRig(t, Deps{})
	r.fail(t, 85, 15) // Normal -> Major, auto
	if _, err := r.c.SetOverride(controller.OverrideRequest{Level: "Minor", Mode: controller.ModePin, TTL: time.Minute, Reason: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.SetOverride(controller.OverrideRequest{Level: "Minor", Mode: controller.ModePin, TTL: 2 * time.Minute, Reason: "y"}); err != nil {
		t.Fatal(err) // the same level: not a level change
	}
	for src, want := range map[string]float64{"auto": 1, "override": 1, "fleet": 0, "config": 0, "restart": 0} {
		if got := testutil.ToFloat64(r.m.levelChanges.WithLabelValues(src)); got != want {
			t.Errorf(`level_changes_total{source=%q} = %v, want %v`, src, got, want)
		}
	}
}

// TestBlindAndSignalStates: the published state's blindness and each
// signal's state reach degraded_blind and degraded_signal_state.
func TestBlindAndSignalStates(t *testing.T) {
	r := newRig(t, Deps{})
	r.m.Published(&controller.State{Level: "Normal", Blind: true, Signals: levels.Sample{
		SampledAt: time.Now(),
		States:    map[levels.Signal]levels.SignalState{levels.CPU: levels.Failed, levels.Memory: levels.Off, levels.ErrorRate: levels.Warming},
	}})
	if got := gaugeValue(t, r, "degraded_blind"); got != 1 {
		t.Errorf("degraded_blind = %v for a blind state, want 1", got)
	}
	for _, c := range []struct {
		signal, state string
		want          float64
	}{{"cpu", "failed", 1}, {"cpu", "available", 0}, {"error_rate", "warming", 1}, {"memory", "off", 1}} {
		if got := testutil.ToFloat64(r.m.signalState.WithLabelValues(c.signal, c.state)); got != c.want {
			t.Errorf("degraded_signal_state{signal=%q,state=%q} = %v, want %v", c.signal, c.state, got, c.want)
		}
	}
}
