package browser

import (
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDashboardShowsShadowMode: a daemon in shadow mode, pinned at Major,
// shows SHADOW and what it would have shed, from GET /v1/admit and from
// the clients' reports, by level; the threshold says it is not enforced.
func TestDashboardShowsShadowMode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	d := startDaemon(t, "mode: shadow\n")
	if code, body := d.call(t, "PUT", "/v1/override", `{"level":"Major","ttl":"1h","reason":"shadow test"}`, adminToken); code != http.StatusOK {
		t.Fatalf("PUT /v1/override: %d %s", code, body)
	}
	for range 3 {
		if code, body := d.call(t, "GET", "/v1/admit?priority=10", "", ""); code != http.StatusNoContent {
			t.Fatalf("GET /v1/admit in shadow mode: %d %s, want 204", code, body)
		}
	}
	if code, body := d.call(t, "POST", "/v1/outcomes", `{"success":100,"would_shed":{"Major":12,"Minor":2}}`, ""); code != http.StatusAccepted {
		t.Fatalf("POST /v1/outcomes: %d %s", code, body)
	}

	p := openBrowser(t, time.Minute)
	p.do("open the dashboard", chromedp.Navigate(d.srv.URL+"/"))
	p.waitFor("the badge shows Major", text("level-name", "Major"), 10*time.Second)
	p.waitFor("the SHADOW banner is shown", `!document.getElementById('shadow').hidden &&
		document.getElementById('shadow').getBoundingClientRect().height > 0 &&
		document.getElementById('shadow-heading').textContent === 'SHADOW'`, 5*time.Second)
	p.waitFor("the would-shed counts are shown by level", text("would-shed", "Minor 2, Major 15"), 5*time.Second)
	p.waitFor("the threshold says it is not enforced", contains("threshold", "shadow mode: counted, not shed"), 2*time.Second)

	// More would-shed requests show up without a reload of the page.
	if code, _ := d.call(t, "GET", "/v1/admit?priority=0", "", ""); code != http.StatusNoContent {
		t.Fatalf("GET /v1/admit in shadow mode: %d, want 204", code)
	}
	p.waitFor("the counts follow", text("would-shed", "Minor 2, Major 16"), 5*time.Second)
	if probs := p.problems(); len(probs) > 0 {
		t.Errorf("the page reported problems: %v", probs)
	}
}
