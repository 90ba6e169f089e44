package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

// withGood is a copy of res whose degraded run has extra more good
// answers of the top class in every bin (and as many more offered).
func withGood(t *testing.T, res *overloadResult, extra int64) *overloadResult {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var c overloadResult
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	for i := range c.Scenarios[0].Runs {
		r := &c.Scenarios[0].Runs[i]
		if r.System != sysGraduated {
			continue
		}
		for _, bin := range r.Bins {
			bin[0].Offered += extra
			bin[0].OK += extra
			bin[0].Good += extra
		}
	}
	return &c
}

// TestCompareOverload: the judged phase of each run is lined up, A's and
// B's goodput and top class per run, their means, and B - A with two
// standard errors; a system the runs lack is refused by name.
func TestCompareOverload(t *testing.T) {
	base := syntheticOverload()
	a := []*overloadResult{base, withGood(t, base, 2)}
	b := []*overloadResult{withGood(t, base, 10), withGood(t, base, 12)}
	rows, err := compareOverload(a, b, sysGraduated)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Scenario != "step3x" || rows[0].Phase != "3x" {
		t.Fatalf("rows %+v, want the one judged phase, step3x 3x", rows)
	}
	r := rows[0]
	ga, gb := r.Goodput[0], r.Goodput[1]
	if len(ga) != 2 || len(gb) != 2 || !(ga[0] < ga[1] && ga[1] < gb[0] && gb[0] < gb[1]) {
		t.Errorf("goodput A %v, B %v: want each run's, rising with the good answers added", ga, gb)
	}
	for _, top := range r.Top {
		for _, v := range top {
			if v != 100 {
				t.Errorf("top class ok %v, want 100%% in every run", top)
			}
		}
	}
	d, se := diff(ga, gb)
	ma, _ := meanSD(ga)
	mb, _ := meanSD(gb)
	if math.Abs(d-(mb-ma)) > 1e-9 || !(se > 0) {
		t.Errorf("B - A = %v ± %v, want %v and a positive error", d, se, mb-ma)
	}
	var out bytes.Buffer
	writeCompare(&out, rows)
	if !strings.Contains(out.String(), "| step3x | 3x | goodput % |") || !strings.Contains(out.String(), "| +") {
		t.Errorf("table:\n%s\nwant a goodput row for step3x 3x with a positive B - A", out.String())
	}
	if _, err := compareOverload(a, b, sysFailsafe+"x"); err == nil || !strings.Contains(err.Error(), "no run of") {
		t.Errorf("a system the runs lack: %v, want it named", err)
	}
}

// TestMeanSD: the sample standard deviation (n - 1).
func TestMeanSD(t *testing.T) {
	m, sd := meanSD([]float64{2, 4, 4, 4, 5, 5, 7, 9})
	if m != 5 || math.Abs(sd-math.Sqrt(32.0/7)) > 1e-12 {
		t.Errorf("mean %v, sd %v; want 5 and %v", m, sd, math.Sqrt(32.0/7))
	}
}

// TestCompareSplitsALongPhase: a judged window over twice earlySeconds
// gets two more lines, its first seconds and the rest, each run's.
func TestCompareSplitsALongPhase(t *testing.T) {
	sc := overloadScenarios(fullLengths, 800, 200)[4] // cpu3x: its 3x phase judged over 23 s
	result := func(early int64) *overloadResult {
		run := systemRun{System: sysGraduated, Bins: stepBins(sc, early)}
		return &overloadResult{BinSeconds: 0.25, Scenarios: []scenarioResult{{scenarioSpec: sc, Runs: []systemRun{run}}}}
	}
	rows, err := compareOverload([]*overloadResult{result(100), result(120)}, []*overloadResult{result(160), result(180)}, sysGraduated)
	if err != nil {
		t.Fatal(err)
	}
	var judged []compareRow
	for _, r := range rows {
		if r.Phase == "3x" {
			judged = append(judged, r)
		}
	}
	if len(judged) != 1 {
		t.Fatalf("rows %+v, want cpu3x's 3x", rows)
	}
	r := judged[0]
	if fmt.Sprint(r.Early) != "[[50 60] [80 90]]" || fmt.Sprint(r.Late) != "[[90 90] [90 90]]" {
		t.Errorf("early %v, late %v: want A 50, 60 and B 80, 90 early, 90 after in every run", r.Early, r.Late)
	}
	var out bytes.Buffer
	writeCompare(&out, rows)
	for _, want := range []string{"| cpu3x | 3x | goodput %, first 4 s | 50.0, 60.0 |", "| cpu3x | 3x | goodput %, after | 90.0, 90.0 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table:\n%s\nwant a line %q", out.String(), want)
		}
	}
}
