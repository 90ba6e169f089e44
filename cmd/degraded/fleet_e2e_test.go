package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// etcdBinary finds Debian's etcd-server binary.
func etcdBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("etcd"); err == nil {
		return p
	}
	t.Skip("the fleet end-to-end test needs etcd (Debian: apt-get install etcd-server; .ci/run installs it)")
	return ""
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// etcdProcess is a one-member etcd on fixed loopback ports and a data
// directory, so that it can be killed and started again.
type etcdProcess struct {
	bin, dir, client, peer string
	cmd                    *exec.Cmd
	done                   chan error
	logs                   *syncBuffer
}

func startEtcdProcess(t *testing.T) *etcdProcess {
	t.Helper()
	e := &etcdProcess{bin: etcdBinary(t), dir: t.TempDir(), client: freeAddr(t), peer: freeAddr(t)}
	e.start(t)
	t.Cleanup(func() { e.kill(t) })
	return e
}

func (e *etcdProcess) start(t *testing.T) {
	t.Helper()
	e.logs, e.done = new(syncBuffer), make(chan error, 1)
	e.cmd = exec.Command(e.bin, "--name", "e2e", "--data-dir", filepath.Join(e.dir, "data"),
		"--listen-client-urls", "http://"+e.client, "--advertise-client-urls", "http://"+e.client,
		"--listen-peer-urls", "http://"+e.peer, "--initial-advertise-peer-urls", "http://"+e.peer,
		"--initial-cluster", "e2e=http://"+e.peer, "--logger", "zap", "--log-level", "error")
	e.cmd.Stderr = e.logs
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { e.done <- e.cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := shortClient.Get("http://" + e.client + "/health")
		if err == nil {
			var h struct{ Health string }
			_ = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if h.Health == "true" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd not healthy within 20s: %v\n%s", err, e.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits for the process to end.
func (e *etcdProcess) kill(t *testing.T) {
	t.Helper()
	if e.cmd == nil || e.cmd.ProcessState != nil {
		return
	}
	_ = e.cmd.Process.Signal(syscall.SIGKILL)
	<-e.done
}

// fleetLevel is what the test reads of each daemon's state document.
type fleetLevel struct {
	Level  string `json:"level"`
	Source string `json:"source"`
	Reason string `json:"reason"`
	Fleet  *struct {
		Connected bool `json:"connected"`
	} `json:"fleet"`
}

func (d *process) fleetLevel(t *testing.T) fleetLevel {
	t.Helper()
	resp, body := d.request(t, "GET", "/v1/level", "", "")
	var doc fleetLevel
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &doc) != nil || doc.Fleet == nil {
		t.Fatalf("GET /v1/level: %d %s, want a state document with a fleet object", resp.StatusCode, body)
	}
	return doc
}

// until polls cond every 50ms for at most d.
func until(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFleetEndToEnd: three daemon processes and Debian's etcd. One
// `degraded override set Major --fleet` reaches all three; with etcd
// SIGKILLed they keep serving and keep the override; with etcd back they
// reconnect.
func TestFleetEndToEnd(t *testing.T) {
	etcd := startEtcdProcess(t)
	var ds []*process
	for _, name := range []string{"a", "b", "c"} {
		dir := t.TempDir()
		cfg := fmt.Sprintf(fastConfig, dir, "200ms") + fmt.Sprintf(`fleet:
  enabled: true
  name: shop
  instance: %s
  instance_ttl: 2s
  etcd: {endpoints: [http://%s], dial_timeout: 1s}
`, name, etcd.client)
		ds = append(ds, start(t, "serve", "--config", writeConfig(t, dir, cfg)))
	}
	for _, d := range ds {
		until(t, 15*time.Second, d.url+" connects to etcd", func() bool { return d.fleetLevel(t).Fleet.Connected })
	}
	for _, d := range ds {
		until(t, 5*time.Second, d.url+" /metrics counts the three instances, connected", func() bool {
			_, body := d.request(t, "GET", "/metrics", "", "")
			return strings.Contains(body, "\ndegraded_fleet_instances 3\n") && strings.Contains(body, "\ndegraded_fleet_connected 1\n")
		})
	}

	cli := exec.Command(binary, "override", "set", "Major", "--fleet", "--ttl", "15m", "--reason", "INC-42", "--addr", ds[0].url)
	cli.Env = append(os.Environ(), "DEGRADED_TOKEN=admin-secret")
	out, err := cli.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "fleet override pin Major until") {
		t.Fatalf("degraded override set Major --fleet: %v\n%s", err, out)
	}
	for _, d := range ds {
		until(t, 5*time.Second, d.url+" publishes the fleet pin", func() bool {
			st := d.fleetLevel(t)
			return st.Level == "Major" && st.Source == "fleet" && st.Reason == "fleet override set: pin Major for 15m0s: INC-42"
		})
	}

	etcd.kill(t)
	for _, d := range ds {
		until(t, 5*time.Second, d.url+" notices etcd is gone", func() bool { return !d.fleetLevel(t).Fleet.Connected })
		if st := d.fleetLevel(t); st.Level != "Major" || st.Source != "fleet" {
			t.Errorf("%s with etcd killed: %+v, want the fleet pin kept", d.url, st)
		}
		if resp, _ := d.request(t, "GET", "/readyz", "", ""); resp.StatusCode != http.StatusOK {
			t.Errorf("%s /readyz with etcd killed: %d, want 200", d.url, resp.StatusCode)
		}
	}

	etcd.start(t)
	for _, d := range ds {
		until(t, 15*time.Second, d.url+" reconnects", func() bool { return d.fleetLevel(t).Fleet.Connected })
		if st := d.fleetLevel(t); st.Level != "Major" || st.Source != "fleet" {
			t.Errorf("%s after etcd came back: %+v, want the fleet pin still in force", d.url, st)
		}
	}
	resp, body := ds[1].request(t, "DELETE", "/v1/fleet/override", "admin-secret", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE /v1/fleet/override after etcd came back: %d %s", resp.StatusCode, body)
	}
	for _, d := range ds {
		until(t, 5*time.Second, d.url+" drops the fleet pin", func() bool { return d.fleetLevel(t).Source == "auto" })
		if code := d.stop(t); code != 0 {
			t.Errorf("%s: SIGTERM exit %d\n%s", d.url, code, d.logs)
		}
	}
}
