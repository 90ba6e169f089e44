package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/degraded/degraded/fleet/fleettest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestFleetE2EClientCertificates: Debian's etcd serving TLS and requiring
// client certificates. A daemon with a certificate of etcd's CA joins the
// fleet and writes; one whose certificate another CA signed says, in its
// log and in the 503 of a fleet PUT, that the TLS handshake failed.
func TestFleetE2EClientCertificates(t *testing.T) {
	t.Parallel()
	ca, err := fleettest.NewCA("etcd CA")
	if err != nil {
		t.Fatal(err)
	}
	etcd := startEtcdCluster(t, etcdOpts{ca: ca})
	good, err := ca.WriteFiles(t.TempDir(), "", "web-1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := fleettest.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	bad, err := other.WriteFiles(t.TempDir(), "", "web-2")
	if err != nil {
		t.Fatal(err)
	}
	tlsKeys := func(f fleettest.Files) string {
		return "dial_timeout: 1s, tls: {ca_file: " + good.CA + ", cert_file: " + f.Cert + ", key_file: " + f.Key + "}"
	}
	a := start(t, "serve", "--config", fleetConfig(t, "web-1", etcd.endpoints(), tlsKeys(good)))
	b := start(t, "serve", "--config", fleetConfig(t, "web-2", etcd.endpoints(), tlsKeys(bad)))
	until(t, 15*time.Second, "the daemon with etcd's CA's certificate connects", func() bool { return a.fleetLevel(t).Fleet.Connected })
	if code, body := fleetPut(t, a, "Major", "INC-1"); code != http.StatusOK {
		t.Fatalf("PUT through the certified daemon: %d %s", code, body)
	}
	until(t, 10*time.Second, "the other daemon names the failed TLS handshake", func() bool {
		return strings.Contains(b.logs.String(), "level=ERROR") && strings.Contains(b.logs.String(), "the TLS handshake with etcd failed")
	})
	if code, body := fleetPut(t, b, "Major", "INC-2"); code != http.StatusServiceUnavailable || !strings.Contains(body, "the TLS handshake with etcd failed") {
		t.Errorf("PUT through the daemon with another CA's certificate: %d %s, want 503 naming the TLS handshake; its log:\n%s", code, body, b.logs.String())
	}
	if b.fleetLevel(t).Fleet.Connected {
		t.Error("the daemon whose certificate etcd refuses shows connected")
	}
}

// TestFleetE2EUserAuth (finding 7): Debian's etcd with its own user and
// role auth. The daemon with the right password joins and writes; the one
// with a wrong password says within seconds, at ERROR, that etcd refused
// its credentials, and its fleet PUT answers 503 saying so, not "cannot be
// reached".
func TestFleetE2EUserAuth(t *testing.T) {
	t.Parallel()
	etcd := startEtcdCluster(t, etcdOpts{})
	cli := etcd.client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, step := range []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", "root-secret"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "fleet"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "fleet", "/degraded/", clientv3.GetPrefixRangeEnd("/degraded/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, "degraded", "right-password"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "degraded", "fleet"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("set up etcd's auth: %v", err)
		}
	}
	cli.Close()
	dir := t.TempDir()
	secret := func(name, pw string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := start(t, "serve", "--config", fleetConfig(t, "web-1", etcd.endpoints(), "dial_timeout: 1s, username: degraded, password_file: "+secret("right", "right-password")))
	started := time.Now()
	b := start(t, "serve", "--config", fleetConfig(t, "web-2", etcd.endpoints(), "dial_timeout: 1s, username: degraded, password_file: "+secret("wrong", "wrong-password")))
	until(t, 15*time.Second, "the daemon with the right password connects", func() bool { return a.fleetLevel(t).Fleet.Connected })
	if code, body := fleetPut(t, a, "Major", "INC-1"); code != http.StatusOK {
		t.Fatalf("PUT with the right password: %d %s", code, body)
	}
	until(t, 5*time.Second, "the daemon with the wrong password says etcd refused its credentials", func() bool {
		return strings.Contains(b.logs.String(), "level=ERROR") && strings.Contains(b.logs.String(), "etcd refused the credentials")
	})
	t.Logf("the wrong password was named %s after the daemon started", time.Since(started).Round(100*time.Millisecond))
	code, body := fleetPut(t, b, "Major", "INC-2")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "etcd refused this daemon's credentials") {
		t.Errorf("PUT with the wrong password: %d %s, want 503 saying etcd refused the credentials", code, body)
	}
	if n := strings.Count(b.logs.String(), "etcd refused the credentials"); n > 3 {
		t.Errorf("the refused credentials were logged %d times in a few seconds, want them rate-limited", n)
	}
}

