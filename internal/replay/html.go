package replay

import (
	"crypto/sha256"
	_ "embed" // the report's page, script and style
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/degraded/degraded/api/dashboard"
	"github.com/degraded/degraded/internal/timeline"
)

//go:embed report.html
var reportPage string

//go:embed report.js
var reportJS string

//go:embed report.css
var reportCSS string

// reportPoints is how many buckets each side's series is cut into.
const reportPoints = 2000

// HTMLInfo says what the report is of, for its heading.
type HTMLInfo struct {
	// Candidate names the candidate config (its path, or the embedded
	// defaults).
	Candidate string
	// Timelines are the timeline arguments, as given.
	Timelines []string
	// Generated is when the report was made.
	Generated time.Time
}

// WriteHTML replays o as Run does and writes the report to w: one
// self-contained HTML file (its script, style and data inline, a
// Content-Security-Policy that allows nothing else, so it loads nothing
// from the network) with the recorded and the candidate level and
// admission over time, each signal with both tables' thresholds, the
// transitions of each side by side and the summary table. The charts are
// the dashboard's History view's (api/dashboard's chart.js). It returns
// the result, whose warnings are the caller's to print. Without both From
// and To it reads the files twice (the range first), so they must then be
// regular files, not pipes.
func WriteHTML(w io.Writer, o Options, about HTMLInfo) (*Result, error) {
	from, to := o.From, o.To
	if from.IsZero() || to.IsZero() {
		// The buckets need the range: read it from the lines' times first.
		first, last, err := span(o.Context, o.Files, o.From, o.To)
		if err != nil {
			return nil, err
		}
		if from.IsZero() {
			from = first
		}
		if to.IsZero() {
			to = last
		}
	}
	c := newCollector(from, to, reportPoints)
	o.Observe = c.observe
	res, err := Run(o)
	if err != nil {
		return nil, err
	}
	table, err := o.Config.Table()
	if err != nil {
		return nil, err
	}
	var order []string
	for _, l := range table.Levels() {
		order = append(order, l.Name)
	}
	data, err := json.Marshal(reportData{Recorded: c.rec.Series(), Candidate: c.cand.Series(), Result: res, Shed: c.shed})
	if err != nil {
		return nil, err
	}
	chartJS, chartCSS := dashboard.Chart()
	script := string(chartJS) + "\n" + reportJS
	style := string(chartCSS) + "\n" + reportCSS
	page := reportView{
		Info: about, Result: res, Shed: c.shed,
		Script: template.JS(script), Style: template.CSS(style), Data: template.JS(data),
		CSP:     "default-src 'none'; script-src " + hash(script) + "; style-src " + hash(style) + "; img-src data:; base-uri 'none'; form-action 'none'",
		Summary: summary(res, c.shed, order), Rows: sideBySide(res),
	}
	t, err := template.New("report").Funcs(template.FuncMap{"stamp": stamp, "clock": clock}).Parse(reportPage)
	if err != nil {
		return nil, fmt.Errorf("replay report: %w", err) // programmer error in report.html, caught by the tests
	}
	if err := t.Execute(w, page); err != nil {
		return nil, err
	}
	return res, nil
}

// reportData is the report's data block, read by report.js.
type reportData struct {
	Recorded  *timeline.Series `json:"recorded"`
	Candidate *timeline.Series `json:"candidate"`
	Result    *Result          `json:"result"`
	Shed      Shed             `json:"shed"`
}

// reportView is what report.html is executed with.
type reportView struct {
	Info    HTMLInfo
	Result  *Result
	Shed    Shed
	Script  template.JS
	Style   template.CSS
	Data    template.JS
	CSP     string
	Summary []summaryRow
	Rows    []transitionRow
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// summaryRow is one row of the summary table.
type summaryRow struct {
	What                string
	Candidate, Recorded string
}

func summary(r *Result, shed Shed, order []string) []summaryRow {
	names := slices.Clone(order)
	for n := range r.RecordedTimeAtLevel {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	var rows []summaryRow
	for _, n := range names {
		rows = append(rows, summaryRow{"Time at " + n, show(r.TimeAtLevel, n), show(r.RecordedTimeAtLevel, n)})
	}
	rows = append(rows,
		summaryRow{"Transitions", strconv.Itoa(len(r.Transitions)), strconv.Itoa(len(r.Recorded))},
		summaryRow{fmt.Sprintf("Flaps (a level re-entered within %s)", time.Duration(r.FlapWindow)), strconv.Itoa(r.Flaps), strconv.Itoa(r.RecordedFlaps)})
	if shed.Offered > 0 {
		pct := func(v float64) string {
			return fmt.Sprintf("%.0f of %d (%.1f%%)", v, shed.Offered, 100*v/float64(shed.Offered))
		}
		rows = append(rows, summaryRow{"Shed, estimated from the offered load by priority", pct(shed.Candidate), pct(shed.Recorded)})
	} else {
		rows = append(rows, summaryRow{"Shed, estimated from the offered load by priority", "no estimate: the reports carry no offered counts", "no estimate"})
	}
	if n := shed.Admitted + shed.Reported; n > 0 {
		rows = append(rows, summaryRow{"Shed, as the clients reported", "–", fmt.Sprintf("%d of %d (%.1f%%)", shed.Reported, n, 100*float64(shed.Reported)/float64(n))})
	}
	return rows
}

// transitionRow is one moment of the side-by-side table: the candidate's
// transition and the recorded one at it, either possibly nil.
type transitionRow struct {
	At        time.Time
	Candidate *Transition
	Recorded  *Transition
}

// sideBySide pairs the two sides' transitions by time: one row per
// moment, a transition both made at the same line on the same row.
func sideBySide(r *Result) []transitionRow {
	var rows []transitionRow
	i, j := 0, 0
	for i < len(r.Transitions) || j < len(r.Recorded) {
		var c, d *Transition
		if i < len(r.Transitions) {
			c = &r.Transitions[i]
		}
		if j < len(r.Recorded) {
			d = &r.Recorded[j]
		}
		switch {
		case d == nil || (c != nil && c.At.Before(d.At)):
			rows = append(rows, transitionRow{At: c.At, Candidate: c})
			i++
		case c == nil || d.At.Before(c.At):
			rows = append(rows, transitionRow{At: d.At, Recorded: d})
			j++
		default:
			rows = append(rows, transitionRow{At: c.At, Candidate: c, Recorded: d})
			i++
			j++
		}
	}
	return rows
}

// clock is a time as the report shows it: UTC to the millisecond.
func clock(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000") + " UTC"
}
