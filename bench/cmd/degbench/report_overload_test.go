package main

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// syntheticOverload is a result of one 3x step scenario with three
// systems: none serves everyone alike (28%); failsafe serves the top class
// 99.6%; degraded serves the top class fully and flaps once.
func syntheticOverload() *overloadResult {
	sc := overloadScenarios(quickLengths, 800, 400)[0] // 3 s 0.5x, 6 s 3x, 4 s 0.5x
	mk := func(okShare func(phase, class int) float64) systemRun {
		var rows [][][2]int64
		start := 0.0
		for pi, ph := range sc.Phases {
			for range int(ph.Seconds) {
				row := make([][2]int64, len(ph.Rates))
				for c, r := range ph.Rates {
					row[c] = [2]int64{int64(r), int64(r * okShare(pi, c))}
				}
				rows = append(rows, row)
			}
			start += ph.Seconds
		}
		return systemRun{Bins: binsOf(rows)}
	}
	none := mk(func(p, c int) float64 {
		if p == 1 {
			return 0.28
		}
		return 1
	})
	none.System = sysNone
	fs := mk(func(p, c int) float64 {
		if p == 1 {
			return []float64{1, 0.9, 0.1, 0}[c]
		}
		return 1
	})
	fs.System = sysFailsafe
	dg := mk(func(p, c int) float64 {
		if p == 1 {
			return []float64{1, 1, 0.1, 0}[c]
		}
		return 1
	})
	dg.System = sysGraduated
	dg.Levels = []levelPoint{{At: -0.2, Index: 0, Level: "Normal"}, {At: 3.5, Index: 5, Level: "Emergency"}, {At: 6, Index: 3, Level: "Major", HasPartial: true, Partial: &partialAdmission{30, 0.4}}}
	return &overloadResult{
		Workers: 8, ServiceMs: 10, QueueWaitMs: 400, BinSeconds: 0.25, InflightCap: 4000,
		Classes: []int{100, 60, 40, 10}, Shares: []float64{.05, .15, .3, .5}, Levels: latencyTable,
		Scenarios: []scenarioResult{{scenarioSpec: sc, Runs: []systemRun{none, fs, dg}}},
	}
}

func TestOverloadSVGIsXML(t *testing.T) {
	res := syntheticOverload()
	var b strings.Builder
	if err := writeOverloadSVG(&b, res.Scenarios[0], res.BinSeconds, 5); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(strings.NewReader(b.String()))
	panels, polylines, root := 0, 0, ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not valid XML: %v\n%s", err, b.String())
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Space + " " + se.Name.Local
			}
			switch se.Name.Local {
			case "g":
				panels++
			case "polyline":
				polylines++
			}
		}
	}
	if root != "http://www.w3.org/2000/svg svg" {
		t.Errorf("root element %q, want an svg in the SVG namespace", root)
	}
	// 3 panels; 4 classes each; degraded's level and partial.
	if panels != 3 || polylines != 3*4+2 {
		t.Errorf("%d panels and %d polylines, want 3 and 14", panels, polylines)
	}
	if got := esc(`a<b & "c"`); got != "a&lt;b &amp; &#34;c&#34;" {
		t.Errorf("esc = %q", got)
	}
}

func TestJudgeOverload(t *testing.T) {
	checks := judgeOverload(syntheticOverload())
	got := map[string]bool{}
	for _, c := range checks {
		got[c.Check+" / "+c.System] = c.Pass
	}
	for k, want := range map[string]bool{
		checkTop + " / " + sysNone:           false, // 28%
		checkTop + " / " + sysFailsafe:       true,  // 100%
		checkTop + " / " + sysGraduated:      true,
		checkGoodput + " / " + sysNone:       false,
		checkInversion + " / " + sysFailsafe: true,
		checkFlaps + " / " + sysGraduated:    false, // two changes within a minute
		checkFit + " / " + sysGraduated:      false, // Emergency, past Major
		checkPeer + " / " + sysGraduated:     true,
	} {
		if pass, ok := got[k]; !ok || pass != want {
			t.Errorf("%s: pass %v (present %v), want %v", k, pass, ok, want)
		}
	}
	if _, ok := got[checkFlaps+" / "+sysNone]; ok {
		t.Error("a system without levels got the level-change check")
	}
}

func TestPercentAgainstNeverReadsAsTheTarget(t *testing.T) {
	for v, want := range map[float64]string{89.96: "89.9%", 89.5: "89.5%", 89.4: "89%", 90: "90%", 90.4: "90%", 61.2: "61%"} {
		if got := percentAgainst(v, 90); got != want {
			t.Errorf("percentAgainst(%v, 90) = %q, want %q", v, got, want)
		}
	}
}

func TestWriteOverloadReport(t *testing.T) {
	dir := t.TempDir()
	r := report{overload: syntheticOverload(), imgDir: filepath.Join(dir, "img")}
	var b strings.Builder
	r.writeOverload(&b)
	md := b.String()
	for _, want := range []string{"## 11. Overload", "![step3x", "img/overload-step3x.svg", "| degraded-graduated | **3x** |", "Normal → Emergency 3.5s → Major 6.0s"} {
		if !strings.Contains(md, want) {
			t.Errorf("the section lacks %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "img", "overload-step3x.svg")); err != nil {
		t.Errorf("the plot was not written: %v", err)
	}
	if len(r.verdicts) == 0 {
		t.Error("no verdicts for the targets table")
	}
}

// TestWriteOverloadReportNamesTheFixedAdmission: a run with system fixed
// says which admission it was, so that its row is not read as a peer's.
func TestWriteOverloadReportNamesTheFixedAdmission(t *testing.T) {
	res := syntheticOverload()
	var b strings.Builder
	r := report{overload: res, imgDir: t.TempDir()}
	r.writeOverload(&b)
	if strings.Contains(b.String(), "**fixed**") {
		t.Error("a run without system fixed describes it")
	}
	res.Fixed = "60,40:0.32"
	b.Reset()
	r = report{overload: res, imgDir: t.TempDir()}
	r.writeOverload(&b)
	if want := "priorities >= 60\n  and those in [40, 60) at 0.32, the rest shed with 503."; !strings.Contains(b.String(), want) {
		t.Errorf("the section lacks %q", want)
	}
	res.Fixed = "sixty"
	b.Reset()
	r = report{overload: res, imgDir: t.TempDir()}
	r.writeOverload(&b)
	if want := `(the result's admission does not parse: fixed admission "sixty": the threshold "sixty" is not an integer)`; !strings.Contains(b.String(), want) {
		t.Errorf("a result whose admission does not parse: the section lacks %q", want)
	}
}
