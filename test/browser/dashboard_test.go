package browser

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/degraded/degraded/controller"
)

// TestDashboardInChromium is the dashboard as an operator uses it, in real
// headless Chromium against the real API and controller: it loads and shows
// Normal, follows a level change within 2s, shows the thresholds and the
// history, refuses a wrong token, sets an override from the form (from the
// keyboard) and clears it with the button, fits a phone's screen, and
// reconnects by itself when its stream is cut. Its screenshot goes to
// DEGRADED_SCREENSHOT_DIR; README's docs/dashboard.png is the History
// test's (history_test.go), which shows a recorded incident.

func TestDashboardInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	d := startDaemon(t, "")
	p := openBrowser(t, 2*time.Minute)

	// The page loads, follows the stream and shows Normal.
	p.do("open the dashboard", chromedp.Navigate(d.srv.URL+"/"))
	p.waitFor("the badge shows Normal", text("level-name", "Normal"), 10*time.Second)
	p.waitFor("the event stream is live", `document.getElementById('conn').dataset.state === 'live'`, 10*time.Second)
	p.waitFor("the CPU value is shown", `/^\d+\.\d%$/.test(document.querySelector('#sig-cpu_percent [data-field=value]').textContent)`, 5*time.Second)
	// The table comes from GET /v1/levels, read when the stream opens, in
	// parallel with the samples: it may land after the CPU value does.
	p.waitFor("the level select lists Normal and the five default levels", `document.querySelectorAll('#ov-level option').length === 6`, 5*time.Second)

	t.Run("keyboard: the skip link comes first", func(t *testing.T) {
		p.do("press Tab", chromedp.KeyEvent(kb.Tab))
		if cls := eval[string](p, `document.activeElement.className`); cls != "skip" {
			t.Errorf("first Tab focuses %q, want the skip link", cls)
		}
		if left := eval[float64](p, `document.activeElement.getBoundingClientRect().left`); left < 0 {
			t.Errorf("the focused skip link is off screen (left %v)", left)
		}
	})

	// The sparklines grow on every `event: sample`.
	points := func() int { return eval[int](p, `+document.querySelector('#sig-cpu_percent svg').dataset.points`) }
	before := points()
	p.waitFor("a sample event adds a point", fmt.Sprintf(`+document.querySelector('#sig-cpu_percent svg').dataset.points > %d`, before), 3*time.Second)

	// 7% errors: above Moderate's 5%, not above Major's 10%.
	if code, body := d.call(t, "POST", "/v1/outcomes", `{"success":930,"failure":70}`, ""); code != http.StatusAccepted {
		t.Fatalf("POST /v1/outcomes: %d %s", code, body)
	}
	d.ctrl.Check(context.Background())
	if st := d.ctrl.State(); st.Level != "Moderate" {
		t.Fatalf("the daemon is at %s after 7%% errors, want Moderate", st.Level)
	}
	took := p.waitFor("the badge shows Moderate within 2s", text("level-name", "Moderate"), 2*time.Second)
	t.Logf("the badge changed %v after the level did", took.Round(time.Millisecond))
	if cls := eval[string](p, `document.getElementById('badge').className`); cls != "badge sev-2" {
		t.Errorf("badge class %q, want \"badge sev-2\" (Moderate's colour)", cls)
	}
	p.waitFor("the reason names the signal", contains("reason", "error_rate 7.00% > 5% (Moderate)"), 2*time.Second)
	p.waitFor("the history lists the transition", `document.querySelector('#history tbody').textContent.includes('Normal → Moderate')`, 2*time.Second)
	p.waitFor("the error-rate card shows this level's and the next threshold",
		`document.querySelector('#sig-error_rate_percent [data-field=cur-th]').textContent === '> 5%' &&
		 document.querySelector('#sig-error_rate_percent [data-field=next-th]').textContent === '> 10%'`, 2*time.Second)

	// The override form: a wrong token is refused and changes nothing.
	const reason = "INC-42 browser test"
	p.do("fill the override form",
		chromedp.SetValue(chromedp.ID("ov-level"), "Major"),
		chromedp.Click(chromedp.CSS(`input[name="mode"][value="floor"]`)),
		chromedp.SetValue(chromedp.ID("ov-ttl"), "10m"),
		chromedp.SendKeys(chromedp.ID("ov-reason"), reason),
		chromedp.SetValue(chromedp.ID("ov-token"), "wrong"),
		chromedp.Click(chromedp.ID("ov-set")),
	)
	p.waitFor("a wrong token is reported", contains("ov-error", "Not authorised"), 3*time.Second)
	if o := d.override(t); o != nil {
		t.Fatalf("a wrong token set an override: %+v", o)
	}

	// The right token, submitted from the keyboard: Enter in the token field.
	p.do("enter the token and press Enter",
		chromedp.SetValue(chromedp.ID("ov-token"), adminToken),
		chromedp.SendKeys(chromedp.ID("ov-token"), kb.Enter),
	)
	p.waitFor("the form reports the override", contains("ov-status", "Override set"), 3*time.Second)
	o := d.override(t)
	if o == nil || o.Level != "Major" || o.Mode != controller.ModeFloor || o.Reason != reason {
		t.Fatalf("API override after the form: %+v, want floor Major %q", o, reason)
	}
	if ttl := o.ExpiresAt.Sub(o.SetAt); ttl != 10*time.Minute {
		t.Errorf("override ttl %v, want 10m", ttl)
	}
	p.waitFor("the badge shows the floor", text("level-name", "Major"), 2*time.Second)
	p.waitFor("the badge names the source", text("source", "operator override"), 2*time.Second)
	p.waitFor("the history lists the override", fmt.Sprintf(`document.querySelector('#history tbody tr').textContent.includes(%q)`, reason), 2*time.Second)

	// A screenshot with the override active.
	p.do("a desktop viewport", chromedp.EmulateViewport(1280, 900), chromedp.Blur(chromedp.ID("ov-token")))
	shot, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(shotDir(t), "dashboard.png"), shot)

	t.Run("narrow screen", func(t *testing.T) {
		p.do("emulate a phone", chromedp.EmulateViewport(390, 844))
		defer p.do("back to the desktop viewport", chromedp.EmulateViewport(1280, 900))
		if fits := eval[bool](p, `document.documentElement.scrollWidth <= document.documentElement.clientWidth`); !fits {
			w := eval[int](p, `document.documentElement.scrollWidth`)
			t.Errorf("at 390px wide the page scrolls sideways (%dpx wide)", w)
		}
		if w := eval[float64](p, `document.querySelector('#history').getBoundingClientRect().width - document.querySelector('#history').parentElement.clientWidth`); w > 1 {
			t.Errorf("at 390px wide the history table is %vpx wider than its box", w)
		}
		shot, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(shotDir(t), "dashboard-narrow.png"), shot)
	})

	// The clear button ends the override; automatic control resumes from
	// the published level.
	p.do("click Clear override", chromedp.Click(chromedp.ID("ov-clear")))
	p.waitFor("the form reports the clear", contains("ov-status", "Override cleared"), 3*time.Second)
	if o := d.override(t); o != nil {
		t.Fatalf("API override after Clear: %+v, want none", o)
	}
	p.waitFor("the page shows no override", contains("override-current", "No override is active"), 2*time.Second)
	if got := eval[string](p, `document.getElementById('level-name').textContent`); got != "Major" {
		t.Errorf("after clearing, the badge shows %s, want Major (automatic control resumes from the published level)", got)
	}

	// The stream reconnects on its own after the connection drops.
	d.srv.CutConnections()                // the hub hijacked the stream: httptest no longer sees it
	d.srv.Client().CloseIdleConnections() // ours were cut too
	if code, body := d.call(t, "PUT", "/v1/override", `{"level":"Severe","mode":"pin","ttl":"5m","reason":"reconnect test"}`, adminToken); code != 200 {
		t.Fatalf("PUT /v1/override: %d %s", code, body)
	}
	p.waitFor("the page reconnects and shows Severe", text("level-name", "Severe")+
		` && +document.getElementById('conn').dataset.opens >= 2`, 10*time.Second)

	if probs := p.problems(); len(probs) > 0 {
		t.Errorf("the page reported problems:\n%s", strings.Join(probs, "\n"))
	}
}
