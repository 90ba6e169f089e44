package browser

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/degraded/degraded/api"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/errwindow"
	"github.com/degraded/degraded/internal/daemon/daemontest"
	"github.com/degraded/degraded/levels"
	"github.com/degraded/degraded/signals"
)

// TestDashboardSignalCards is the signals panel with every kind of card, in
// real headless Chromium: a daemon with latency, pressure and pushed custom
// signals shows one card per configured signal in the contract's order,
// with the value and its unit, the state of a signal that is warming,
// failed or absent, and the next threshold; latency its observations and
// pressure its avg60; no card for a signal that is off; and a reload that
// adds and removes custom signals adds and removes their cards, with the
// new thresholds.

// customTable is the test's level table, with thresholds only for the
// custom signals named: queue_depth has them at Major and Severe only, so
// its next threshold at Normal skips the levels between. memory_pressure
// has none, which turns it off.
func customTable(t *testing.T, custom ...levels.Signal) *levels.Table {
	t.Helper()
	const (
		queueDepth = levels.Signal("queue_depth")
		inflight   = levels.Signal("inflight")
	)
	rows := []levels.Level{
		{Name: "Minor", PriorityThreshold: 10, Thresholds: levels.Thresholds{levels.CPU: 60, levels.ErrorRate: 1}},
		{Name: "Moderate", PriorityThreshold: 30, Thresholds: levels.Thresholds{levels.CPU: 70, levels.ErrorRate: 5, levels.CPUPressure: 20}},
		{Name: "Major", PriorityThreshold: 50, Thresholds: levels.Thresholds{levels.CPU: 80, levels.Latency: 900, queueDepth: 1000, inflight: 50}},
		{Name: "Severe", PriorityThreshold: 70, Thresholds: levels.Thresholds{levels.CPU: 90, levels.Latency: 1500, levels.CPUPressure: 40, levels.IOPressure: 30, queueDepth: 5000}},
	}
	for _, row := range rows {
		maps.DeleteFunc(row.Thresholds, func(s levels.Signal, _ float64) bool { return !s.Builtin() && !slices.Contains(custom, s) })
	}
	table, err := levels.NewTableWith(rows, levels.TableOptions{Custom: custom})
	if err != nil {
		t.Fatal(err)
	}
	return table
}

// latencyWindow is the error window with fixed latencies: 1460 at most
// 500ms and 40 in (500, 1000], so that p99 is 812.5ms over 1500
// observations.
type latencyWindow struct{ *errwindow.Window }

func (latencyWindow) LatencyCounts(time.Time) (c [levels.NumLatencyBuckets]int64) {
	c[8], c[9] = 1460, 40
	return c
}

var _ controller.LatencyWindow = latencyWindow{}

// pressure is a PSI source with fixed readings: CPU some avg10 12.5%
// (avg60 8.4%), I/O absent, memory 3% (off: no level has a threshold).
type pressure struct{}

func (pressure) Instant() bool { return false }

func (pressure) Read(context.Context, time.Time) []levels.Reading {
	avg60 := 8.4
	return []levels.Reading{
		{Signal: levels.CPUPressure, State: levels.Available, Value: 12.5, HasValue: true, Recovery: &avg60},
		{Signal: levels.MemoryPressure, State: levels.Available, Value: 3, HasValue: true, Recovery: &avg60},
		{Signal: levels.IOPressure, State: levels.Absent},
	}
}

var _ controller.Source = pressure{}

// customDaemon is the API and controller wired by hand around a
// signals.Pushed store, as `degraded serve` wires signals.custom.
type customDaemon struct {
	daemon
	pushed *signals.Pushed
	opts   controller.Options
}

