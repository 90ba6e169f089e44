package daemon

import (
	"slices"
	"testing"
	"time"

	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/levels"
	"github.com/degraded/degraded/signals"
	"github.com/google/go-cmp/cmp"
)

// TestSourceNamesAgree: config validates the source names that signals
// builds samplers for; the two lists are one.
func TestSourceNamesAgree(t *testing.T) {
	var got []string
	for _, s := range signals.Sources() {
		got = append(got, string(s))
	}
	if !slices.Equal(got, config.Sources()) {
		t.Errorf("signals.Sources() = %v, config.Sources() = %v: they must be the same", got, config.Sources())
	}
}

func TestSignalsFromConfig(t *testing.T) {
	c := config.Default()
	if len(pushedSignals(c)) != 0 || len(querySpecs(c)) != 0 {
		t.Errorf("defaults: pushed %v, queries %v; want none", pushedSignals(c), querySpecs(c))
	}
	c.Signals.Custom = []config.CustomSignal{{Name: "queue_depth", TTL: time.Minute}, {Name: "backlog", TTL: 30 * time.Second}}
	c.Signals.Prometheus.Queries = []config.QuerySignal{{Name: "p95", Query: "max(p95)", Interval: 15 * time.Second}}
	want := []signals.PushedSignal{{Name: "queue_depth", TTL: time.Minute}, {Name: "backlog", TTL: 30 * time.Second}}
	if diff := cmp.Diff(want, pushedSignals(c)); diff != "" {
		t.Errorf("pushed (-want +got):\n%s", diff)
	}
	wantQ := []signals.QuerySpec{{Name: levels.Signal("p95"), Query: "max(p95)", Interval: 15 * time.Second}}
	if diff := cmp.Diff(wantQ, querySpecs(c)); diff != "" {
		t.Errorf("queries (-want +got):\n%s", diff)
	}
}
