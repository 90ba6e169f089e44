package browser

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/degraded/degraded/internal/daemon/daemontest"
	"github.com/degraded/degraded/internal/replay"
)

// candidateConfig is the config the incident is replayed under: Major's
// cpu threshold at 70 from the start, the classic table rule
// (admission.mode: levels) and a 10s dwell.
func candidateConfig(dir string) string {
	return strings.Replace(incidentConfig(dir, 70), "minimum_level_duration: 30s", "minimum_level_duration: 10s\nadmission: {mode: levels}", 1)
}

// TestReplayReportInChromium replays the recorded incident under a
// candidate config into the HTML report (`degraded replay --format html`'s
// code) and opens the file, offline, in real Chromium: it draws the
// recorded and the candidate level, the candidate's over the recorded
// one, the cpu chart with both tables' thresholds (the recorded ones
// changing at alice's reload), the marks of her pin and reload, the
// summary table and the transitions side by side, and loads nothing from
// anywhere. UPDATE_SCREENSHOT=1 writes docs/replay-report.png.
func TestReplayReportInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	data := t.TempDir()
	in := recordIncident(t, data)
	files, err := replay.Files([]string{filepath.Join(data, "timeline")})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := replay.WriteHTML(&out, replay.Options{Config: daemontest.Config(t, candidateConfig(data)), Files: files},
		replay.HTMLInfo{Candidate: "candidate.yaml", Timelines: []string{"data/timeline"}, Generated: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Transitions) == 0 || len(res.Recorded) == 0 {
		t.Fatalf("the replay found %d candidate and %d recorded transitions, want both sides' incident", len(res.Transitions), len(res.Recorded))
	}
	page := out.String()
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|https?://[a-z]`).FindString(strings.ReplaceAll(page, "http://www.w3.org/2000/svg", "")); m != "" {
		t.Errorf("the report refers to another origin: %q", m)
	}
	path := filepath.Join(t.TempDir(), "report.html")
	writeFile(t, path, out.Bytes())
	t.Logf("report: %d bytes", out.Len())

	p := openBrowser(t, 2*time.Minute)
	p.do("open the report", chromedp.Navigate("file://"+path))
	p.waitFor("the charts are drawn", `document.getElementById('charts').dataset.rendered === '1'`, 10*time.Second)

	type drawn struct {
		Level, Source, Set, Kind, Actor string
		From, To, At                    time.Time
		Value                           float64
	}
	var got struct {
		Recorded, Candidate, Overlay []drawn
		Thresholds, Marks            []drawn
		Summary, Transitions         []string
	}
	js := `JSON.stringify({
		Recorded: Array.from(document.querySelectorAll('svg[data-lane="recorded"] rect.band'), (e) => ({Level: e.dataset.level, Source: e.dataset.source, From: e.dataset.from, To: e.dataset.to})),
		Candidate: Array.from(document.querySelectorAll('svg[data-lane="candidate"] rect.band'), (e) => ({Level: e.dataset.level, Source: e.dataset.source, From: e.dataset.from, To: e.dataset.to})),
		Overlay: Array.from(document.querySelectorAll('svg[data-lane="recorded"] path.overlay'), (e) => ({Set: e.dataset.lane})),
		Thresholds: Array.from(document.querySelectorAll('svg[data-signal="cpu"] line.th'), (e) => ({Level: e.dataset.level, Set: e.dataset.set, Value: +e.dataset.value, From: e.dataset.from, To: e.dataset.to})),
		Marks: Array.from(document.querySelectorAll('svg[data-lane="recorded"] line.mark'), (e) => ({Kind: e.dataset.kind, Actor: e.dataset.actor, At: e.dataset.at})),
		Summary: Array.from(document.querySelectorAll('#summary tbody tr'), (e) => e.textContent.replace(/\s+/g, ' ').trim()),
		Transitions: Array.from(document.querySelectorAll('#transitions tbody tr'), (e) => e.textContent.replace(/\s+/g, ' ').trim()),
	})`
	if err := json.Unmarshal([]byte(eval[string](p, js)), &got); err != nil {
		t.Fatal(err)
	}
	near := func(a, b time.Time) bool { return a.Sub(b).Abs() <= 2*time.Second } // a 7-minute report in 2000 buckets
	has := func(ds []drawn, ok func(drawn) bool) bool {
		for _, d := range ds {
			if ok(d) {
				return true
			}
		}
		return false
	}
	if !has(got.Recorded, func(d drawn) bool { return d.Level == "Severe" && d.Source == "override" && near(d.From, in.pinned) }) {
		t.Errorf("the recorded lane has no Severe pin from %s: %+v", in.pinned.Format(time.TimeOnly), got.Recorded)
	}
	if !has(got.Candidate, func(d drawn) bool { return d.Level == "Severe" && d.Source == "override" && near(d.From, in.pinned) }) {
		t.Errorf("the candidate lane has no replayed pin from %s: %+v", in.pinned.Format(time.TimeOnly), got.Candidate)
	}
	if !has(got.Candidate, func(d drawn) bool { return d.Level == "Major" && d.Source == "auto" && d.From.Before(in.pinned) }) {
		t.Errorf("the candidate (Major at 70%%, the table rule) never reached Major before the pin: %+v", got.Candidate)
	}
	if len(got.Overlay) != 1 || got.Overlay[0].Set != "candidate" {
		t.Errorf("the recorded lane's overlay %+v, want the candidate's level drawn over it", got.Overlay)
	}
	for _, want := range []struct {
		set   string
		value float64
		from  time.Time
		to    time.Time
	}{
		{"recorded", 80, in.start, in.reloaded},
		{"recorded", 75, in.reloaded, time.Time{}},
		{"candidate", 70, in.start, time.Time{}},
	} {
		if !has(got.Thresholds, func(d drawn) bool {
			return d.Level == "Major" && d.Set == want.set && d.Value == want.value && near(d.From, want.from) && (want.to.IsZero() || near(d.To, want.to))
		}) {
			t.Errorf("no %s Major threshold at %v%% from %s: %+v", want.set, want.value, want.from.Format(time.TimeOnly), got.Thresholds)
		}
	}
	for _, want := range []struct {
		kind, actor string
		at          time.Time
	}{{"override", "alice", in.pinned}, {"reload", "alice", in.reloaded}, {"override", "degraded", in.expired}} {
		if !has(got.Marks, func(d drawn) bool { return d.Kind == want.kind && d.Actor == want.actor && near(d.At, want.at) }) {
			t.Errorf("no %s mark by %s at %s: %+v", want.kind, want.actor, want.at.Format(time.TimeOnly), got.Marks)
		}
	}
	summary := strings.Join(got.Summary, "\n")
	for _, want := range []string{"Time at Normal", "Time at Severe", "Flaps (a level re-entered within", "Shed, estimated from the offered load by priority", "Shed, as the clients reported"} {
		if !strings.Contains(summary, want) {
			t.Errorf("the summary lacks %q:\n%s", want, summary)
		}
	}
	if len(got.Transitions) < len(res.Recorded) || !strings.Contains(strings.Join(got.Transitions, "\n"), "Normal → Moderate") {
		t.Errorf("the transitions table:\n%s\nwant both sides' transitions", strings.Join(got.Transitions, "\n"))
	}

	shot, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(shotDir(t), "replay-report.png"), shot)
	if os.Getenv("UPDATE_SCREENSHOT") == "1" {
		writeFile(t, filepath.Join("..", "..", "docs", "replay-report.png"), shot)
		t.Log("wrote docs/replay-report.png")
	}
	if probs := p.problems(); len(probs) > 0 {
		t.Errorf("the report reported problems:\n%s", strings.Join(probs, "\n"))
	}
}
