package fleet_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/degraded/degraded/fleet/fleettest"
	"go.etcd.io/etcd/client/pkg/v3/transport"
)

// TestEtcdCertificatesAreRotatedWithoutARestart: a daemon talks to an
// etcd that requires client certificates. etcd moves to a new CA: the
// daemon's handshake fails, and it says so (an ERROR naming TLS, a 503
// whose body names TLS); once its CA, certificate and key files are
// replaced under it (as cert-manager does), it reconnects and writes
// again, with no restart.
func TestEtcdCertificatesAreRotatedWithoutARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca1, err := fleettest.NewCA("etcd CA 1")
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca1.WriteFiles(dir, "server-", "etcd")
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca1.WriteFiles(dir, "client-", "degraded")
	if err != nil {
		t.Fatal(err)
	}
	etcd := newEtcd(t)
	etcd.tls = &transport.TLSInfo{CertFile: server.Cert, KeyFile: server.Key, TrustedCAFile: server.CA, ClientCertAuth: true}
	etcd.start()
	tlsKeys := fmt.Sprintf("dial_timeout: 2s, tls: {ca_file: %s, cert_file: %s, key_file: %s}", client.CA, client.Cert, client.Key)
	a := fleetRig(t, fleetYAML(t, etcd.endpoint(), "a", tlsKeys, ""))
	eventually(t, 10*time.Second, "a connects over TLS with its client certificate", func() bool { return level(t, a.Rig).Fleet.Connected })
	put(t, a.Rig, "Major", "INC-1", "15m")

	ca2, err := fleettest.NewCA("etcd CA 2")
	if err != nil {
		t.Fatal(err)
	}
	etcd.stop()
	if _, err := ca2.WriteFiles(dir, "server-", "etcd"); err != nil {
		t.Fatal(err)
	}
	etcd.start()
	eventually(t, 10*time.Second, "a says the TLS handshake failed", func() bool {
		return a.log.count("level=ERROR", "the TLS handshake with etcd failed") > 0
	})
	code, body := call(t, "PUT", a.URL+"/v1/fleet/override", `{"level":"Minor","mode":"pin","ttl":"15m","reason":"INC-2"}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "TLS handshake with etcd failed") {
		t.Errorf("PUT with the old CA: %d %s, want 503 naming the TLS handshake", code, body)
	}

	if _, err := ca2.WriteFiles(dir, "client-", "degraded"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a reconnects with the rotated files", func() bool { return level(t, a.Rig).Fleet.Connected })
	put(t, a.Rig, "Minor", "INC-2", "15m")
	publishes(t, 5*time.Second, "Minor", "fleet", a.Rig)
}