// startCustomDaemon runs a daemon with CPU (a wave), the error rate
// (absent: no reports), latency (812.5ms), CPU pressure (12.5%), I/O
// pressure (absent), memory and memory pressure off, and the pushed custom signals queue_depth (ttl 1m), stale_jobs (a ttl of 1ns:
// failed as soon as a value is pushed) and backlog_age (never pushed:
// warming).
func startCustomDaemon(t *testing.T) *customDaemon {
	t.Helper()
	window, err := errwindow.New(errwindow.Options{Window: time.Hour, Buckets: 60})
	if err != nil {
		t.Fatal(err)
	}
	d := &customDaemon{pushed: &signals.Pushed{}}
	d.pushed.Configure([]signals.PushedSignal{
		{Name: "queue_depth", TTL: time.Minute},
		{Name: "stale_jobs", TTL: time.Nanosecond},
		{Name: "backlog_age", TTL: time.Minute},
	}, nil)
	d.opts = controller.Options{Table: customTable(t, "queue_depth", "stale_jobs", "backlog_age"), HealthCheckInterval: 100 * time.Millisecond, CPU: &wave{base: 38, amp: 12, period: 90}, Errors: latencyWindow{window}, Sources: []controller.Source{pressure{}, d.pushed}, Rules: levels.Rules{MinimumLevelDuration: time.Hour}}
	ctrl, err := controller.New(d.opts)
	if err != nil {
		t.Fatal(err)
	}
	h := api.NewServer(api.Deps{
		Controller: ctrl,
		Outcomes:   window,
		Reported:   ctrl.Reported,
		Pusher:     d.pushed,
		SSE:        api.SSE{Heartbeat: time.Second},
	})
	srv := daemontest.NewServer(t, h.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("controller: %v", err)
		}
	})
	daemontest.RunAPI(t, h) // registered last, it ends the event streams first
	d.daemon = daemon{srv: srv, ctrl: ctrl}
	return d
}

// push sends PUT /v1/signals/{name} and runs a health check, so that the
// value is in the next sample event.
func (d *customDaemon) push(t *testing.T, name string, v float64) {
	t.Helper()
	if code, body := d.call(t, "PUT", "/v1/signals/"+name, fmt.Sprintf(`{"value":%v}`, v), ""); code != http.StatusNoContent {
		t.Fatalf("PUT /v1/signals/%s: %d %s", name, code, body)
	}
	d.ctrl.Check(context.Background())
}

// field is an expression: the text of a card's field.
func field(card, name string) string {
	return fmt.Sprintf(`(document.querySelector('#%s [data-field=%s]') || {}).textContent`, card, name)
}

// cards is an expression: the ids of the signal cards, in order.
const cards = `Array.from(document.querySelectorAll('#signals > .signal'), (c) => c.id).join(' ')`

