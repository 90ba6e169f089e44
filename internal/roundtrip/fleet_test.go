package roundtrip_test

import (
	"testing"
	"time"

	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/client"
	"github.com/degraded/degraded/controller"
)

// fullFleet is an api.FleetDocument with every field set, so that its
// JSON holds every key GET /v1/fleet can send.
func fullFleet() api.FleetDocument {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rate := 2.5
	return api.FleetDocument{
		Name: "shop", Instance: "web-1", Connected: true,
		Override: &controller.FleetOverride{Override: controller.Override{Level: "Major", Mode: controller.ModeFloor, Reason: "INC-7",
			SetAt: at, ExpiresAt: at.Add(time.Hour), Actor: "alice"}, ModRevision: 41},
		OverrideRefused:  &api.FleetRefusal{Revision: 42, Level: "Panic", Actor: "bob", Error: "unknown level", At: at},
		Aggregator:       &api.FleetAggregator{Instance: "web-2", Term: 7, At: at, Stale: true},
		Instances:        []api.FleetInstance{{Instance: "web-1", Level: "Major", Index: 3, Source: "fleet", Signals: map[string]any{"cpu_percent": 91.0}, SeenAt: at}},
		InstancesTotal:   12,
		Levels:           map[string]int{"Major": 11, "Normal": 1},
		ErrorRatePercent: &rate,
		WindowAttempts:   4000,
		WindowFailures:   100,
	}
}

// TestClientFleetMirrorsTheDaemon: the client's copy of the fleet view
// (its module imports nothing of the daemon's) decodes every key the
// daemon sends, names none it does not, and encodes it alike.
func TestClientFleetMirrorsTheDaemon(t *testing.T) {
	mirrors[client.Fleet](t, fullFleet(), "fleet view")
}
