package levels

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
	if d := cmp.Diff(before, s); d != "" {
		t.Errorf("Next changed the sample (-before +after):\n%s", d)
	}
	if b.Level != 2 || b.Seen[CPU] != time.Unix(100, 0) {
		t.Errorf("result %+v, want Moderate with cpu seen at 100", b)
	}
}

func TestSampleJSON(t *testing.T) {
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	s := Sample{
		Values:         map[Signal]float64{CPU: 12.5, ErrorRate: 6.1},
		States:         map[Signal]SignalState{CPU: Available, ErrorRate: Warming, Memory: Failed},
		WindowAttempts: 1200, WindowFailures: 73, SampledAt: at,
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"cpu_percent":12.5,"error_rate_percent":6.1,"memory_percent":null,"sampled_at":"2026-12-01T08:00:00Z",` +
		`"status":{"cpu":"available","error_rate":"warming","memory":"failed"},"window_attempts":1200,"window_failures":73}`
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
