package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/degraded/degraded/fleet/fleettest"
	"github.com/degraded/degraded/internal/loopback"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdBinary finds Debian's etcd-server binary.
func etcdBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("etcd"); err == nil {
		return p
	}
	t.Skip("the fleet end-to-end tests need etcd (Debian: apt-get install etcd-server; .ci/run installs it)")
	return ""
}

// etcdMember is one etcd process of a cluster, on fixed loopback ports and
// a data directory, so that it can be killed, paused and started again.
type etcdMember struct {
	name, dir, client, peer string
	cmd                     *exec.Cmd
	done                    chan error
	logs                    *syncBuffer
}

// etcdCluster is Debian's etcd-server as n processes. With certs it serves
// https and requires client certificates signed by the same CA.
type etcdCluster struct {
	t       *testing.T
	bin     string
	members []*etcdMember
	certs   *fleettest.Files // the members' own: CA, certificate, key
}

// etcdOpts configures startEtcdCluster.
type etcdOpts struct {
	members int
	// ca, when set, makes the members serve TLS with a certificate of it
	// and require client certificates of it.
	ca *fleettest.CA
}

// startEtcdCluster starts the members, waits until each is healthy, and
// kills them when the test ends.
func startEtcdCluster(t *testing.T, o etcdOpts) *etcdCluster {
	t.Helper()
	c := &etcdCluster{t: t, bin: etcdBinary(t)}
	if o.members == 0 {
		o.members = 1
	}
	if o.ca != nil {
		f, err := o.ca.WriteFiles(t.TempDir(), "etcd-", "etcd")
		if err != nil {
			t.Fatal(err)
		}
		c.certs = &f
	}
	for i := range o.members {
		c.members = append(c.members, &etcdMember{name: fmt.Sprintf("m%d", i), dir: t.TempDir(), client: loopback.Addr(t), peer: loopback.Addr(t)})
	}
	var wg sync.WaitGroup
	for i := range c.members {
		wg.Go(func() { c.start(i) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Cleanup(func() {
		for i := range c.members {
			c.resume(i)
			c.kill(i)
		}
	})
	return c
}

func (c *etcdCluster) scheme() string {
	if c.certs != nil {
		return "https"
	}
	return "http"
}

// endpoints are the members' client URLs, comma-separated for a YAML list.
func (c *etcdCluster) endpoints() string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, c.scheme()+"://"+m.client)
	}
	return strings.Join(eps, ", ")
}

// start runs member i (again) and waits until it answers.
func (c *etcdCluster) start(i int) {
	t := c.t
	m := c.members[i]
	var cluster []string
	for _, o := range c.members {
		cluster = append(cluster, o.name+"=http://"+o.peer)
	}
	url := c.scheme() + "://" + m.client
	args := []string{"--name", m.name, "--data-dir", filepath.Join(m.dir, "data"),
		"--listen-client-urls", url, "--advertise-client-urls", url,
		"--listen-peer-urls", "http://" + m.peer, "--initial-advertise-peer-urls", "http://" + m.peer,
		"--initial-cluster", strings.Join(cluster, ","), "--initial-cluster-token", "e2e", "--initial-cluster-state", "new",
		"--heartbeat-interval", "50", "--election-timeout", "500", "--logger", "zap", "--log-level", "error"}
	if f := c.certs; f != nil {
		args = append(args, "--cert-file", f.Cert, "--key-file", f.Key, "--trusted-ca-file", f.CA, "--client-cert-auth")
	}
	m.logs, m.done = new(syncBuffer), make(chan error, 1)
	m.cmd = exec.Command(c.bin, args...)
	m.cmd.Stderr = m.logs
	if err := m.cmd.Start(); err != nil {
		t.Error(err)
		return
	}
	go func() { m.done <- m.cmd.Wait() }()
	cli := c.client(i)
	defer cli.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "health")
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("etcd %s not healthy within 20s: %v\n%s", m.name, err, m.logs)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// client is a plain etcd client of member i (with the members' own
// certificate on a TLS cluster), for what the tests do by hand.
func (c *etcdCluster) client(i int, users ...string) *clientv3.Client {
	c.t.Helper()
	cfg := clientv3.Config{Endpoints: []string{c.scheme() + "://" + c.members[i].client}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()}
	if len(users) == 2 {
		cfg.Username, cfg.Password = users[0], users[1]
	}
	if f := c.certs; f != nil {
		tc, err := (transport.TLSInfo{CertFile: f.Cert, KeyFile: f.Key, TrustedCAFile: f.CA}).ClientConfig()
		if err != nil {
			c.t.Fatal(err)
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	return cli
}

// kill sends SIGKILL to member i and waits for it to end.
func (c *etcdCluster) kill(i int) {
	m := c.members[i]
	if m.cmd == nil || m.cmd.ProcessState != nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.done
}

// pause stops member i with SIGSTOP: its sockets stay open, it answers
// nothing. resume sends SIGCONT.
func (c *etcdCluster) pause(i int)  { c.signal(i, syscall.SIGSTOP) }
func (c *etcdCluster) resume(i int) { c.signal(i, syscall.SIGCONT) }

func (c *etcdCluster) signal(i int, s syscall.Signal) {
	if m := c.members[i]; m.cmd != nil && m.cmd.ProcessState == nil {
		_ = m.cmd.Process.Signal(s)
	}
}

// leader is the index of the member that leads the cluster now.
func (c *etcdCluster) leader() int {
	c.t.Helper()
	cli := c.client(0)
	defer cli.Close()
	for i, m := range c.members {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := cli.Status(ctx, c.scheme()+"://"+m.client)
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			return i
		}
	}
	c.t.Fatal("no member of the cluster leads it")
	return -1
}

// backup copies member i's data directory (stopped: a cold backup) to
// a new directory and returns it.
func (c *etcdCluster) backup(i int) string {
	c.t.Helper()
	to := filepath.Join(c.t.TempDir(), "backup")
	if out, err := exec.Command("cp", "-a", filepath.Join(c.members[i].dir, "data"), to).CombinedOutput(); err != nil {
		c.t.Fatalf("back up etcd's data: %v\n%s", err, out)
	}
	return to
}

// restore replaces member i's data directory (stopped) with a backup's
// copy; from "" wipes it.
func (c *etcdCluster) restore(i int, from string) {
	c.t.Helper()
	data := filepath.Join(c.members[i].dir, "data")
	if err := os.RemoveAll(data); err != nil {
		c.t.Fatal(err)
	}
	if from == "" {
		return
	}
	if out, err := exec.Command("cp", "-a", from, data).CombinedOutput(); err != nil {
		c.t.Fatalf("restore etcd's data: %v\n%s", err, out)
	}
}
