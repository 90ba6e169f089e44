package main

import (
	"bytes"
	"encoding/json"
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
