package fleet_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/degraded/degraded/fleet"
	"go.etcd.io/etcd/server/v3/embed"
)

// etcdServer is an embedded etcd member on fixed loopback ports, so that
// it can be stopped and started again where clients expect it.
type etcdServer struct {
	t      *testing.T
	dir    string
	client url.URL
	peer   url.URL
	e      *embed.Etcd
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startEtcd(t *testing.T) *etcdServer {
	t.Helper()
	s := &etcdServer{t: t, dir: t.TempDir(),
		client: url.URL{Scheme: "http", Host: freePort(t)},
		peer:   url.URL{Scheme: "http", Host: freePort(t)}}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *etcdServer) start() {
	s.t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = s.dir
	cfg.LogLevel = "fatal" // a stopped member logs its closed listeners at error
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{s.client}, []url.URL{s.client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{s.peer}, []url.URL{s.peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
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

func (s *etcdServer) endpoint() string { return s.client.String() }

// member starts a fleet member on endpoint and stops it when the test ends.
func member(t *testing.T, endpoint, instance string) *fleet.Fleet {
	t.Helper()
	f, err := fleet.New(fleet.Options{
		Endpoints:   []string{endpoint},
		DialTimeout: time.Second,
		Name:        "shop",
		Instance:    instance,
		InstanceTTL: 2 * time.Second,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("%s: Run returned %v, want context.Canceled", instance, err)
		}
	})
	return f
}

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

func connected(t *testing.T, fs ...*fleet.Fleet) {
	t.Helper()
	for _, f := range fs {
		eventually(t, 10*time.Second, f.Instance()+" connects", f.Connected)
	}
}

// proxy forwards TCP connections to target until cut; restore accepts
// again. It simulates a network partition between one member and etcd.
type proxy struct {
	target string
	addr   string
	mu     sync.Mutex
	l      net.Listener
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	p := &proxy{target: target, addr: freePort(t), conns: map[net.Conn]bool{}}
	p.restore(t)
	t.Cleanup(func() { p.cut(); p.wg.Wait() })
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
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = true, true
			p.mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(up, c); up.Close() })
			p.wg.Go(func() { _, _ = io.Copy(c, up); c.Close() })
		}
	})
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
