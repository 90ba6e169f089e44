package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// etcdServer is a one-member etcd (Debian's etcd-server binary) on free
// loopback ports with its data in a temporary directory.
type etcdServer struct {
	cmd    *exec.Cmd
	dir    string
	client string // http://127.0.0.1:PORT
	done   chan struct{}
}

// startEtcd runs binary and waits until its /health says true.
func startEtcd(binary string) (*etcdServer, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	client, peer := ports[0], ports[1]
	dir, err := os.MkdirTemp("", "degbench-etcd")
	if err != nil {
		return nil, err
	}
	e := &etcdServer{dir: dir, client: fmt.Sprintf("http://127.0.0.1:%d", client), done: make(chan struct{})}
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	e.cmd = exec.Command(binary, "--name", "bench", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", e.client, "--advertise-client-urls", e.client,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "bench="+peerURL, "--logger", "zap", "--log-level", "error")
	e.cmd.Stderr = os.Stderr
	if err := e.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	go func() { _ = e.cmd.Wait(); close(e.done) }()
	hc := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := hc.Get(e.client + "/health"); err == nil {
			var h struct{ Health string }
			_ = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if h.Health == "true" {
				return e, nil
			}
		}
		select {
		case <-e.done:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("%s exited before it was healthy", binary)
		default:
		}
		if time.Now().After(deadline) {
			e.stop()
			return nil, errors.New("etcd not healthy within 20s")
		}
	}
}

// stop kills etcd (nothing in it is kept) and removes its data.
func (e *etcdServer) stop() {
	_ = e.cmd.Process.Kill()
	<-e.done
	os.RemoveAll(e.dir)
}

func (e *etcdServer) pid() int { return e.cmd.Process.Pid }

// version is the server version etcd reports on /version.
func (e *etcdServer) version() (string, error) {
	resp, err := http.Get(e.client + "/version")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var v struct {
		Server string `json:"etcdserver"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return "", fmt.Errorf("etcd /version: %w", err)
	}
	return v.Server, nil
}

// etcdCounters are the write counters of etcd's MVCC store.
type etcdCounters struct {
	Puts, Txns, Deletes float64
}

func (c etcdCounters) sub(o etcdCounters) etcdCounters {
	return etcdCounters{c.Puts - o.Puts, c.Txns - o.Txns, c.Deletes - o.Deletes}
}

// counters reads etcd's /metrics.
func (e *etcdServer) counters() (etcdCounters, error) {
	resp, err := http.Get(e.client + "/metrics")
	if err != nil {
		return etcdCounters{}, err
	}
	defer resp.Body.Close()
	return parseEtcdCounters(resp.Body)
}

// parseEtcdCounters reads etcd_mvcc_put_total, etcd_mvcc_txn_total and
// etcd_mvcc_delete_total from Prometheus text; a missing one is an error
// that names it. etcd counts every put in put_total, inside a transaction
// or not, and in txn_total the transactions of more than one operation.
func parseEtcdCounters(r io.Reader) (etcdCounters, error) {
	want := map[string]float64{"etcd_mvcc_put_total": -1, "etcd_mvcc_txn_total": -1, "etcd_mvcc_delete_total": -1}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if _, known := want[name]; !ok || !known {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return etcdCounters{}, fmt.Errorf("etcd metric %s: %w", name, err)
		}
		want[name] = v
	}
	if err := sc.Err(); err != nil {
		return etcdCounters{}, err
	}
	var missing []string
	for name, v := range want {
		if v < 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return etcdCounters{}, fmt.Errorf("etcd /metrics has no %s", strings.Join(missing, ", "))
	}
	return etcdCounters{want["etcd_mvcc_put_total"], want["etcd_mvcc_txn_total"], want["etcd_mvcc_delete_total"]}, nil
}