func TestDashboardSignalCards(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	d := startCustomDaemon(t)
	d.push(t, "queue_depth", 250)
	d.push(t, "stale_jobs", 3)
	p := openBrowser(t, 2*time.Minute)
	p.do("open the dashboard", chromedp.Navigate(d.srv.URL+"/"))
	p.waitFor("the event stream is live", `document.getElementById('conn').dataset.state === 'live'`, 10*time.Second)

	const want = "sig-error_rate_percent sig-latency_ms sig-cpu_percent sig-cpu_pressure_percent sig-io_pressure_percent sig-custom-backlog_age sig-custom-queue_depth sig-custom-stale_jobs"
	p.waitFor("one card per configured signal, built-in first, custom by name", cards+` === '`+want+`'`, 5*time.Second)
	for _, off := range []string{"sig-memory_percent", "sig-memory_pressure_percent"} {
		if eval[bool](p, `!!document.getElementById('`+off+`')`) {
			t.Errorf("the page has a card #%s for a signal that is off", off)
		}
	}

	t.Run("a custom signal's value and next threshold", func(t *testing.T) {
		c := "sig-custom-queue_depth"
		p.waitFor("queue_depth shows its pushed value", field(c, "value")+` === '250'`, 3*time.Second)
		if got := eval[string](p, `document.querySelector('#`+c+` h3').textContent`); got != "queue_depth" {
			t.Errorf("the card is headed %q, want queue_depth", got)
		}
		p.waitFor("the next threshold is Major's, the first level with one",
			field(c, "next-th")+` === '> 1000' && `+field(c, "next-name")+` === 'Next threshold (Major)'`, 3*time.Second)
		if got := eval[string](p, field(c, "state")); got != "" {
			t.Errorf("an available signal shows the state %q, want none", got)
		}
		if got := eval[string](p, field(c, "cur-th")); got != "none (Normal)" {
			t.Errorf("this level's threshold at Normal reads %q, want \"none (Normal)\"", got)
		}
		p.waitFor("the sparkline has points", `+document.querySelector('#`+c+` svg').dataset.points >= 2`, 3*time.Second)
	})

	t.Run("latency and pressure cards", func(t *testing.T) {
		p.waitFor("latency shows its value, observations and next threshold",
			field("sig-latency_ms", "value")+` === '812.5ms' && `+field("sig-latency_ms", "detail")+` === '1500 observations in the window' && `+
				field("sig-latency_ms", "next-th")+` === '> 900ms'`, 3*time.Second)
		p.waitFor("CPU pressure shows avg10, avg60 and Moderate's threshold",
			field("sig-cpu_pressure_percent", "value")+` === '12.5%' && 'avg60 8.4%' === `+field("sig-cpu_pressure_percent", "detail")+` && `+
				field("sig-cpu_pressure_percent", "next-th")+` === '> 20%' && `+field("sig-cpu_pressure_percent", "next-name")+` === 'Next threshold (Moderate)'`, 3*time.Second)
	})

	t.Run("warming, failed and absent signals say so", func(t *testing.T) {
		for card, want := range map[string]string{
			"sig-custom-stale_jobs":   "failed",
			"sig-custom-backlog_age":  "warming",
			"sig-error_rate_percent":  "absent",
			"sig-io_pressure_percent": "absent",
		} {
			p.waitFor(card+" is "+want, fmt.Sprintf(`document.getElementById(%q).dataset.state === %q`, card, want), 3*time.Second)
			label := map[string]string{"failed": "Failed", "warming": "Warming up", "absent": "Absent"}[want]
			if got := eval[string](p, field(card, "state")); !strings.HasPrefix(got, label) {
				t.Errorf("#%s shows the state %q, want it to start with %q", card, got, label)
			}
			if visible := eval[bool](p, `document.querySelector('#`+card+` [data-field=state]').getBoundingClientRect().height > 0`); !visible {
				t.Errorf("#%s: the state line is not visible", card)
			}
			if got := eval[string](p, field(card, "value")); got != "unavailable" {
				t.Errorf("#%s shows the value %q, want unavailable", card, got)
			}
		}
	})

	t.Run("a value over its threshold escalates, and the card follows", func(t *testing.T) {
		d.push(t, "queue_depth", 1500)
		p.waitFor("the badge shows Major", text("level-name", "Major"), 3*time.Second)
		c := "sig-custom-queue_depth"
		p.waitFor("the card shows the value, this level's threshold and the next one",
			field(c, "value")+` === '1500' && `+field(c, "cur-th")+` === '> 1000' && `+
				field(c, "next-th")+` === '> 5000' && `+field(c, "next-name")+` === 'Next threshold (Severe)'`, 3*time.Second)
		p.waitFor("the reason names the custom signal", contains("reason", "queue_depth 1500 > 1000 (Major)"), 3*time.Second)
		if got := eval[string](p, field("sig-cpu_percent", "next-th")); got != "> 90%" {
			t.Errorf("CPU's next threshold at Major reads %q, want \"> 90%%\" (Severe's)", got)
		}
	})

	shot, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(shotDir(t), "dashboard-signals.png"), shot)

	t.Run("a reload adds and removes cards", func(t *testing.T) {
		d.pushed.Configure([]signals.PushedSignal{
			{Name: "queue_depth", TTL: time.Minute},
			{Name: "inflight", TTL: time.Minute},
		}, nil)
		o := d.opts
		o.Table = customTable(t, "queue_depth", "inflight")
		if err := d.ctrl.Reconfigure(o, "alice"); err != nil {
			t.Fatal(err)
		}
		d.push(t, "inflight", 12.5)
		p.waitFor("the cards follow the new configuration",
			cards+` === 'sig-error_rate_percent sig-latency_ms sig-cpu_percent sig-cpu_pressure_percent sig-io_pressure_percent sig-custom-inflight sig-custom-queue_depth'`, 3*time.Second)
		c := "sig-custom-inflight"
		p.waitFor("the new card shows its value and the thresholds read again",
			field(c, "value")+` === '12.5' && `+field(c, "cur-th")+` === '> 50' && `+field(c, "next-th")+` === 'none above'`, 3*time.Second)
	})

	if probs := p.problems(); len(probs) > 0 {
		t.Errorf("the page reported problems:\n%s", strings.Join(probs, "\n"))
	}
}
