package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/degraded/degraded/controller"
	rig "github.com/degraded/degraded/internal/daemon"
	"github.com/degraded/degraded/internal/daemon/daemontest"
	"go.uber.org/goleak"
)

// The test's rig: the daemon in-process, Chromium, and small helpers.

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
	srv  *daemontest.Server
	ctrl *controller.Controller
}

// startDaemon starts it with the default six-level table and no recovery
// while the test runs; extra is more YAML for the config (such as
// "mode: shadow"), or "".
func startDaemon(t *testing.T, extra string) *daemon {
	t.Helper()
	return startDaemonOn(t, extra, nil)
}

// startDaemonOn is startDaemon with its state in store (nil: none).
func startDaemonOn(t *testing.T, extra string, store controller.Store) *daemon {
	t.Helper()
	r := daemontest.Start(t, `
data_dir: ""
health_check_interval: 100ms
minimum_level_duration: 1h
auth: {token: "`+adminToken+`"}
sse: {heartbeat: 1s}
`+extra, rig.Options{
		CPU:    &wave{base: 38, amp: 12, period: 90},
		Memory: &wave{base: 52, amp: 3, period: 300},
		Store:  store,
	})
	return &daemon{srv: r.Server, ctrl: r.Controller()}
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
