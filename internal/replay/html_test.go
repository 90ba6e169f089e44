package replay

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/internal/timeline"
	"github.com/degraded/degraded/levels"
	"github.com/google/go-cmp/cmp"
)

// TestHTMLReport: the report of the incident (with its pin) under a
// candidate with lower thresholds is one page whose script and style are
// inline and allowed by hash, which refers to no other origin, and whose
// data holds both sides' series (the recording's marks, each side's
// table) beside the result Run gives.
func TestHTMLReport(t *testing.T) {
	cfg := recorded(t)
	dir := record(t, cfg, incident(), pinHalfway)
	low := recorded(t)
	low.Levels = append([]config.Level(nil), low.Levels...)
	v := 45.0
	low.Levels[2].CPUPercent = &v // Major
	files, err := Files([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := WriteHTML(&out, Options{Config: low, Files: files}, HTMLInfo{Candidate: "low.yaml", Timelines: []string{dir}, Generated: t0})
	if err != nil {
		t.Fatal(err)
	}
	page := out.String()
	plain, err := Run(Options{Config: low, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(plain, res); d != "" {
		t.Errorf("the report's result differs from Run's (-Run +WriteHTML):\n%s", d)
	}

	csp := regexp.MustCompile(`<meta http-equiv="Content-Security-Policy" content="([^"]+)">`).FindStringSubmatch(page)
	if csp == nil {
		t.Fatal("no Content-Security-Policy in the report")
	}
	policy := html.UnescapeString(csp[1]) // as the browser reads the attribute
	for tag, body := range map[string]string{"script": between(t, page, "<script>", "</script>"), "style": between(t, page, "<style>", "</style>")} {
		sum := sha256.Sum256([]byte(body))
		if want := tag + "-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(policy, want) {
			t.Errorf("the policy %q does not allow the inline %s (%s)", policy, tag, want)
		}
	}
	if !strings.HasPrefix(policy, "default-src 'none';") {
		t.Errorf("the policy %q does not forbid everything else", policy)
	}
	if m := regexp.MustCompile(`https?://[a-z]`).FindString(strings.ReplaceAll(page, "http://www.w3.org/2000/svg", "")); m != "" {
		t.Errorf("the report refers to another origin: %q", m)
	}
	for _, want := range []string{"const DegradedCharts", "low.yaml", "Time at Major", "Transitions, side by side"} {
		if !strings.Contains(page, want) {
			t.Errorf("the report lacks %q", want)
		}
	}

	var data struct {
		Recorded, Candidate timeline.Series
		Result              Result
	}
	if err := json.Unmarshal([]byte(between(t, page, `<script type="application/json" id="report-data">`, "</script>")), &data); err != nil {
		t.Fatal(err)
	}
	var pin bool
	for _, m := range data.Recorded.Marks {
		pin = pin || (m.Kind == timeline.MarkOverride && m.Action == "set" && m.Level == "Severe" && m.Reason == "INC-7")
	}
	if !pin {
		t.Errorf("the recorded marks %+v lack the INC-7 pin", data.Recorded.Marks)
	}
	major := func(s timeline.Series) float64 { return s.Tables[0].Levels[3].Thresholds[levels.CPU] }
	if len(data.Recorded.Tables) == 0 || len(data.Candidate.Tables) == 0 || major(data.Recorded) != 80 || major(data.Candidate) != 45 {
		t.Errorf("tables: recorded %+v, candidate %+v; want Major's cpu at 80 and at 45", data.Recorded.Tables, data.Candidate.Tables)
	}
	if len(data.Recorded.Bands) < 3 || len(data.Candidate.Bands) < 3 || data.Recorded.Lines != res.Lines || len(data.Recorded.Signals) == 0 {
		t.Errorf("series: %d recorded bands, %d candidate bands, %d lines (want %d), %d signals", len(data.Recorded.Bands), len(data.Candidate.Bands), data.Recorded.Lines, res.Lines, len(data.Recorded.Signals))
	}
	if got, want := strings.Count(between(t, page, `<table id="transitions">`, "</table>"), "<tr"), len(sideBySide(res))+1; got != want {
		t.Errorf("the transitions table has %d rows, want %d (a header and a row per moment)", got, want)
	}
}

func between(t *testing.T, s, open, closing string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, open)
	if !ok {
		t.Fatalf("no %s", open)
	}
	body, _, ok := strings.Cut(rest, closing)
	if !ok {
		t.Fatalf("no %s after %s", closing, open)
	}
	return body
}

// TestShedEstimate: each report's offered load is judged by the admission
// each side published before it: below the threshold shed, the partial
// band shed by 1 - fraction, the rest admitted.
func TestShedEstimate(t *testing.T) {
	cfg, err := recorded(t).Machine()
	if err != nil {
		t.Fatal(err)
	}
	c := newCollector(t0, t0.Add(time.Minute), 10)
	lc := cfg.Line()
	report := levels.LineReport{Admission: &levels.LineAdmission{Admitted: 60, ShedBelow: 40, Offered: map[int]int64{10: 20, 40: 40, 60: 40}}}
	first := tick(0, 0, 0, "Major")
	first.Config, first.Partial = &lc, &levels.Partial{From: 30, Fraction: 0.25}
	c.observe(first, levels.Published{Index: 2}, cfg) // the candidate at Moderate (30)
	second := tick(1, 0, 0, "Major")
	second.Reports = []levels.LineReport{report}
	c.observe(second, levels.Published{Index: 2}, cfg)
	// Recorded: Major (50) with 25% of 30-49 admitted: 20 + 40*0.75 shed.
	// Candidate: Moderate (30): the 20 at priority 10 shed.
	want := Shed{Offered: 100, Recorded: 50, Candidate: 20, Admitted: 60, Reported: 40}
	if c.shed != want {
		t.Errorf("shed %+v, want %+v", c.shed, want)
	}
}

func TestSideBySide(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	r := &Result{
		Transitions: []Transition{{At: at(1), To: "Major"}, {At: at(3), To: "Normal"}},
		Recorded:    []Transition{{At: at(1), To: "Major"}, {At: at(2), To: "Minor"}, {At: at(5), To: "Normal"}},
	}
	var got []string
	for _, row := range sideBySide(r) {
		s := row.At.Format("05") + ":"
		if row.Candidate != nil {
			s += " candidate " + row.Candidate.To
		}
		if row.Recorded != nil {
			s += " recorded " + row.Recorded.To
		}
		got = append(got, s)
	}
	want := []string{"01: candidate Major recorded Major", "02: recorded Minor", "03: candidate Normal", "05: recorded Normal"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("rows (-want +got):\n%s", d)
	}
}
