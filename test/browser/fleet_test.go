package browser

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	rig "github.com/degraded/degraded/internal/daemon"
	"github.com/degraded/degraded/internal/daemon/daemontest"
	"go.etcd.io/etcd/server/v3/embed"
)

// etcdMember is an embedded etcd member on loopback, for the fleet panel.
type etcdMember struct {
	e      *embed.Etcd
	client url.URL
}

func loopbackURL(t *testing.T) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}

// startEtcd starts an etcd member and stops it when the test ends (stop
// may also be called before).
func startEtcd(t *testing.T) *etcdMember {
	t.Helper()
	client, peer := loopbackURL(t), loopbackURL(t)
	cfg := embed.NewConfig()
	cfg.Name = "browser"
	cfg.Dir = t.TempDir()
	cfg.LogLevel = "fatal" // a stopped member logs its closed listeners at error
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	m := &etcdMember{e: e, client: client}
	t.Cleanup(m.stop)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(20 * time.Second):
		t.Fatal("etcd did not become ready in 20s")
	}
	return m
}

func (m *etcdMember) stop() {
	if m.e != nil {
		m.e.Close()
		m.e = nil
	}
}

// fleetRequests is how many times the page asked for GET /v1/fleet.
const fleetRequests = `performance.getEntriesByType('resource').filter((e) => new URL(e.name).pathname === '/v1/fleet').length`

// TestDashboardShowsTheFleet: with fleet mode on, the dashboard shows the
// fleet panel: connected to etcd, this instance in the table at its level,
// the aggregator (this instance, its term, when it last summed), then the
// fleet override an operator sets, with the instance pinned by it, and
// "Disconnected" in words once etcd goes away, the override kept and the
// aggregate said to be stale once it is.
func TestDashboardShowsTheFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser and etcd")
	}
	etcd := startEtcd(t)
	r := daemontest.Start(t, fmt.Sprintf(`
data_dir: %s
health_check_interval: 100ms
minimum_level_duration: 1h
auth: {token: "%s"}
sse: {heartbeat: 1s}
signals: {cpu: {source: off}, memory: {source: off}}
fleet:
  enabled: true
  name: shop
  instance: a
  instance_ttl: 2s
  etcd: {endpoints: [%s], dial_timeout: 1s}
`, t.TempDir(), adminToken, etcd.client.String()), rig.Options{})
	d := &daemon{srv: r.Server, ctrl: r.Controller()}

	p := openBrowser(t, 2*time.Minute)
	p.do("open the dashboard", chromedp.Navigate(d.srv.URL+"/"))
	p.waitFor("the fleet panel is shown", `!document.getElementById('fleet').hidden &&
		document.getElementById('fleet').getBoundingClientRect().height > 0`, 10*time.Second)
	p.waitFor("it names the fleet", text("fleet-name", "shop"), time.Second)
	p.waitFor("it names this instance", text("fleet-instance", "a"), time.Second)
	p.waitFor("it is connected to etcd", `document.getElementById('fleet-conn').dataset.state === 'connected' &&
		document.getElementById('fleet-conn').textContent === 'Connected to etcd'`, 10*time.Second)
	p.waitFor("no fleet override yet", text("fleet-override", "none"), time.Second)
	p.waitFor("one instance, a, at Normal", instanceRows("a (this one)|Normal|auto"), 10*time.Second)
	p.waitFor("the level counts", text("fleet-levels", "Normal 1"), 2*time.Second)
	p.waitFor("the fleet error rate", text("fleet-errors", "no attempts reported (0 failed of 0 attempts)"), 2*time.Second)
	p.waitFor("the aggregator is this instance, fresh", contains("fleet-aggregator", "a (this one), term ")+" && "+
		contains("fleet-aggregator", " ago")+` && document.getElementById('fleet-aggregator').dataset.stale === 'false'`, 10*time.Second)

	const reason = "INC-7 fleet-wide shedding"
	if code, body := d.call(t, "PUT", "/v1/fleet/override", `{"level":"Major","mode":"pin","ttl":"1h","reason":"`+reason+`"}`, adminToken); code != http.StatusOK {
		t.Fatalf("PUT /v1/fleet/override: %d %s", code, body)
	}
	p.waitFor("the badge shows Major", text("level-name", "Major"), 5*time.Second)
	p.waitFor("the source is the fleet override", text("source", "fleet override"), 2*time.Second)
	p.waitFor("the panel shows the fleet override", contains("fleet-override", "Pinned at Major until")+" && "+
		contains("fleet-override", "(in 59m")+" && "+contains("fleet-override", "Reason: "+reason), 5*time.Second)
	p.waitFor("instance a is at Major by the fleet", instanceRows("a (this one)|Major|fleet"), 10*time.Second)
	p.waitFor("the level counts follow", text("fleet-levels", "Major 1"), 2*time.Second)
	p.waitFor("the row says when a was seen", `/^\d+s ago$/.test(document.querySelector('#fleet-instances tbody td:last-child').textContent)`, 2*time.Second)

	etcd.stop()
	p.waitFor("the panel says it is disconnected", `document.getElementById('fleet-conn').dataset.state === 'disconnected' &&
		document.getElementById('fleet-conn').textContent.startsWith('Disconnected: etcd cannot be reached')`, 15*time.Second)
	p.waitFor("the fleet override is kept", contains("fleet-override", "Pinned at Major until"), time.Second)
	p.waitFor("the aggregate goes stale, in words", contains("fleet-aggregator", "Stale: this instance judges by its own error rate")+
		` && document.getElementById('fleet-aggregator').dataset.stale === 'true'`, 10*time.Second)
	if n := eval[int](p, fleetRequests); n > 60 {
		t.Errorf("the page read GET /v1/fleet %d times; it reads at most once a second", n)
	}
	if probs := p.problems(); len(probs) > 0 {
		t.Errorf("the page reported problems: %v", probs)
	}
}

