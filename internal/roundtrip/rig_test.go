package roundtrip_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/degraded/degraded/client"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/controller/controllertest"
	"github.com/degraded/degraded/errwindow"
	rig "github.com/degraded/degraded/internal/daemon"
	"github.com/degraded/degraded/internal/daemon/daemontest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// config is the rig's daemon: four levels on the error rate alone, a
// window long enough that the tests' reports never age out, and the Host
// the client uses (a tokenless daemon serves only names it is told about).
const config = `
data_dir: ""
error_rate_window: 1h
min_throughput: 0
signals: {cpu: {source: off}, memory: {source: off}}
allowed_hosts: [degraded.test]
levels:
  - {name: Minor, priority_threshold: 10, error_rate_percent: 1, disable: [recommendations]}
  - {name: Moderate, priority_threshold: 30, error_rate_percent: 5}
  - {name: Major, priority_threshold: 50, error_rate_percent: 10, disable: [search]}
  - {name: Severe, priority_threshold: 70, error_rate_percent: 25}
`

// daemon is the real controller and API served over an in-memory network
// (net.Pipe), so that tests run inside a synctest bubble in fake time. It
// can be stopped and started again, like a restarted daemon.
type daemon struct {
	t    testing.TB
	ctl  *controller.Controller
	win  *errwindow.Window
	h    http.Handler
	http *http.Client

	mu   sync.Mutex
	ln   *pipeListener
	srv  *http.Server
	wrap func(http.Handler) http.Handler
}

func newDaemon(t testing.TB) *daemon {
	t.Helper()
	dd := daemontest.New(t, config, rig.Options{})
	controllertest.Run(t, dd.Controller())
	d := &daemon{t: t, ctl: dd.Controller(), win: dd.Window(), h: dd.Handler()}
	tr := &http.Transport{DialContext: d.dial, MaxIdleConnsPerHost: 100}
	d.http = &http.Client{Transport: tr}
	t.Cleanup(func() {
		d.stop()
		tr.CloseIdleConnections()
	})
	return d
}

// newClient returns a client of this daemon.
func (d *daemon) newClient(opts ...client.Option) *client.Client {
	d.t.Helper()
	c, err := client.New("http://degraded.test", append([]client.Option{client.WithHTTPClient(d.http)}, opts...)...)
	if err != nil {
		d.t.Fatal(err)
	}
	return c
}

func (d *daemon) start() {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.h
	if d.wrap != nil {
		h = d.wrap(h)
	}
	d.ln = &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	d.srv = &http.Server{Handler: h}
	go d.srv.Serve(d.ln)
}

// stop closes the listener and every connection, as a dying daemon does.
func (d *daemon) stop() {
	d.mu.Lock()
	srv := d.srv
	d.srv, d.ln = nil, nil
	d.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

var errRefused = errors.New("connection refused")

func (d *daemon) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	d.mu.Lock()
	ln := d.ln
	d.mu.Unlock()
	if ln == nil {
		return nil, errRefused
	}
	cli, srv := net.Pipe()
	select {
	case ln.conns <- srv:
		return cli, nil
	case <-ln.done:
	case <-ctx.Done():
	}
	cli.Close()
	srv.Close()
	return nil, errRefused
}

func (d *daemon) override(level string) {
	d.t.Helper()
	if _, err := d.ctl.SetOverride(controller.OverrideRequest{Level: level, Mode: controller.ModePin, TTL: time.Hour, Reason: "test " + level}); err != nil {
		d.t.Fatal(err)
	}
}

type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "degraded.test:80" }

// running starts c.Run and returns a func that stops it and reports Run's
// error.
func running(t testing.TB, c *client.Client) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func isCanceled(err error) bool { return errors.Is(err, context.Canceled) }
