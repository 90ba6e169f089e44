package levels

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func table(t *testing.T) *Table {
	t.Helper()
	tab, err := NewTable([]Level{
		{Name: "Minor", PriorityThreshold: 10, Thresholds: Thresholds{ErrorRate: 1, CPU: 60, Memory: 60}, Disable: []string{"recommendations"}},
		{Name: "Moderate", PriorityThreshold: 30, Thresholds: Thresholds{ErrorRate: 5, CPU: 70}}, // memory never triggers Moderate
		{Name: "Major", PriorityThreshold: 50, Thresholds: Thresholds{ErrorRate: 10, CPU: 80, Memory: 80}, Disable: []string{"search", "recommendations"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func TestRecommend(t *testing.T) {
	tab := table(t)
	tests := []struct {
		name   string
		s      Sample
		scale  float64
		want   int
		reason string
	}{
		{"nothing available", Sample{}, 1, 0, ""},
		{"at the threshold is not over it", Sample{Values: map[Signal]float64{CPU: 60}}, 1, 0, ""},
		{"just over", Sample{Values: map[Signal]float64{CPU: 60.5}}, 1, 1, "cpu 60.50% > 60% (Minor)"},
		{"most severe signal wins", Sample{Values: map[Signal]float64{CPU: 61, ErrorRate: 12}}, 1, 3, "error_rate 12.00% > 10% (Major)"},
		{"error rate reason", Sample{Values: map[Signal]float64{ErrorRate: 6.1}}, 1, 2, "error_rate 6.10% > 5% (Moderate)"},
		{"null threshold never triggers", Sample{Values: map[Signal]float64{Memory: 75}}, 1, 1, "memory 75.00% > 60% (Minor)"},
		{"scaled for hysteresis", Sample{Values: map[Signal]float64{CPU: 65}}, 0.9, 2, "cpu 65.00% > 63% (Moderate)"},
		{"scaled below", Sample{Values: map[Signal]float64{CPU: 53}}, 0.9, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why, ok := tab.Recommend(tt.s, tt.scale)
			if got != tt.want || ok != (tt.want > 0) {
				t.Fatalf("Recommend = %d (ok %v), want %d", got, ok, tt.want)
			}
			if ok && why.String() != tt.reason {
				t.Errorf("reason %q, want %q", why.String(), tt.reason)
			}
		})
	}
}

func TestAdmitsAndFeatures(t *testing.T) {
	tab := table(t)
	if !tab.Level(0).Admits(0) || tab.Level(0).PriorityThreshold != 0 {
		t.Error("Normal must admit everything")
	}
	if tab.Level(2).Admits(29) || !tab.Level(2).Admits(30) {
		t.Error("Moderate must admit priority >= 30 only")
	}
	if !tab.Level(3).Admits(PriorityCritical) {
		t.Error("PriorityCritical must be admitted")
	}
	for i, want := range [][]string{{}, {"recommendations"}, {"recommendations"}, {"recommendations", "search"}} {
		if d := cmp.Diff(want, tab.DisabledFeatures(i)); d != "" {
			t.Errorf("DisabledFeatures(%d) (-want +got):\n%s", i, d)
		}
	}
}

func TestTableLookup(t *testing.T) {
	tab := table(t)
	if i, err := tab.Index("Major"); err != nil || i != 3 {
		t.Errorf("Index(Major) = %d, %v", i, err)
	}
	if i, err := tab.Index("major"); err != nil || i != 3 {
		t.Errorf("Index(major) = %d, %v; names match case-insensitively", i, err)
	}
	if _, err := tab.Index("Majr"); !errors.Is(err, ErrUnknownLevel) {
		t.Errorf("Index(Majr) err = %v, want ErrUnknownLevel", err)
	}
	if tab.Len() != 4 || tab.Clamp(9) != 3 || tab.Clamp(-1) != 0 || tab.Level(9).Name != "Major" {
		t.Error("Clamp must keep indexes inside the table")
	}
}

func TestNewTableRejects(t *testing.T) {
	for name, ls := range map[string][]Level{
		"empty":                     nil,
		"Normal":                    {{Name: "Normal"}},
		"duplicate":                 {{Name: "A"}, {Name: "A"}},
		"same name in another case": {{Name: "Major"}, {Name: "MAJOR"}},
		"normal":                    {{Name: "normal"}},
		"too many":                  make([]Level, MaxLevels+1),
	} {
		if _, err := NewTable(ls); err == nil {
			t.Errorf("%s: NewTable accepted it", name)
		}
	}
}

func TestRecoveryReason(t *testing.T) {
	if got, want := RecoveryReason("Moderate", 0.1), "recovered: all signals below Moderate thresholds less 10% hysteresis"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestMapRemovedLevel(t *testing.T) {
	tab := table(t) // Normal, Minor 10, Moderate 30, Major 50
	tests := []struct {
		name      string
		priority  int
		want      int
		wantFound bool
	}{
		{"moderate", 30, 2, true},
		{"Gone", 20, 2, false},          // least severe admitting no more than it did
		{"Gone", 10, 1, false},          // equal threshold
		{"Gone", 60, 3, false},          // none that strict: the most severe
		{"Gone", math.MaxInt, 3, false}, // unknown threshold: the most severe
	}
	for _, tt := range tests {
		if got, found := tab.Map(tt.name, tt.priority); got != tt.want || found != tt.wantFound {
			t.Errorf("Map(%q, %d) = %d, %v; want %d, %v", tt.name, tt.priority, got, found, tt.want, tt.wantFound)
		}
	}
}

func TestThresholdFrom(t *testing.T) {
	ls := []Level{{Name: "A", Thresholds: Thresholds{CPU: 50}}, {Name: "B", Thresholds: Thresholds{ErrorRate: 5}}}
	tab, err := NewTable(ls)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		sig   Signal
		index int
		want  bool
	}{{CPU, 1, true}, {CPU, 2, false}, {ErrorRate, 2, true}, {Memory, 0, false}} {
		if got := tab.ThresholdFrom(tt.sig, tt.index); got != tt.want {
			t.Errorf("ThresholdFrom(%s, %d) = %v, want %v", tt.sig, tt.index, got, tt.want)
		}
	}
}

func TestReasons(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0s", 303 * time.Second: "5m3s", 6 * time.Minute: "6m", time.Hour + 5*time.Second: "1h5s", 1499 * time.Millisecond: "1s"} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
	got := RecoveryReason("Major", 0.1, BlindSignal{CPU, Failed, 303 * time.Second}, BlindSignal{Memory, Warming, 6 * time.Minute})
	want := "recovered: all available signals below Major thresholds less 10% hysteresis; cpu failed for 5m3s, memory warming for 6m"
	if got != want {
		t.Errorf("RecoveryReason = %q, want %q", got, want)
	}
}

func TestReadingOf(t *testing.T) {
	broken := errors.New("read /proc/stat: too many open files")
	for _, tc := range []struct {
		name     string
		v        float64
		err      error
		want     SignalState
		hasValue bool
	}{
		{"value", 42, nil, Available, true},
		{"warming", 0, fmt.Errorf("cpu: %w", ErrWarmingUp), Warming, false},
		{"absent", 0, fmt.Errorf("empty result: %w", ErrAbsent), Absent, false},
		{"failed", 0, broken, Failed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ReadingOf(CPU, tc.v, tc.err)
			if r.Signal != CPU || r.State != tc.want || r.HasValue != tc.hasValue || r.Value != tc.v {
				t.Errorf("ReadingOf(cpu, %v, %v) = %+v, want state %s with value %v (has value %v)", tc.v, tc.err, r, tc.want, tc.v, tc.hasValue)
			}
			if tc.want == Failed && r.Err != tc.err {
				t.Errorf("failed reading's Err = %v, want %v: the controller logs it", r.Err, tc.err)
			}
		})
	}
}
