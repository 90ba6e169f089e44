package levels

import (
	"fmt"
	"testing"
	"time"
)

// A flood of reports from random reporters is at most maxMergedReports
// inputs, and no admission object adds up the accounts of different
// reporters: every outcome is counted, each reporter's account is its
// own (one second, one priority) or dropped.
func TestMergeReportsKeepsReportersApart(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var rs []Report
	for i := range 1000 {
		rs = append(rs, Report{At: at, Success: 5, Failure: 1, Admission: &Admission{Sequence: 7, Admitted: 6, Seconds: 1,
			Reporter: fmt.Sprintf("%x", i), Offered: map[int]int64{i % 100: 6}}})
	}
	out := MergeReports(rs)
	if len(out) > maxMergedReports {
		t.Fatalf("%d reports after merging, want at most %d", len(out), maxMergedReports)
	}
	var success, failure int64
	seen := map[string]bool{}
	for _, r := range out {
		success, failure = success+r.Success, failure+r.Failure
		a := r.Admission
		if a == nil {
			continue
		}
		if a.Seconds != 1 || len(a.Offered) != 1 || seen[a.Reporter] {
			t.Errorf("reporter %s: %g s, %d priorities, seen before %v: want its own account, 1 s of one priority", a.Reporter, a.Seconds, len(a.Offered), seen[a.Reporter])
		}
		seen[a.Reporter] = true
	}
	if success != 5000 || failure != 1000 {
		t.Errorf("merged outcomes %d/%d, want all 5000/1000", success, failure)
	}
	if len(seen) != maxMergedReports {
		t.Errorf("%d reporters' accounts kept, want %d", len(seen), maxMergedReports)
	}
}

// The reports of one reporter under one sequence add up, to at most
// maxOfferedPriorities priorities, as one report may hold.
func TestMergeReportsBoundsOfferedPriorities(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	offered := func(from int) map[int]int64 {
		m := map[int]int64{}
		for p := from; p < from+64; p++ {
			m[p] = 1
		}
		return m
	}
	out := MergeReports([]Report{
		{At: at, Admission: &Admission{Sequence: 3, Admitted: 64, Seconds: 0.5, Reporter: "a", Offered: offered(0)}},
		{At: at, Admission: &Admission{Sequence: 3, Admitted: 64, Seconds: 0.5, Reporter: "a", Offered: offered(64)}},
		{At: at, Admission: &Admission{Sequence: 3, Admitted: 64, Seconds: 0.5, Reporter: "a", Offered: offered(0)}},
	})
	if len(out) != 1 {
		t.Fatalf("%d reports, want one: one reporter, one sequence", len(out))
	}
	a := out[0].Admission
	if len(a.Offered) != maxOfferedPriorities || a.Seconds != 1.5 || a.Admitted != 192 || a.Offered[0] != 2 {
		t.Errorf("merged: %d priorities, %g s, %d admitted, priority 0 offered %d; want 64, 1.5, 192, 2", len(a.Offered), a.Seconds, a.Admitted, a.Offered[0])
	}
}

// One report that claims an hour counts for a minute at most: it held the
// level at Major, the band shed, for three hours after the load had gone.
func TestLawForgetsALongReportWithinAMinute(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	m := NewMachine(Config{Table: simTable(t), Rules: Rules{MinimumLevelDuration: 10 * time.Second, Hysteresis: 0.1,
		MaxOverrideTTL: time.Hour, MinThroughput: 10, Admission: AdmissionGraduated}}, t0)
	m.Evaluate(Input{At: t0, Trigger: TriggerStart, Sample: Sample{}.Clone()})
	offered := lawMix(3, 3600)
	var n int64
	for _, c := range offered {
		n += c
	}
	at := t0.Add(time.Second)
	m.Evaluate(Input{At: at, Trigger: TriggerEvent, Sample: Sample{}.Clone(), Reports: []Report{{At: at, Success: 10,
		Admission: &Admission{Sequence: 1, Admitted: n, Seconds: 3600, Reporter: "feed", Offered: offered}}}})
	for _, tc := range []struct {
		after   time.Duration
		counted bool
	}{{59 * time.Second, true}, {61 * time.Second, false}} {
		m.Evaluate(Input{At: at.Add(tc.after), Trigger: TriggerTick, Sample: Sample{}.Clone()})
		if got := m.law.admittedFrom(0); (got > 0) != tc.counted {
			t.Errorf("%v after an hour-long report its load reads %.0f/s; counted %v, want %v", tc.after, got, got > 0, tc.counted)
		}
	}
}

// The reports of one reporter under one sequence add their arrival spans:
// a report that gave none arrived over its own seconds, so two seconds,
// one whose requests arrived over half a second (a queue grew before the
// client), merge into 1.5 s of arrivals over 2 s.
func TestMergeReportsAddsArrivalSpans(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	rep := func(arrival float64) Report {
		return Report{At: at, Admission: &Admission{Sequence: 3, Admitted: 10, Seconds: 1, Arrival: arrival, Reporter: "r", Offered: map[int]int64{50: 10}}}
	}
	for _, tc := range []struct {
		arrivals []float64
		want     float64
	}{{[]float64{0.5, 0}, 1.5}, {[]float64{0, 0.5}, 1.5}, {[]float64{0, 0}, 0}, {[]float64{0.5, 3}, 3.5}} {
		out := MergeReports([]Report{rep(tc.arrivals[0]), rep(tc.arrivals[1])})
		if len(out) != 1 || out[0].Admission.Seconds != 2 || out[0].Admission.Arrival != tc.want {
			t.Errorf("arrivals %v: merged %+v, want one report of 2 s arriving over %g s (0: none given)", tc.arrivals, out[0].Admission, tc.want)
		}
	}
}
