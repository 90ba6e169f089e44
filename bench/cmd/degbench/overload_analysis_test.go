package main

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// binsOf makes seconds of 4 bins of 250 ms from per-second rows of
// (offered, admitted) per class; everything admitted is served in the SLO.
func binsOf(rows [][][2]int64) [][]classBin {
	var out [][]classBin
	for _, row := range rows {
		for q := range 4 {
			bin := make([]classBin, len(overloadClasses))
			for c, v := range row {
				off, adm := v[0]/4, v[1]/4
				if q == 0 {
					off, adm = v[0]-3*(v[0]/4), v[1]-3*(v[1]/4)
				}
				bin[c] = classBin{Offered: off, OK: adm, Good: adm, Shed: off - adm}
			}
			out = append(out, bin)
		}
	}
	return out
}

func TestSettleIndex(t *testing.T) {
	for _, c := range []struct {
		name   string
		series []float64
		want   int
	}{
		{"steady", []float64{100, 100, 100, 100}, 0},
		{"a step then steady", []float64{500, 300, 100, 105, 95, 100, 100, 100}, 2},
		{"cycling to the end", []float64{100, 500, 100, 500, 100, 500, 100, 500}, -1},
		{"within only at the very end", []float64{100, 500, 100, 500, 100, 500, 300, 300}, -1},
		{"everything shed", []float64{100, 50, 0, 0, 0, 0}, 2},
		{"empty", nil, -1},
	} {
		if got := settleIndex(c.series); got != c.want {
			t.Errorf("%s: settleIndex(%v) = %d, want %d", c.name, c.series, got, c.want)
		}
	}
}

func TestPhaseStats(t *testing.T) {
	// 8 s at 1000/s offered against 800/s: the gate admits everything for
	// 3 s, then only p100 and p60 (200/s).
	rates := mixRates(1000, 1)
	var rows [][][2]int64
	for s := range 8 {
		row := make([][2]int64, len(rates))
		for c, r := range rates {
			adm := int64(r)
			if s >= 3 && c >= 2 {
				adm = 0
			}
			row[c] = [2]int64{int64(r), adm}
		}
		rows = append(rows, row)
	}
	sc := scenarioSpec{Capacity: 800, Phases: []phaseSpec{{Name: "1.25x", Seconds: 8, Rates: rates, Judged: true}}}
	st := phaseStats(sc, systemRun{Bins: binsOf(rows)}, 0.25)[0]
	if st.From != 2 || st.OfferedRate != 1000 || st.All.Offered != 6000 {
		t.Errorf("judged from %v s at %v/s (%d offered), want from 2 s at 1000/s, 6000 offered", st.From, st.OfferedRate, st.All.Offered)
	}
	// Good: 1000 in the 3rd second, then 200/s for 5 s: 2000 over 6 s.
	if want := 2000.0 / 6 / 800 * 100; math.Abs(st.GoodputPercent-want) > 1e-9 {
		t.Errorf("goodput %v%%, want %v%% (successes in the SLO per second / min(offered, capacity))", st.GoodputPercent, want)
	}
	if st.SettleSeconds != 3 {
		t.Errorf("settled at %v s, want 3 (when the admission fell to p100 and p60)", st.SettleSeconds)
	}
	if inv := inversion(st.Class); inv != "" {
		t.Errorf("inversion %q, want none (higher classes served more)", inv)
	}
}