// instanceRows is a predicate: the fleet table's rows, as
// "instance|level|source" joined by ";", equal want.
func instanceRows(want string) string {
	return fmt.Sprintf(`Array.from(document.querySelectorAll('#fleet-instances tbody tr'),
		(tr) => Array.from(tr.cells).slice(0, 3).map((c) => c.textContent).join('|')).join(';') === %q`, want)
}

// TestDashboardWithoutFleet: with fleet mode off, no fleet panel, and the
// page asks GET /v1/fleet once, not on every event.
func TestDashboardWithoutFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	d := startDaemon(t, "")
	p := openBrowser(t, time.Minute)
	p.do("open the dashboard", chromedp.Navigate(d.srv.URL+"/"))
	p.waitFor("the event stream is live and the samples are read", `document.getElementById('conn').dataset.state === 'live' &&
		performance.getEntriesByType('resource').some((e) => new URL(e.name).pathname === '/v1/samples')`, 10*time.Second)
	// 100ms health checks: 4s of sample and level events, each of which
	// would ask again if the 404 did not stop it.
	before := eval[int](p, `+document.querySelector('#sig-cpu_percent svg').dataset.points`)
	p.waitFor("40 more sample events", fmt.Sprintf(`+document.querySelector('#sig-cpu_percent svg').dataset.points >= %d`, before+40), 15*time.Second)
	if n := eval[int](p, fleetRequests); n != 1 {
		t.Errorf("the page read GET /v1/fleet %d times, want once", n)
	}
	if !eval[bool](p, `document.getElementById('fleet').hidden && document.getElementById('fleet').getBoundingClientRect().height === 0`) {
		t.Error("the fleet panel is shown with fleet mode off")
	}
	if probs := p.problems(); len(probs) > 0 {
		t.Errorf("the page reported problems: %v", probs)
	}
}
