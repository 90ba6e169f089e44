package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/errwindow"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const adminToken = "s3cret-admin"

// chromiumPath is Debian's chromium, or $DEGRADED_CHROMIUM.
func chromiumPath() string {
	if p := os.Getenv("DEGRADED_CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// wave is a CPU or memory sampler that traces a slow, deterministic wave,
// so that the sparklines have something to show and the level stays Normal
// until the test says otherwise.
type wave struct {
	base, amp, period float64
	n                 atomic.Int64
}

func (w *wave) Sample(context.Context, time.Time) (float64, error) {
	n := float64(w.n.Add(1))
	return w.base + w.amp*math.Sin(2*math.Pi*n/w.period) + w.amp*0.15*math.Sin(n*1.7), nil
}

var _ controller.Sampler = (*wave)(nil)

// daemon is the real API and controller, in-process, on a loopback server.
type daemon struct {
	srv  *httptest.Server
	ctrl *controller.Controller
}

func startDaemon(t *testing.T) *daemon {
	t.Helper()
	table, err := config.Default().Table() // the default six-level table
	if err != nil {
		t.Fatal(err)
	}
	win, err := errwindow.New(errwindow.Options{Window: time.Minute, Buckets: 6})
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := controller.New(controller.Options{
		Table:                table,
		HealthCheckInterval:  100 * time.Millisecond,
		MinimumLevelDuration: time.Hour, // no recovery while the test runs
		Hysteresis:           0.1,
		MinThroughput:        10,
		CPU:                  &wave{base: 38, amp: 12, period: 90},
		Memory:               &wave{base: 52, amp: 3, period: 300},
		Errors:               win,
	})
	if err != nil {
		t.Fatal(err)
	}
	tokens := new(atomic.Pointer[api.Tokens])
	tokens.Store(&api.Tokens{Admin: adminToken})
	srv := httptest.NewServer(api.NewServer(api.Deps{Controller: ctrl, Outcomes: win, Tokens: tokens, Heartbeat: time.Second}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		srv.CloseClientConnections() // the page's event stream
		srv.Close()
	})
	return &daemon{srv: srv, ctrl: ctrl}
}

// call makes one API request and returns the status and body.
func (d *daemon) call(t *testing.T, method, path, body, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, d.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := d.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, b
}

func (d *daemon) override(t *testing.T) *controller.Override {
	t.Helper()
	code, body := d.call(t, "GET", "/v1/override", "", "")
	var got struct{ Override *controller.Override }
	if err := json.Unmarshal(body, &got); code != 200 || err != nil {
		t.Fatalf("GET /v1/override: %d %s %v", code, body, err)
	}
	return got.Override
}

// page is one browser tab and what its console said.
type page struct {
	t   *testing.T
	ctx context.Context

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
}

// openBrowser starts headless Chromium with the flags this machine needs
// (no sandbox as root, no background networking on a closed network) and a
// fresh profile, and collects the console of its tab.
func openBrowser(t *testing.T, timeout time.Duration) *page {
	t.Helper()
	path := chromiumPath()
	if _, err := os.Stat(path); err != nil {
		t.Skipf("the browser test needs Chromium at %s (Debian: apt-get install chromium; .ci/run installs it): %v", path, err)
	}
	ctx, cancelTimeout := context.WithTimeout(context.Background(), timeout)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.WindowSize(1280, 900),
		// No UserDataDir: chromedp makes a fresh one and removes it.
	)
	tabCtx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithErrorf(t.Logf))
	p := &page{t: t, ctx: tabCtx}

	msgs := chromedp.Console(tabCtx) // subscribe before the first navigation
	var wg sync.WaitGroup
	wg.Go(func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			p.mu.Lock()
			p.console = append(p.console, m)
			p.mu.Unlock()
		}
	})
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits for the browser to exit
		cancelTimeout()
		wg.Wait()
	})
	return p
}

func (p *page) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v\n%s", what, err, p.summary())
	}
}