// TestFleetE2ERestoredAndWipedDataDir (finding 2, with Debian's etcd and
// daemon processes): etcd restored from a cold backup of its data dir,
// then wiped. After each, the daemons publish what etcd holds, and fleet
// PUTs and DELETEs reach all of them although their revisions are lower
// than the ones applied before.
func TestFleetE2ERestoredAndWipedDataDir(t *testing.T) {
	t.Parallel()
	etcd := startEtcdCluster(t, etcdOpts{})
	var ds []*process
	for _, name := range []string{"a", "b"} {
		ds = append(ds, start(t, "serve", "--config", fleetConfig(t, name, etcd.endpoints(), "")))
	}
	publishes := func(what, level, source string) {
		t.Helper()
		for _, d := range ds {
			deadline := time.Now().Add(15 * time.Second)
			for {
				st := d.fleetLevel(t)
				if st.Fleet.Connected && st.Source == source && (level == "" || st.Level == level) {
					break
				}
				if time.Now().After(deadline) {
					_, body := d.request(t, "GET", "/v1/level", "", "")
					t.Fatalf("%s does not %s within 15s: %.600s\n%s", d.url, what, body, d.logs)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	for _, d := range ds {
		until(t, 15*time.Second, d.url+" connects", func() bool { return d.fleetLevel(t).Fleet.Connected })
	}
	if code, body := fleetPut(t, ds[0], "Minor", "INC-1 backed up"); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	publishes("publishes the Minor pin", "Minor", "fleet")
	etcd.kill(0)
	backup := etcd.backup(0)
	etcd.start(0)
	publishes("reconnects", "Minor", "fleet")
	if code, body := fleetPut(t, ds[1], "Major", "INC-2 after the backup"); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	publishes("publishes the Major pin", "Major", "fleet")
	churnCluster(t, etcd, 300)

	etcd.kill(0)
	etcd.restore(0, backup)
	etcd.start(0)
	publishes("publishes the restored backup's Minor pin", "Minor", "fleet")

	churnCluster(t, etcd, 300)
	etcd.kill(0)
	etcd.restore(0, "")
	etcd.start(0)
	publishes("drops the fleet pin etcd no longer holds", "", "auto")
	if code, body := fleetPut(t, ds[1], "Severe", "INC-3 after the wipe"); code != http.StatusOK {
		t.Fatalf("PUT after the wipe: %d %s", code, body)
	}
	publishes("publishes the pin set after the wipe", "Severe", "fleet")
	if resp, body := ds[0].request(t, "DELETE", "/v1/fleet/override", "admin-secret", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE after the wipe: %d %s", resp.StatusCode, body)
	}
	publishes("drops the pin cleared after the wipe", "", "auto")
}

// churnCluster writes n revisions to a key nobody watches.
func churnCluster(t *testing.T, etcd *etcdCluster, n int) {
	t.Helper()
	cli := etcd.client(0)
	defer cli.Close()
	for i := range n {
		if _, err := cli.Put(context.Background(), "/churn", strings.Repeat("x", i%7)); err != nil {
			t.Fatal(err)
		}
	}
}
