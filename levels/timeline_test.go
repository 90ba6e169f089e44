package levels

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// A line written as JSON and read back gives the sample it was made from:
// replay judges exactly what the controller judged.
func TestLineRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s := Sample{
		Values:   map[Signal]float64{CPU: 91.5, ErrorRate: 12, CPUPressure: 3},
		Recovery: map[Signal]float64{CPUPressure: 45},
		States: map[Signal]SignalState{CPU: Available, ErrorRate: Warming, Memory: Failed, CPUPressure: Available,
			Latency: Absent, Signal("queue_depth"): Off},
		WindowAttempts: 100, WindowFailures: 12, SampledAt: at,
	}
	l := NewLine(at, TriggerTick, s)
	l.Window.LatencyCounts = []int64{0, 0, 0, 0, 0, 0, 7, 0, 3, 0, 0, 0, 0, 0}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"v", "at", "trigger", "signals", "window", "published", "recommended", "source", "override", "fleet_override", "jitter_r"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("line %s lacks the DESIGN.md key %q", b, key)
		}
	}
	var back Line
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	want := s
	want.LatencyObservations = 10
	if d := cmp.Diff(want, back.Sample(), cmpopts.EquateEmpty()); d != "" {
		t.Errorf("sample read back from %s (-want +got):\n%s", b, d)
	}
}

// An event escalates at once, straight to the recommendation, but only
// upward, only with escalate_after 1 and once escalation_delay has passed;
// it never steps down and is not a tick for streaks.
func TestEvent(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tab := cpuTable(t)
	tests := []struct {
		name  string
		a     Auto
		s     Sample
		rules Rules
		at    time.Duration
		want  int
	}{
		{"escalates straight to the recommendation", Auto{}, cpuAt(85, Available), Rules{}, 0, 3},
		{"never steps down", Auto{Level: 3}, cpuAt(10, Available), Rules{}, time.Hour, 3},
		{"waits for escalate_after ticks", Auto{}, cpuAt(85, Available), Rules{EscalateAfter: 2}, 0, 0},
		{"waits for escalation_delay", Auto{Level: 1, Since: t0}, cpuAt(85, Available), Rules{EscalationDelay: time.Minute}, 30 * time.Second, 1},
		{"after escalation_delay", Auto{Level: 1, Since: t0}, cpuAt(85, Available), Rules{EscalationDelay: time.Minute}, time.Minute, 3},
		{"manual only", Auto{}, cpuAt(85, Available), Rules{ManualOnly: true}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, m := Event(tt.a, tab, tt.s, t0.Add(tt.at), tt.rules)
			if got.Level != tt.want || m.To != tt.want {
				t.Errorf("Event: level %d (move to %d), want %d", got.Level, m.To, tt.want)
			}
			if got.Recommended != 3 && tt.s.Values[CPU] > 80 {
				t.Errorf("Event: recommended %d, want 3 (Major)", got.Recommended)
			}
		})
	}
}