func TestGoodputIsJudgedAgainstTheMeasuredCapacity(t *testing.T) {
	// 3x of a nominal 200/s (30, 90, 180 and 300/s); the service was
	// measured at 180/s; 168/s served within the SLO.
	rates := mixRates(200, 3)
	var rows [][][2]int64
	for range 10 {
		rows = append(rows, [][2]int64{{30, 30}, {90, 90}, {180, 48}, {300, 0}})
	}
	bins := binsOf(rows)
	sc := scenarioSpec{Capacity: 200, Phases: []phaseSpec{{Name: "3x", Seconds: 10, Rates: rates, Judged: true}}}
	nominal := phaseStats(sc, systemRun{Bins: bins}, 0.25)[0].GoodputPercent
	sc.Measured = &capacityMeasured{Rate: 180}
	measured := phaseStats(sc, systemRun{Bins: bins}, 0.25)[0].GoodputPercent
	if math.Abs(nominal-84) > 0.5 || math.Abs(measured-93.3) > 0.5 {
		t.Errorf("goodput %.1f%% of the nominal, %.1f%% of the measured, want 84%% and 93.3%% (168/s of 200 and 180)", nominal, measured)
	}
	// A measurement above the nominal (it cannot be, a burn is one core's
	// time) does not raise the yardstick.
	sc.Measured = &capacityMeasured{Rate: 250}
	if got := phaseStats(sc, systemRun{Bins: bins}, 0.25)[0].GoodputPercent; got != nominal {
		t.Errorf("measured 250/s of a nominal 200: goodput %.1f%%, want the nominal's %.1f%%", got, nominal)
	}
}

func TestInversion(t *testing.T) {
	cls := func(ok ...int64) []classBin {
		var out []classBin
		for _, v := range ok {
			out = append(out, classBin{Offered: 1000, OK: v})
		}
		return out
	}
	if got := inversion(cls(990, 500, 520, 0)); got != "p60 50.0% < p40 52.0%" {
		t.Errorf("inversion = %q, want p60 50.0%% < p40 52.0%%", got)
	}
	if got := inversion(cls(990, 500, 509, 0)); got != "" {
		t.Errorf("inversion = %q, want none: 0.9 points is within 1", got)
	}
	if got := inversion(cls(280, 285, 281, 279)); got != "" {
		t.Errorf("inversion = %q, want none", got)
	}
	if got := inversion(cls(280, 295, 281, 279)); got != "p100 28.0% < p60 29.5%" {
		t.Errorf("inversion = %q, want the top class below p60", got)
	}
}

func TestLevels(t *testing.T) {
	pts := []levelPoint{
		{At: -0.1, Index: 0, Level: "Normal"},
		{At: 10.5, Index: 5, Level: "Emergency"},
		{At: 21, Index: 4, Level: "Severe"},
		{At: 21.5, Index: 4, Level: "Severe"}, // partial alone changed
		{At: 32, Index: 3, Level: "Major"},
		{At: 95, Index: 5, Level: "Emergency"},
	}
	if got := levelChanges(pts, 10, 70); len(got) != 3 {
		t.Errorf("changes in [10, 70) = %v, want 3 (a change of partial alone is not one)", got)
	}
	if got := maxLevel(pts, 25, 70); got != 4 {
		t.Errorf("maxLevel in [25, 70) = %d, want 4 (Severe, in force at 25)", got)
	}
	if got := maxLevel(pts, 0, 10); got != 0 {
		t.Errorf("maxLevel in [0, 10) = %d, want 0", got)
	}
	if got := levelSequence(pts, 10, 70); got != "Normal → Emergency 0.5s → Severe 11.0s → Major 22.0s" {
		t.Errorf("levelSequence = %q", got)
	}
	if !atMostOnePerMinute([]float64{1, 61.5, 130}) || atMostOnePerMinute([]float64{1, 40}) {
		t.Error("atMostOnePerMinute: changes 60 s apart are allowed, 39 s apart are not")
	}
}

// latencyTable is the daemon's table as GET /v1/levels gives it.
var latencyTable = []levelRow{{"Normal", 0, 0}, {"Minor", 1, 10}, {"Moderate", 2, 30}, {"Major", 3, 50}, {"Severe", 4, 70}, {"Emergency", 5, 100}}

