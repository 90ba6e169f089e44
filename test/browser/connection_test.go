package browser

import (
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// screenshot writes the page as it is to name in shotDir and logs where.
func (p *page) screenshot(name string) {
	p.t.Helper()
	shot, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(shotDir(p.t), name)
	writeFile(p.t, path, shot)
	p.t.Logf("screenshot: %s", path)
}

// badgeIsLive is a predicate: the badge looks live (no stale mark, headed
// as the current level).
const badgeIsLive = `!document.getElementById('badge').classList.contains('stale') &&
	document.getElementById('badge').dataset.live === 'true' &&
	document.getElementById('level-heading').textContent === 'Current level' &&
	document.getElementById('badge-stale').hidden`

// TestDashboardAfterLosingTheDaemon: when the daemon goes away the page
// says "Reconnecting…" for a few seconds, then "Disconnected for 6s",
// counting, and the badge stops looking live: greyed, headed "Last known
// level", with a sentence saying so. When the daemon is back, it is live
// again by itself.
func TestDashboardAfterLosingTheDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	d := startDaemon(t, "")
	g := newGate(t, d.srv.URL)
	if code, body := d.call(t, "PUT", "/v1/override", `{"level":"Major","mode":"pin","ttl":"1h","reason":"INC-60"}`, adminToken); code != http.StatusOK {
		t.Fatalf("PUT /v1/override: %d %s", code, body)
	}
	p := openBrowser(t, 2*time.Minute)
	p.do("open the dashboard", chromedp.Navigate(g.srv.URL+"/"))
	p.waitFor("the badge shows Major, live", text("level-name", "Major")+` && document.getElementById('conn').dataset.state === 'live' && `+badgeIsLive, 10*time.Second)

	lost := time.Now()
	g.setDown(true)
	p.waitFor("the page is reconnecting", text("conn", "Reconnecting…"), 5*time.Second)
	if time.Since(lost) < 4*time.Second && !eval[bool](p, badgeIsLive) {
		t.Error("the badge stopped looking live within the reconnect window: a short restart should not grey it")
	}
	p.waitFor("then it says for how long it has been disconnected", `/^Disconnected for \d+s$/.test(document.getElementById('conn').textContent)`, 10*time.Second)
	t.Logf("\"Disconnected\" %v after the daemon went away", time.Since(lost).Round(100*time.Millisecond))
	if !eval[bool](p, `document.getElementById('badge').classList.contains('stale') &&
		document.getElementById('badge').dataset.live === 'false' &&
		document.getElementById('level-heading').textContent === 'Last known level' &&
		!document.getElementById('badge-stale').hidden &&
		getComputedStyle(document.getElementById('badge')).backgroundImage.includes('gradient')`) {
		t.Errorf("disconnected, the badge still looks live: %s", p.summary())
	}
	p.waitFor("the note says it is the last level known", contains("badge-stale", "this is the last level the daemon published, not a live one"), time.Second)
	p.waitFor("the level's name stays written out", text("level-name", "Major"), time.Second)
	first := seconds(t, eval[string](p, `document.getElementById('conn').textContent`))
	p.waitFor("the time counts", `+document.getElementById('conn').textContent.match(/(\d+)s$/)[1] > `+strconv.Itoa(first), 3*time.Second)
	p.screenshot("dashboard-disconnected.png")

	g.setDown(false)
	p.waitFor("back: live again by itself", `document.getElementById('conn').dataset.state === 'live' && `+badgeIsLive, 15*time.Second)
	if probs := p.problems(); len(probs) > 0 {
		t.Errorf("the page reported problems: %v", probs)
	}
}

func seconds(t *testing.T, s string) int {
	t.Helper()
	m := regexp.MustCompile(`(\d+)s$`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no seconds in %q", s)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestDashboardBeforeTheTableLoads: the state can arrive before the level
// table; until the table is there, a level other than Normal is shown by
// name and index, in a neutral badge, never in the most severe level's
// colour. Once the table loads it takes its own colour and "of 5".
func TestDashboardBeforeTheTableLoads(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	d := startDaemon(t, "")
	g := newGate(t, d.srv.URL)
	if code, body := d.call(t, "PUT", "/v1/override", `{"level":"Major","mode":"pin","ttl":"1h","reason":"INC-61"}`, adminToken); code != http.StatusOK {
		t.Fatalf("PUT /v1/override: %d %s", code, body)
	}
	release := g.holdLevels()
	defer release()
	p := openBrowser(t, time.Minute)
	p.do("open the dashboard", chromedp.Navigate(g.srv.URL+"/"))
	p.waitFor("the badge shows Major by name", text("level-name", "Major")+" && "+text("level-index", "Level 3"), 10*time.Second)
	if cls := eval[string](p, `document.getElementById('badge').className`); cls != "badge sev-none" {
		t.Errorf("before the table loads the badge's class is %q, want \"badge sev-none\" (no severity colour yet)", cls)
	}
	bg := eval[string](p, `getComputedStyle(document.getElementById('badge')).backgroundColor`)
	panel := eval[string](p, `getComputedStyle(document.querySelector('.panel')).backgroundColor`)
	if bg != panel {
		t.Errorf("before the table loads the badge is %s, want the neutral panel colour %s (purple is rgb(88, 28, 135))", bg, panel)
	}
	p.screenshot("dashboard-first-paint.png")

	release()
	p.waitFor("the table loads: Major's colour and its place in the table",
		`document.getElementById('badge').classList.contains('sev-3') && `+text("level-index", "Level 3 of 5"), 5*time.Second)
	p.waitFor("the colour is Major's", `getComputedStyle(document.getElementById('badge')).backgroundColor === 'rgb(194, 65, 12)'`, 2*time.Second)
	p.screenshot("dashboard-table-loaded.png")
	if probs := p.problems(); len(probs) > 0 {
		t.Errorf("the page reported problems: %v", probs)
	}
}
