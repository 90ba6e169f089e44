package browser

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/degraded/degraded/controller"
)

// TestDashboardFormRenewsTheFloor: with a floor active, the override form
// starts from it (floor, its level, its reason and the time it has left),
// so that "Set override" renews the floor instead of turning it into a
// 15-minute pin; cleared, the form is back to its defaults.
func TestDashboardFormRenewsTheFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	d := startDaemon(t, "")
	const reason = "INC-62 payments failover"
	if code, body := d.call(t, "PUT", "/v1/override", `{"level":"Major","mode":"floor","ttl":"10m","reason":"`+reason+`"}`, adminToken); code != http.StatusOK {
		t.Fatalf("PUT /v1/override: %d %s", code, body)
	}
	before := d.override(t)

	p := openBrowser(t, time.Minute)
	p.do("open the dashboard", chromedp.Navigate(d.srv.URL+"/"))
	p.waitFor("the page shows the floor", contains("override-current", "Floored at Major until"), 10*time.Second)
	p.waitFor("the form starts from the floor", `document.querySelector('input[name="mode"][value="floor"]').checked &&
		document.getElementById('ov-level').value === 'Major' &&
		document.getElementById('ov-ttl').value === '10m' &&
		document.getElementById('ov-reason').value === `+fmt.Sprintf("%q", reason)+` &&
		!document.getElementById('ov-renew-hint').hidden`, 5*time.Second)
	p.waitFor("the hint says so", contains("ov-renew-hint", "Filled in from the active floor"), time.Second)
	p.screenshot("dashboard-floor-form.png")

	p.do("enter the token and press Set override",
		chromedp.SendKeys(chromedp.ID("ov-token"), adminToken),
		chromedp.Click(chromedp.ID("ov-set")),
	)
	p.waitFor("the form reports the override", contains("ov-status", "Override set: floor Major for 10m"), 3*time.Second)
	after := d.override(t)
	if after == nil || after.Mode != controller.ModeFloor || after.Level != "Major" || after.Reason != reason {
		t.Fatalf("after Set override: %+v, want the same floor Major %q", after, reason)
	}
	if !after.ExpiresAt.After(before.ExpiresAt) {
		t.Errorf("Set override moved the floor's expiry from %v to %v: it should renew it", before.ExpiresAt, after.ExpiresAt)
	}

	p.do("click Clear override", chromedp.Click(chromedp.ID("ov-clear")))
	p.waitFor("the form is back to its defaults", `document.querySelector('input[name="mode"][value="pin"]').checked &&
		document.getElementById('ov-ttl').value === '15m' && document.getElementById('ov-reason').value === '' &&
		document.getElementById('ov-renew-hint').hidden`, 3*time.Second)
	if probs := p.problems(); len(probs) > 0 {
		t.Errorf("the page reported problems: %v", probs)
	}
}

// TestDashboardShowsPartialAndActors: the badge says what a graduated
// admission sheds, the band and the share shed ("priority below 30, and
// 77% of 30-49"); the override panel, the fleet panel and the history say
// who set each override and made each change. The controller publishes
// no partial yet, so the gate adds one to the state documents, and the
// fleet view is a hand-written document.
func TestDashboardShowsPartialAndActors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	d := startDaemon(t, "")
	if code, body := d.call(t, "POST", "/v1/outcomes", `{"success":880,"failure":120}`, ""); code != http.StatusAccepted {
		t.Fatalf("POST /v1/outcomes: %d %s", code, body)
	}
	d.ctrl.Check(context.Background())
	if st := d.ctrl.State(); st.Level != "Major" {
		t.Fatalf("the daemon is at %s after 12%% errors, want Major", st.Level)
	}
	if code, body := d.call(t, "PUT", "/v1/override", `{"level":"Minor","mode":"floor","ttl":"1h","reason":"INC-63 keep a floor"}`, adminToken); code != http.StatusOK {
		t.Fatalf("PUT /v1/override: %d %s", code, body)
	}
	at := time.Now().UTC()
	fleetOverride := fmt.Sprintf(`{"level":"Moderate","mode":"floor","reason":"INC-7 fleet floor","set_at":%q,"expires_at":%q,"actor":"bob","mod_revision":7}`,
		at.Format(time.RFC3339Nano), at.Add(time.Hour).Format(time.RFC3339Nano))
	g := newGate(t, d.srv.URL)
	g.set("partial", `{"from":30,"fraction":0.23}`)
	g.set("fleet", `{"name":"shop","instance":"a","connected":true,"override":`+fleetOverride+`}`)
	g.serve("/v1/fleet", `{"name":"shop","instance":"a","connected":true,"override":`+fleetOverride+`,"aggregator":null,`+
		`"instances":[{"instance":"a","level":"Major","index":3,"source":"auto","signals":{},"seen_at":"`+at.Format(time.RFC3339Nano)+`"}],`+
		`"levels":{"Major":1},"error_rate_percent":12,"window_attempts":1000,"window_failures":120}`)

	p := openBrowser(t, time.Minute)
	p.do("open the dashboard", chromedp.Navigate(g.srv.URL+"/"))
	p.waitFor("the badge shows Major", text("level-name", "Major"), 10*time.Second)
	p.waitFor("it says what the partial admission sheds", text("threshold-label", "Sheds")+" && "+
		text("threshold", "priority below 30, and 77% of 30-49"), 5*time.Second)
	p.waitFor("the override panel says who set the floor", contains("override-current", "Floored at Minor until")+" && "+
		contains("override-current", ", set by admin"), 5*time.Second)
	p.waitFor("the fleet panel says who set the fleet floor", contains("fleet-override", "Floored at Moderate until")+" && "+
		contains("fleet-override", ", set by bob"), 5*time.Second)

	rows := func() string {
		return eval[string](p, `Array.from(document.querySelectorAll('#history tbody tr'), (tr) =>
			Array.from(tr.cells, (td) => td.textContent).join('|')).join('\n')`)
	}
	p.waitFor("the history has a By column", `document.querySelector('#history thead').textContent.includes('By')`, 2*time.Second)
	p.waitFor("the history says who made each change", `document.querySelectorAll('#history tbody td.actor').length === 2`, 5*time.Second)
	got := rows()
	for _, want := range []string{"|Major (unchanged)|override|admin|override set: floor Minor", "|Normal → Major|auto|degraded|error_rate 12.00% > 10% (Major)"} {
		if !strings.Contains(got, want) {
			t.Errorf("history rows lack %q:\n%s", want, got)
		}
	}
	p.waitFor("the badge has Major's colour", `getComputedStyle(document.getElementById('badge')).backgroundColor === 'rgb(194, 65, 12)'`, 2*time.Second)
	p.screenshot("dashboard-partial-and-actors.png")

	t.Run("shadow mode", func(t *testing.T) {
		g.set("shadow", "true")
		if code, body := d.call(t, "PUT", "/v1/override", `{"level":"Minor","mode":"floor","ttl":"2h","reason":"INC-63 longer"}`, adminToken); code != http.StatusOK {
			t.Fatalf("PUT /v1/override: %d %s", code, body) // a new state document, now patched with shadow
		}
		p.waitFor("it says what would be shed, and that nothing is", text("threshold-label", "Would shed")+" && "+
			text("threshold", "priority below 30, and 77% of 30-49 (shadow mode: counted, not shed)"), 5*time.Second)
	})
	if probs := p.problems(); len(probs) > 0 {
		t.Errorf("the page reported problems: %v", probs)
	}
}
