package browser

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	rig "github.com/degraded/degraded/internal/daemon"
	"github.com/degraded/degraded/internal/daemon/daemontest"
)

// TestHistoryInChromium is the History view the morning after: the
// recorded incident, served by a real daemon from its data_dir, in real
// headless Chromium. The view asks for the admin token, then draws the
// last hour: the level bands with the partial admission shaded, the cpu
// chart with the thresholds of the table in force before and after
// alice's reload, and the marks of her pin, the reload, the pin's expiry
// and the restarts, each at its time; pointing at the pin shows the
// moment and then its recorded line; live samples are appended.
// UPDATE_SCREENSHOT=1 writes docs/history.png and docs/dashboard.png.
func TestHistoryInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	data := t.TempDir()
	in := recordIncident(t, data)
	r := daemontest.Start(t, fmt.Sprintf(`data_dir: %q
health_check_interval: 200ms
minimum_level_duration: 30s
auth: {token: %q, operators: [{name: alice, token: %q}]}
sse: {heartbeat: 1s}
`, data, adminToken, aliceToken)+incidentTable(75), rig.Options{CPU: &wave{base: 24, amp: 4, period: 90}, Memory: &wave{base: 52, amp: 2, period: 300}})
	p := openBrowser(t, 3*time.Minute)
	p.do("open the dashboard", chromedp.Navigate(r.URL+"/"))
	p.waitFor("the History view asks for the admin token", `!document.getElementById('tl-auth').hidden`, 10*time.Second)
	p.do("enter alice's token", chromedp.SetValue(chromedp.ID("tl-token"), aliceToken), chromedp.Click(chromedp.ID("tl-token-show")))
	p.waitFor("the last hour is drawn", `document.querySelectorAll('#tl-charts svg[data-lane="published"] rect.band').length > 3 &&
		document.querySelector('#tl-charts svg[data-signal="cpu"]') !== null`, 10*time.Second)

	// Every element the checks below look at, with its time and where it
	// is drawn, and the chart's scale.
	type drawn struct {
		Kind, Level, Source, Actor, Action, Set, Text string
		From, To, At                                  time.Time
		X1, X2, Y1                                    float64
		Value, Fraction                               float64
	}
	type chart struct {
		X0, X1, T0, T1, Lo, Hi, Top, Bottom float64
		Bands, Partials, Thresholds, Marks  []drawn
	}
	read := func(sel string) chart {
		t.Helper()
		js := `(() => {
			const s = document.querySelector(` + jsString(sel) + `);
			const d = s.dataset, num = (v) => v === undefined ? 0 : +v;
			const out = {X0: num(d.x0), X1: num(d.x1), T0: num(d.t0), T1: num(d.t1), Lo: num(d.lo), Hi: num(d.hi), Top: num(d.top), Bottom: num(d.bottom),
				Bands: [], Partials: [], Thresholds: [], Marks: []};
			for (const e of s.querySelectorAll('rect.band')) out.Bands.push({Level: e.dataset.level, Source: e.dataset.source, From: e.dataset.from, To: e.dataset.to, X1: +e.getAttribute('x'), X2: +e.getAttribute('x') + +e.getAttribute('width')});
			for (const e of s.querySelectorAll('rect.partial')) out.Partials.push({From: e.dataset.from, Fraction: +e.dataset.fraction, X1: +e.getAttribute('x')});
			for (const e of s.querySelectorAll('line.th')) out.Thresholds.push({Level: e.dataset.level, Set: e.dataset.set, Value: +e.dataset.value, From: e.dataset.from, To: e.dataset.to, X1: +e.getAttribute('x1'), X2: +e.getAttribute('x2'), Y1: +e.getAttribute('y1')});
			for (const e of s.querySelectorAll('line.mark')) out.Marks.push({Kind: e.dataset.kind, Action: e.dataset.action, Actor: e.dataset.actor, At: e.dataset.at, X1: +e.getAttribute('x1')});
			for (const e of s.querySelectorAll('g.flag')) out.Marks.push({Kind: 'flag-' + e.dataset.kind, Actor: e.dataset.actor, At: e.dataset.at, Text: e.textContent});
			return JSON.stringify(out);
		})()`
		var c chart
		if err := json.Unmarshal([]byte(eval[string](p, js)), &c); err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return c
	}
	lane := read(`#tl-charts svg[data-lane="published"]`)
	cpu := read(`#tl-charts svg[data-signal="cpu"]`)
	x := func(c chart, at time.Time) float64 {
		ms := float64(at.UnixMilli())
		return c.X0 + (ms-c.T0)/(c.T1-c.T0)*(c.X1-c.X0)
	}
	y := func(c chart, v float64) float64 { return c.Bottom - (v-c.Lo)/(c.Hi-c.Lo)*(c.Bottom-c.Top) }
	near := func(a, b time.Time) bool { return a.Sub(b).Abs() <= 3*time.Second } // within the view's buckets (1h in ~1000)
	px := func(a, b float64) bool { return math.Abs(a-b) <= 2 }

	t.Run("bands", func(t *testing.T) {
		find := func(level, source string, at time.Time) *drawn {
			for i, b := range lane.Bands {
				if b.Level == level && b.Source == source && near(b.From, at) {
					return &lane.Bands[i]
				}
			}
			return nil
		}
		for _, want := range []struct {
			what, level, source string
			at                  time.Time
		}{
			{"the escalation", "Moderate", "auto", in.escalated},
			{"alice's pin", "Severe", "override", in.pinned},
			{"the pin's expiry", "Severe", "auto", in.expired},
			{"the recovery", "Normal", "auto", in.recovered},
		} {
			b := find(want.level, want.source, want.at)
			if b == nil {
				t.Errorf("no %s band (%s) from %s:\n%+v", want.level, want.source, want.at.Format(time.TimeOnly), lane.Bands)
				continue
			}
			if !px(b.X1, x(lane, want.at)) {
				t.Errorf("%s: the band starts at x=%.1f, want %.1f (%s)", want.what, b.X1, x(lane, want.at), want.at.Format(time.TimeOnly))
			}
		}
		var partial bool
		for _, pa := range lane.Partials {
			partial = partial || (!pa.From.Before(in.escalated) && pa.From.Before(in.pinned) && pa.Fraction > 0 && pa.Fraction < 1)
		}
		if !partial {
			t.Errorf("no partial admission shaded between the escalation and the pin: %+v", lane.Partials)
		}
	})

	t.Run("thresholds", func(t *testing.T) {
		var major []drawn
		for _, th := range cpu.Thresholds {
			if th.Level == "Major" {
				major = append(major, th)
			}
		}
		if len(major) < 2 || major[0].Value != 80 || major[1].Value != 75 || !near(major[0].To, in.reloaded) || !near(major[1].From, in.reloaded) {
			t.Fatalf("Major's cpu thresholds %+v, want 80 until alice's reload at %s, then 75", major, in.reloaded.Format(time.TimeOnly))
		}
		if !px(major[0].X2, x(cpu, in.reloaded)) || !px(major[1].X1, x(cpu, in.reloaded)) {
			t.Errorf("the thresholds change at x=%.1f/%.1f, want %.1f (the reload)", major[0].X2, major[1].X1, x(cpu, in.reloaded))
		}
		if !px(major[0].Y1, y(cpu, 80)) || !px(major[1].Y1, y(cpu, 75)) || major[0].Y1 >= major[1].Y1 {
			t.Errorf("the thresholds are drawn at y=%.1f and %.1f, want %.1f (80%%) above %.1f (75%%)", major[0].Y1, major[1].Y1, y(cpu, 80), y(cpu, 75))
		}
	})

	t.Run("marks", func(t *testing.T) {
		has := func(c chart, kind, action, actor string, at time.Time, text string) bool {
			for _, m := range c.Marks {
				if m.Kind == kind && (action == "" || m.Action == action) && m.Actor == actor && near(m.At, at) && strings.Contains(m.Text, text) &&
					(strings.HasPrefix(kind, "flag-") || px(m.X1, x(c, at))) {
					return true
				}
			}
			return false
		}
		for _, want := range []struct {
			c                         chart
			kind, action, actor, text string
			at                        time.Time
		}{
			{lane, "override", "set", "alice", "", in.pinned},
			{cpu, "override", "set", "alice", "", in.pinned},
			{lane, "flag-override", "", "alice", "pin Severe · alice", in.pinned},
			{lane, "reload", "", "alice", "", in.reloaded},
			{lane, "flag-reload", "", "alice", "reload · alice", in.reloaded},
			{lane, "override", "expired", "degraded", "", in.expired},
			{lane, "restart", "", "degraded", "", in.start},
		} {
			if !has(want.c, want.kind, want.action, want.actor, want.at, want.text) {
				t.Errorf("no %s %s mark by %s at %s (%q):\n%+v", want.kind, want.action, want.actor, want.at.Format(time.TimeOnly), want.text, want.c.Marks)
			}
		}
	})

	t.Run("pointing at a moment shows it, then its line", func(t *testing.T) {
		at := in.pinned.Add(20 * time.Second)
		box := eval[[]float64](p, `(() => { const r = document.querySelector('#tl-charts svg[data-lane="published"]').getBoundingClientRect(); return [r.left, r.top + 30]; })()`)
		p.do("point at the pin", chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, box[0]+x(lane, at), box[1]))
		p.waitFor("the tooltip names the pinned level", `!document.querySelector('.tl-tip').hidden && document.querySelector('.tl-tip').textContent.includes('Published level: Severe (override)')`, 2*time.Second)
		p.waitFor("the tooltip shows the recorded line", `(document.querySelector('.tl-tip .tip-line') || {textContent: ''}).textContent.includes('override pin Severe by alice')`, 5*time.Second)
		if shot, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot()); err == nil {
			writeFile(t, filepath.Join(shotDir(t), "history-hover.png"), shot)
		}
	})

	// The screenshots show the incident over the last 15 minutes.
	p.do("show the last 15 minutes", chromedp.Click(chromedp.CSS(`#timeline .tl-range[data-range="15m"]`)))
	p.waitFor("the 15 minutes are drawn", `document.querySelector('#timeline .tl-range[data-range="15m"]').getAttribute('aria-pressed') === 'true' &&
		document.getElementById('tl-charts').getAttribute('aria-busy') === null`, 10*time.Second)
	shots(t, p)

	t.Run("live samples are appended", func(t *testing.T) {
		before := eval[int](p, `+document.querySelector('#tl-charts svg[data-signal="cpu"]').dataset.points`)
		p.waitFor("more cpu points", fmt.Sprintf(`+document.querySelector('#tl-charts svg[data-signal="cpu"]').dataset.points > %d`, before), 5*time.Second)
	})

	if probs := p.problems(); len(probs) > 0 {
		t.Errorf("the page reported problems:\n%s", strings.Join(probs, "\n"))
	}
}

// shots writes the History view's screenshots: the view alone and the
// whole dashboard, into docs/ with UPDATE_SCREENSHOT=1.
func shots(t *testing.T, p *page) {
	t.Helper()
	p.do("move the pointer away", chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, 1, 1))
	view, err := chromedp.Run(p.ctx, chromedp.Screenshot(chromedp.CSS("#timeline")))
	if err != nil {
		t.Fatal(err)
	}
	page, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(shotDir(t), "history.png"), view)
	writeFile(t, filepath.Join(shotDir(t), "dashboard-history.png"), page)
	if os.Getenv("UPDATE_SCREENSHOT") == "1" {
		writeFile(t, filepath.Join("..", "..", "docs", "history.png"), view)
		writeFile(t, filepath.Join("..", "..", "docs", "dashboard.png"), page)
		t.Log("wrote docs/history.png and docs/dashboard.png")
	}
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
