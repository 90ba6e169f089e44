package roundtrip_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/degraded/degraded/client"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/levels"
)

// fullState is a controller.State with every published field set, so
// that its JSON holds every key the daemon can send.
func fullState() controller.State {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	recovery := at.Add(5 * time.Minute)
	sampled := at.Add(-time.Second)
	return controller.State{
		Level:              "Major",
		Index:              3,
		PriorityThreshold:  50,
		DisabledFeatures:   []string{"recommendations", "search"},
		Source:             "override",
		Recommended:        "Moderate",
		Reason:             "override set: pin Major for 1h0m0s: INC-42",
		Since:              at,
		EarliestRecoveryAt: &recovery,
		Sequence:           42,
		Override: &controller.Override{
			Level:     "Major",
			Mode:      controller.ModePin,
			Reason:    "INC-42",
			SetAt:     at,
			ExpiresAt: at.Add(time.Hour),
			Actor:     "alice",
		},
		Partial: &levels.Partial{From: 30, Fraction: 0.25},
		Shadow:  true,
		Signals: levels.Sample{
			Values: map[levels.Signal]float64{levels.CPU: 91.2, levels.Memory: 40.5, levels.ErrorRate: 12, levels.Latency: 812,
				levels.CPUPressure: 45, levels.MemoryPressure: 3, levels.IOPressure: 7, "queue_depth": 1234},
			Recovery: map[levels.Signal]float64{levels.CPUPressure: 30, levels.MemoryPressure: 2, levels.IOPressure: 6},
			States: map[levels.Signal]levels.SignalState{levels.CPU: levels.Available, levels.Memory: levels.Available,
				levels.ErrorRate: levels.Warming, levels.Latency: levels.Available, "queue_depth": levels.Available},
			WindowAttempts:      1000,
			WindowFailures:      120,
			LatencyObservations: 990,
			SampledAt:           sampled,
			ErrorRateLabel:      "fleet error_rate", // not published
			ErrorRateNote:       " over 7 instances",
		},
		Fleet: &controller.FleetState{Name: "shop", Instance: "web-1", Connected: true,
			Override: &controller.FleetOverride{Override: controller.Override{Level: "Major", Mode: controller.ModePin,
				Reason: "INC-41", SetAt: at, ExpiresAt: at.Add(time.Hour), Actor: "bob"}, TTL: time.Hour, ModRevision: 17}},
		Blind:   true, // not published (json:"-"), set so that no field is left zero
		JitterR: 0.05, // not published either
	}
}

// TestFullStateSetsEveryField keeps fullState complete: a field added to
// controller.State must be set there, so that the next test sees it.
func TestFullStateSetsEveryField(t *testing.T) {
	var zero func(path string, v reflect.Value)
	zero = func(path string, v reflect.Value) {
		if v.IsZero() {
			t.Errorf("fullState leaves %s unset: set it, and mirror it in client.State if it is published", path)
			return
		}
		switch v.Kind() {
		case reflect.Pointer:
			zero(path, v.Elem())
		case reflect.Struct:
			if v.Type() == reflect.TypeFor[time.Time]() {
				return
			}
			for i := range v.NumField() {
				if f := v.Type().Field(i); f.IsExported() { // unexported fields are never published
					zero(path+"."+f.Name, v.Field(i))
				}
			}
		}
	}
	zero("State", reflect.ValueOf(fullState()))
}

// TestClientStateMirrorsTheDaemon decodes the daemon's state document into
// client.State with unknown fields refused, then encodes it again: the
// client must neither miss a field the daemon publishes nor name one it
// does not.
func TestClientStateMirrorsTheDaemon(t *testing.T) {
	mirrors[client.State](t, fullState(), "state document")
}

// mirrors decodes the daemon's encoding of v into a T with unknown fields
// refused, then encodes it again: the client's copy must neither miss a
// key the daemon sends nor name one it does not. what names the document.
func mirrors[T any](t *testing.T, v any, what string) {
	t.Helper()
	daemon, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(daemon))
	dec.DisallowUnknownFields()
	var c T
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("%T cannot hold the daemon's %s: %v\n%s", c, what, err, daemon)
	}
	again, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	if err := json.Unmarshal(daemon, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(again, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%T encodes the %s differently:\n got %s\nwant %s", c, what, again, daemon)
	}
}
