package levels

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// cpuTable: Minor 60, Moderate 70, Major 80 on cpu; Major also on
// error_rate (10%), so the error rate has a say in leaving Major.
func cpuTable(t *testing.T) *Table {
	t.Helper()
	tab, err := NewTable([]Level{
		{Name: "Minor", PriorityThreshold: 10, Thresholds: Thresholds{CPU: 60}},
		{Name: "Moderate", PriorityThreshold: 30, Thresholds: Thresholds{CPU: 70}},
		{Name: "Major", PriorityThreshold: 50, Thresholds: Thresholds{CPU: 80, ErrorRate: 10}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// cpuAt is a sample with cpu at v (available), or cpu in state st without
// a value when v < 0, and the error rate available at 0%.
func cpuAt(v float64, st SignalState) Sample {
	s := Sample{Values: map[Signal]float64{ErrorRate: 0}, States: map[Signal]SignalState{ErrorRate: Available, CPU: st}}
	if v >= 0 {
		s.Values[CPU] = v
		s.States[CPU] = Available
	}
	return s
}

// TestNext is a step table over fixed times, in the manner of
// x/time/rate's tests: each step feeds one sample at a moment and expects
// the automatic level after it.
func TestNext(t *testing.T) {
	const m = time.Minute
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		at     time.Duration
		s      Sample
		want   int
		reason string // substring of the move's reason, when it moved
	}
	tests := []struct {
		name  string
		rules Rules
		steps []step
	}{
		{"escalates straight to the recommendation", Rules{MinimumLevelDuration: m}, []step{
			{0, cpuAt(85, Available), 3, "cpu 85.00% > 80% (Major)"},
		}},
		{"recovers one level per dwell", Rules{MinimumLevelDuration: m, Hysteresis: 0.1}, []step{
			{0, cpuAt(85, Available), 3, ""},
			{30 * time.Second, cpuAt(5, Available), 3, ""},
			{m, cpuAt(5, Available), 2, "recovered: all signals below Major thresholds less 10% hysteresis"},
			{m + time.Second, cpuAt(5, Available), 2, ""},
			{2 * m, cpuAt(5, Available), 1, ""},
		}},
		{"escalate_after takes the lowest ask of the streak", Rules{EscalateAfter: 3}, []step{
			{0, cpuAt(85, Available), 0, ""},
			{time.Second, cpuAt(75, Available), 0, ""},
			{2 * time.Second, cpuAt(95, Available), 2, ""},
		}},
		{"a failed cpu holds Major for blind_hold, then the error rate decides", Rules{BlindHold: 5 * m}, []step{
			{0, cpuAt(85, Available), 3, ""},
			{m, cpuAt(-1, Failed), 3, ""},
			{5*m + 3*time.Second, cpuAt(-1, Failed), 2, "; cpu failed for 5m3s"},
		}},
		{"warming holds like failed", Rules{BlindHold: 5 * m}, []step{
			{0, cpuAt(85, Available), 3, ""},
			{m, cpuAt(-1, Warming), 3, ""},
		}},
		{"absent and off never hold", Rules{BlindHold: 5 * m}, []step{
			{0, cpuAt(85, Available), 3, ""},
			{m, cpuAt(-1, Absent), 2, "recovered: all signals below Major"},
			{2 * m, cpuAt(-1, Off), 1, ""},
		}},
		{"manual only never moves", Rules{ManualOnly: true}, []step{
			{0, cpuAt(99, Available), 0, ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := cpuTable(t)
			a := Auto{Since: t0}
			for i, st := range tt.steps {
				var mv Move
				a, mv = Next(a, tab, st.s, t0.Add(st.at), tt.rules)
				if a.Level != st.want {
					t.Fatalf("step %d (%v): level %d, want %d (move %+v)", i, st.at, a.Level, st.want, mv)
				}
				if st.reason != "" && (!mv.Moved() || !strings.Contains(mv.Reason, st.reason)) {
					t.Fatalf("step %d (%v): move %+v, want a move whose reason contains %q", i, st.at, mv, st.reason)
				}
			}
		})
	}
}

// TestNextIsPure: Next changes nothing it was given, so replay can run it
// over recorded samples and get the controller's answers.
func TestNextIsPure(t *testing.T) {
	tab := cpuTable(t)
	a := Auto{Level: 3}
	s := cpuAt(5, Available)
	before := s.Clone()
	b, _ := Next(a, tab, s, time.Unix(100, 0), Rules{})
	if a.Level != 3 || !a.Seen[CPU].IsZero() {
		t.Errorf("Next changed its argument: %+v", a)
	}
	if d := cmp.Diff(before, s, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("Next changed the sample (-before +after):\n%s", d)
	}
	if b.Level != 2 || b.Seen[CPU] != time.Unix(100, 0) {
		t.Errorf("result %+v, want Moderate with cpu seen at 100", b)
	}
}

func TestSampleJSON(t *testing.T) {
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	s := Sample{
		Values:   map[Signal]float64{CPU: 12.5, ErrorRate: 6.1, CPUPressure: 45, "queue_depth": 1234},
		Recovery: map[Signal]float64{CPUPressure: 20},
		States: map[Signal]SignalState{CPU: Available, ErrorRate: Warming, Memory: Failed, Latency: Absent,
			CPUPressure: Available, MemoryPressure: Off, IOPressure: Off, "queue_depth": Available, "gone": Failed},
		WindowAttempts: 1200, WindowFailures: 73, LatencyObservations: 3, SampledAt: at,
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"cpu_percent":12.5,"cpu_pressure_avg60_percent":20,"cpu_pressure_percent":45,"custom":{"gone":null,"queue_depth":1234},` +
		`"error_rate_percent":6.1,"io_pressure_avg60_percent":null,"io_pressure_percent":null,"latency_ms":null,"latency_observations":3,` +
		`"memory_percent":null,"memory_pressure_avg60_percent":null,"memory_pressure_percent":null,"sampled_at":"2026-12-01T08:00:00Z",` +
		`"status":{"cpu":"available","cpu_pressure":"available","error_rate":"warming","gone":"failed","io_pressure":"off","latency":"absent",` +
		`"memory":"failed","memory_pressure":"off","queue_depth":"available"},"window_attempts":1200,"window_failures":73}`
	if string(b) != want {
		t.Errorf("JSON\n got %s\nwant %s", b, want)
	}
	var back Sample
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(s, back); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	if b, _ := json.Marshal(Sample{}); !strings.Contains(string(b), `"sampled_at":null`) || !strings.Contains(string(b), `"status":null`) {
		t.Errorf("before the first health check: %s, want sampled_at and status null", b)
	}
}

// TestSampleJSONFromNewerDaemon: a document from a newer daemon, with a
// state name and a key this one does not know, still reads; the unknown
// state leaves its signal out rather than guessing one.
func TestSampleJSONFromNewerDaemon(t *testing.T) {
	doc := `{"cpu_percent":12.5,"gpu_percent":99,"custom":{},"sampled_at":"2026-12-01T08:00:00Z",` +
		`"status":{"cpu":"available","memory":"hibernating"},"window_attempts":0,"window_failures":0}`
	var s Sample
	if err := json.Unmarshal([]byte(doc), &s); err != nil {
		t.Fatalf("a newer daemon's signals: %v, want it read", err)
	}
	want := map[Signal]SignalState{CPU: Available}
	if d := cmp.Diff(want, s.States); d != "" {
		t.Errorf("states (-want +got):\n%s", d)
	}
	if v, ok := s.Value(CPU); !ok || v != 12.5 {
		t.Errorf("cpu = %v, %v; want 12.5", v, ok)
	}
}

func TestReasonsOfEverySignal(t *testing.T) {
	tab, err := NewTableWith([]Level{{Name: "Major", PriorityThreshold: 50, Thresholds: Thresholds{
		Latency: 500, CPUPressure: 40, "queue_depth": 1000,
	}}}, TableOptions{Custom: []Signal{"queue_depth"}, LatencyQuantile: 0.999})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		values map[Signal]float64
		want   string
	}{
		{map[Signal]float64{Latency: 812.4}, "latency p99.9 812ms > 500ms (Major)"},
		{map[Signal]float64{CPUPressure: 45}, "cpu_pressure 45.00% > 40% (Major)"},
		{map[Signal]float64{"queue_depth": 1234}, "queue_depth 1234 > 1000 (Major)"},
	} {
		_, why, ok := tab.Recommend(Sample{Values: tt.values}, 1)
		if !ok || why.String() != tt.want {
			t.Errorf("%v: reason %q, want %q", tt.values, why.String(), tt.want)
		}
	}
	if got := QuantileLabel(0.99); got != "p99" {
		t.Errorf("QuantileLabel(0.99) = %q", got)
	}
}

func TestCustomSignalsInTheTable(t *testing.T) {
	if _, err := NewTableWith([]Level{{Name: "A", Thresholds: Thresholds{"queue_depth": 1}}}, TableOptions{}); err == nil {
		t.Error("a threshold for an unconfigured custom signal was accepted")
	}
	for _, bad := range []Signal{"cpu", "Queue", "9x", ""} {
		if _, err := NewTableWith([]Level{{Name: "A"}}, TableOptions{Custom: []Signal{bad}}); err == nil {
			t.Errorf("custom signal %q accepted", bad)
		}
	}
	tab, err := NewTableWith([]Level{{Name: "A"}}, TableOptions{Custom: []Signal{"queue_depth"}})
	if err != nil || !tab.Custom("queue_depth") || tab.Custom(CPU) || tab.Signals()[len(tab.Signals())-1] != "queue_depth" {
		t.Fatalf("table %v, %v: want queue_depth last among its signals", tab, err)
	}
}

// TestPressureRecoveryNeedsAvg60: a ten-second lull (avg10 low) during a
// long stall (avg60 high) is not a recovery.
func TestPressureRecoveryNeedsAvg60(t *testing.T) {
	tab, err := NewTable([]Level{{Name: "Major", PriorityThreshold: 50, Thresholds: Thresholds{CPUPressure: 40}}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(0, 0)
	a, _ := Next(Auto{Since: t0}, tab, Sample{Values: map[Signal]float64{CPUPressure: 45}, States: map[Signal]SignalState{CPUPressure: Available}}, t0, Rules{Hysteresis: 0.1})
	if a.Level != 1 {
		t.Fatalf("avg10 45 > 40: level %d, want Major", a.Level)
	}
	lull := Sample{Values: map[Signal]float64{CPUPressure: 5}, Recovery: map[Signal]float64{CPUPressure: 38}, States: map[Signal]SignalState{CPUPressure: Available}}
	if b, _ := Next(a, tab, lull, t0.Add(time.Minute), Rules{Hysteresis: 0.1}); b.Level != 1 {
		t.Fatalf("avg10 5 but avg60 38 > 36: level %d, want Major held", b.Level)
	}
	lull.Recovery[CPUPressure] = 30
	if b, _ := Next(a, tab, lull, t0.Add(time.Minute), Rules{Hysteresis: 0.1}); b.Level != 0 {
		t.Fatalf("avg10 5 and avg60 30: level %d, want Normal", b.Level)
	}
}

// TestJitterStretchesTheDwell: a draw r waits the dwell x (1 + r), and
// NotBefore holds a step down after an override ended.
func TestJitterStretchesTheDwell(t *testing.T) {
	tab := cpuTable(t)
	t0 := time.Unix(0, 0)
	r := Rules{MinimumLevelDuration: time.Minute}
	a := Auto{Level: 3, Since: t0, JitterR: 0.5}
	if b, _ := Next(a, tab, cpuAt(5, Available), t0.Add(80*time.Second), r); b.Level != 3 {
		t.Fatalf("80s into a 1m dwell with r 0.5: level %d, want Major held until 90s", b.Level)
	}
	if b, _ := Next(a, tab, cpuAt(5, Available), t0.Add(90*time.Second), r); b.Level != 2 {
		t.Fatalf("at 90s: level %d, want a step down", b.Level)
	}
	a.NotBefore = t0.Add(2 * time.Minute)
	if b, _ := Next(a, tab, cpuAt(5, Available), t0.Add(100*time.Second), r); b.Level != 3 {
		t.Fatalf("before NotBefore: level %d, want Major held", b.Level)
	}
	if got := a.RecoveryAt(r); !got.Equal(a.NotBefore) {
		t.Fatalf("RecoveryAt = %v, want NotBefore %v", got, a.NotBefore)
	}
}