// waitFor polls a JavaScript predicate in the page until it holds or within
// passes, and returns how long it took.
func (p *page) waitFor(what, predicate string, within time.Duration) time.Duration {
	p.t.Helper()
	start := time.Now()
	_, err := chromedp.Run(p.ctx, chromedp.Poll[bool](predicate,
		chromedp.WithPollingTimeout(within), chromedp.WithPollingInterval(20*time.Millisecond)))
	if err != nil {
		p.t.Fatalf("%s: not within %v: %v\n%s", what, within, err, p.summary())
	}
	return time.Since(start)
}

func eval[T any](p *page, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// summary is what the page shows, for failure messages.
func (p *page) summary() string {
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({
		level: document.getElementById('level-name').textContent,
		badge: document.getElementById('badge').className,
		reason: document.getElementById('reason').textContent,
		conn: document.getElementById('conn').textContent,
		status: document.getElementById('ov-status').textContent,
		error: document.getElementById('ov-error').textContent})`))
	if err != nil {
		return "page: " + err.Error()
	}
	return "page: " + s
}

// text is a predicate: the element's trimmed text equals want.
func text(id, want string) string {
	return fmt.Sprintf(`document.getElementById(%q).textContent.trim() === %q`, id, want)
}

// contains is a predicate: the element's text contains want.
func contains(id, want string) string {
	return fmt.Sprintf(`document.getElementById(%q).textContent.includes(%q)`, id, want)
}

// problems are the exceptions and security errors (such as a blocked
// inline script) that the page's console reported.
func (p *page) problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.console {
		p.t.Logf("console %s: %s", m.Type, m.Text)
		if m.IsException() || m.Source == "security" || strings.Contains(m.Text, "Content Security Policy") {
			out = append(out, string(m.Type)+": "+m.Text)
		}
	}
	return out
}

func TestDashboardInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	d := startDaemon(t)
	p := openBrowser(t, 2*time.Minute)

	// The page loads, follows the stream and shows Normal.
	p.do("open the dashboard", chromedp.Navigate(d.srv.URL+"/"))
	p.waitFor("the badge shows Normal", text("level-name", "Normal"), 10*time.Second)
	p.waitFor("the event stream is live", `document.getElementById('conn').dataset.state === 'live'`, 10*time.Second)
	p.waitFor("the CPU value is shown", `/^\d+\.\d%$/.test(document.querySelector('#sig-cpu_percent [data-field=value]').textContent)`, 5*time.Second)
	if opts := eval[int](p, `document.querySelectorAll('#ov-level option').length`); opts != 6 {
		t.Errorf("the level select has %d options, want 6 (Normal and the five default levels)", opts)
	}

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

	// The screenshot the README shows, with the override active.
	if os.Getenv("UPDATE_SCREENSHOT") == "1" {
		// Let the sparklines fill a little (10 health checks a second).
		p.waitFor("sparklines with 200 points", `+document.querySelector('#sig-cpu_percent svg').dataset.points >= 200`, 40*time.Second)
	}
	p.do("a desktop viewport", chromedp.EmulateViewport(1280, 900), chromedp.Blur(chromedp.ID("ov-token")))
	shot, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(shotDir(t), "dashboard.png"), shot)
	if os.Getenv("UPDATE_SCREENSHOT") == "1" {
		writeFile(t, filepath.Join("..", "..", "docs", "dashboard.png"), shot)
		t.Log("wrote docs/dashboard.png")
	}

	t.Run("narrow screen", func(t *testing.T) {
		p.do("emulate a phone", chromedp.EmulateViewport(390, 844))
		defer p.do("back to the desktop viewport", chromedp.EmulateViewport(1280, 900))
		if fits := eval[bool](p, `document.documentElement.scrollWidth <= document.documentElement.clientWidth`); !fits {
			w := eval[int](p, `document.documentElement.scrollWidth`)
			t.Errorf("at 390px wide the page scrolls sideways (%dpx wide)", w)
		}
		if w := eval[float64](p, `document.querySelector('#history').getBoundingClientRect().width - document.querySelector('.table-wrap').clientWidth`); w > 1 {
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
	d.srv.CloseClientConnections()
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

// shotDir is where screenshots go: $DEGRADED_SCREENSHOT_DIR to look at
// them, else a temporary directory.
func shotDir(t *testing.T) string {
	if dir := os.Getenv("DEGRADED_SCREENSHOT_DIR"); dir != "" {
		return dir
	}
	return t.TempDir()
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