func TestFitLevel(t *testing.T) {
	for _, c := range []struct {
		name  string
		rates []float64
		want  int
	}{
		{"0.5x", mixRates(800, 0.5), 0},
		{"1.6x: p100+p60+p40 = 640", mixRates(800, 1.6), 2},
		{"3x: p100+p60 = 480", mixRates(800, 3), 3},
		{"10x: p100 = 400", mixRates(800, 10), 4},
		{"spike: Moderate sheds p10", spikeRates(800, 0.8, 12), 2},
		{"40x: nothing fits", mixRates(800, 40), 5},
	} {
		if got := fitLevel(latencyTable, c.rates, 800); got != c.want {
			t.Errorf("%s: fitLevel = %d, want %d", c.name, got, c.want)
		}
	}
}

// TestRecoveryOnly: the under-load settling check passes a level that
// comes down one level a dwell, and nothing else.
func TestRecoveryOnly(t *testing.T) {
	if !strings.Contains(daemonBase, fmt.Sprintf("minimum_level_duration: %ds", dwellSeconds)) {
		t.Fatalf("daemonBase's dwell is not dwellSeconds (%d s):\n%s", dwellSeconds, daemonBase)
	}
	pts := func(at ...float64) []levelPoint {
		// at holds (time, index) pairs.
		var out []levelPoint
		for i := 0; i < len(at); i += 2 {
			out = append(out, levelPoint{At: at[i], Index: int(at[i+1])})
		}
		return out
	}
	for _, c := range []struct {
		name   string
		points []levelPoint
		want   bool
	}{
		{"two steps a dwell apart", pts(0, 2, 12, 1, 22.5, 0), true},
		{"the first a dwell after a change before the phase", pts(0, 0, 5, 2, 15, 1, 25, 0), true},
		{"a partial change between them is not a level change", pts(0, 2, 12, 1, 15, 1, 22.5, 0), true},
		{"two levels at once", pts(0, 2, 12, 0), false},
		{"a step up", pts(0, 1, 12, 2), false},
		{"inside the dwell", pts(0, 2, 12, 1, 18, 0), false},
	} {
		if got := recoveryOnly(c.points, 10, 40, dwellSeconds); got != c.want {
			t.Errorf("%s: recoveryOnly = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestPhaseStatsSplitsALongJudgedWindow: cpu3x's 3x phase (25 s, judged
// from 2 s in) serving 100/s of its 200/s capacity within the SLO for
// the first four judged seconds and 180/s after is 50% early, 90% late,
// and 23 s of both overall; its 5 s phase before is too short to split.
func TestPhaseStatsSplitsALongJudgedWindow(t *testing.T) {
	sc := overloadScenarios(fullLengths, 800, 200)[4]
	if sc.Name != "cpu3x" {
		t.Fatalf("scenario %s, want cpu3x", sc.Name)
	}
	stats := phaseStats(sc, systemRun{Bins: stepBins(sc, 100)}, 0.25)
	st := stats[1]
	if math.Abs(st.EarlyPercent-50) > 1e-9 || math.Abs(st.LatePercent-90) > 1e-9 {
		t.Errorf("early %v%%, late %v%%: want 50 and 90", st.EarlyPercent, st.LatePercent)
	}
	if want := 100 * (4*100 + 19*180) / 23.0 / 200; math.Abs(st.GoodputPercent-want) > 1e-9 {
		t.Errorf("goodput %v%%, want %v (the whole window)", st.GoodputPercent, want)
	}
	if !math.IsNaN(stats[0].EarlyPercent) || !math.IsNaN(stats[0].LatePercent) {
		t.Errorf("a 5 s phase split into %v and %v, want NaN: too short", stats[0].EarlyPercent, stats[0].LatePercent)
	}
}

// stepBins are the bins of a run of cpu3x (sc) whose top class is offered
// 600/s and served 180/s within the SLO, but early/s in the first four
// seconds of the 3x phase's judged window (7-11 s: the step at 5 s, the
// window from 2 s after it).
func stepBins(sc scenarioSpec, early int64) [][]classBin {
	var rows [][][2]int64
	for i := range int(sc.Seconds()) {
		served := int64(180)
		if i >= 7 && i < 11 {
			served = early
		}
		rows = append(rows, [][2]int64{{600, served}, {0, 0}, {0, 0}, {0, 0}})
	}
	return binsOf(rows)
}
