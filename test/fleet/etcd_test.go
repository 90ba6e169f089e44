package fleet_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/degraded/degraded/internal/loopback"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// etcdServer is an embedded etcd member on fixed loopback ports, so that
// it can be stopped, wiped and started again where clients expect it.
type etcdServer struct {
	t      *testing.T
	dir    string
	client url.URL
	peer   url.URL
	tls    *transport.TLSInfo // client TLS, when set: https on the client URL
	// maxRequestBytes, when set, is the member's request limit (etcd's
	// --max-request-bytes, 1.5 MiB by default).
	maxRequestBytes uint
	e               *embed.Etcd
}

func startEtcd(t *testing.T) *etcdServer {
	t.Helper()
	s := newEtcd(t)
	s.start()
	return s
}

// newEtcd is a member that has not started yet.
func newEtcd(t *testing.T) *etcdServer {
	t.Helper()
	s := &etcdServer{t: t, dir: t.TempDir(),
		client: url.URL{Scheme: "http", Host: loopback.Addr(t)},
		peer:   url.URL{Scheme: "http", Host: loopback.Addr(t)}}
	t.Cleanup(s.stop)
	return s
}

func (s *etcdServer) start() {
	s.t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = filepath.Join(s.dir, "data")
	cfg.LogLevel = "fatal" // a stopped member logs its closed listeners at error
	if s.maxRequestBytes > 0 {
		cfg.MaxRequestBytes = s.maxRequestBytes
	}
	if s.tls != nil {
		s.client.Scheme = "https"
		cfg.ClientTLSInfo = *s.tls
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{s.client}, []url.URL{s.client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{s.peer}, []url.URL{s.peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// Started again on its ports right after a stop, the member once
	// found its client port in use (CI: "bind: address already in use");
	// it tries for up to 5s before it fails, with the last error.
	e, err := embed.StartEtcd(cfg)
	for deadline := time.Now().Add(5 * time.Second); errors.Is(err, syscall.EADDRINUSE) && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		e, err = embed.StartEtcd(cfg)
	}
	if err != nil {
		s.t.Fatalf("start etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(20 * time.Second):
		e.Close()
		s.t.Fatal("etcd did not become ready in 20s")
	}
	s.e = e
}

func (s *etcdServer) stop() {
	if s.e != nil {
		s.e.Close()
		s.e = nil
	}
}

// wipe removes the stopped member's data: started again, it is a new
// cluster with the same ID, its revision back at 1.
func (s *etcdServer) wipe() {
	s.t.Helper()
	if err := os.RemoveAll(filepath.Join(s.dir, "data")); err != nil {
		s.t.Fatal(err)
	}
}

func (s *etcdServer) endpoint() string { return s.client.String() }

// raw is a plain etcd client, for what the tests write by hand.
func (s *etcdServer) raw(t *testing.T) *clientv3.Client {
	t.Helper()
	cfg := clientv3.Config{Endpoints: []string{s.endpoint()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()}
	if s.tls != nil {
		c, err := s.tls.ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		cfg.TLS = c
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// logBuffer is a member's log, read by the test.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// count is how many lines of the log hold every one of words.
func (l *logBuffer) count(words ...string) int {
	n := 0
	for line := range strings.Lines(l.String()) {
		all := true
		for _, w := range words {
			all = all && strings.Contains(line, w)
		}
		if all {
			n++
		}
	}
	return n
}

// everyTick calls write at once, then every testTick until the test
// ends (with a context that ends with it), and returns after the first
// call.
func everyTick(t *testing.T, write func(ctx context.Context)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	first := make(chan struct{})
	wg.Go(func() {
		tick := time.NewTicker(testTick)
		defer tick.Stop()
		for i := 0; ; i++ {
			write(ctx)
			if i == 0 {
				close(first)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	<-first
}

// testTick is the members' and daemons' tick: reports and aggregates
// come fast.
const testTick = 100 * time.Millisecond

// eventually polls cond until it holds or d passes: etcd runs in real
// time, outside any synctest bubble.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		<-tick.C
	}
}

// proxy forwards TCP connections to target until cut; restore accepts
// again. It simulates a network partition between one member and etcd;
// freeze instead keeps every connection open and accepts new ones, but
// forwards nothing until thaw: a hung member, as SIGSTOP makes one.
type proxy struct {
	target string
	addr   string
	mu     sync.Mutex
	l      net.Listener
	conns  map[net.Conn]bool
	frozen chan struct{} // closed while thawed; nil never
	refuse bool          // close each connection at once, noting when
	dials  []time.Time   // when refused connections came
	lag    time.Duration // how late each chunk to etcd is delivered (slow)
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	p := &proxy{target: target, addr: loopback.Addr(t), conns: map[net.Conn]bool{}, frozen: make(chan struct{})}
	close(p.frozen)
	p.restore(t)
	t.Cleanup(func() { p.thaw(); p.cut(); p.wg.Wait() })
	return p
}

func (p *proxy) restore(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.refuse {
				p.dials = append(p.dials, time.Now())
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns[c] = true
			p.mu.Unlock()
			p.wg.Go(func() {
				p.gate()
				up, err := net.Dial("tcp", p.target)
				if err != nil {
					c.Close()
					return
				}
				p.mu.Lock()
				p.conns[up] = true
				p.mu.Unlock()
				p.wg.Go(func() { p.copyLagged(up, c) })
				p.copy(c, up)
			})
		}
	})
}

// gate waits while the proxy is frozen.
func (p *proxy) gate() {
	p.mu.Lock()
	ch := p.frozen
	p.mu.Unlock()
	<-ch
}

// copy forwards from src to dst, holding each chunk while frozen.
func (p *proxy) copy(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// copyLagged is copy, each chunk delivered the proxy's lag after it was
// read, in order: requests to a slow member, not a hung one, whose
// answers come that much later however many are in flight.
func (p *proxy) copyLagged(dst, src net.Conn) {
	type chunk struct {
		due time.Time
		b   []byte
	}
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer dst.Close()
		for c := range q {
			time.Sleep(time.Until(c.due))
			p.gate()
			if _, err := dst.Write(c.b); err != nil {
				for range q { // until src ends
				}
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			due := time.Now().Add(p.lag)
			p.mu.Unlock()
			q <- chunk{due, bytes.Clone(buf[:n])}
		}
		if err != nil {
			close(q)
			<-done
			return
		}
	}
}

// slow delivers every chunk to etcd d late from now on.
func (p *proxy) slow(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lag = d
}

// down makes etcd unreachable through the proxy: every connection is
// closed, and each new one closed at once, its time noted (a dial
// attempt); up forwards again and returns those times.
func (p *proxy) down() {
	p.mu.Lock()
	p.refuse, p.dials = true, nil
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
	p.mu.Unlock()
}

func (p *proxy) up() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = false
	return p.dials
}

// freeze stops forwarding, keeping every connection open.
func (p *proxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.frozen:
		p.frozen = make(chan struct{})
	default:
	}
}

// thaw forwards again.
func (p *proxy) thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.frozen:
	default:
		close(p.frozen)
	}
}

// cut closes the listener and every connection through it.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *proxy) endpoint() string { return "http://" + p.addr }
