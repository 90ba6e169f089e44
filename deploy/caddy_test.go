package deploy

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/degraded/degraded/internal/loopback"
)

// caddyPath finds Debian's caddy.
func caddyPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("caddy"); err == nil {
		return p
	}
	t.Skip("the Caddy test needs caddy (Debian: apt-get install caddy; .ci/run installs it)")
	return ""
}

// startCaddy runs caddy/Caddyfile, unchanged but for its four addresses,
// in real Caddy, and returns its base URL. Caddy tells when its config is
// loaded and its listeners are up through --pingback (as `caddy start`
// uses it): it writes back what it read on stdin to a connection it makes
// to the given address, so nothing has to poll until it is up.
func startCaddy(t *testing.T, daemonAddr, appAddr string) string {
	t.Helper()
	bin := caddyPath(t)
	example, err := os.ReadFile(filepath.Join("caddy", "Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	listen, failOpen := loopback.Addr(t), loopback.Addr(t)
	conf := string(example)
	for _, r := range []struct {
		old, new string
		n        int
	}{
		{"forward_auth 127.0.0.1:8470 127.0.0.1:8471 {", "forward_auth " + daemonAddr + " " + failOpen + " {", 1},
		{"http://127.0.0.1:8471 {", "http://" + failOpen + " {", 1},
		{"reverse_proxy 127.0.0.1:8080", "reverse_proxy " + appAddr, 4},
		{":8000 {", "http://" + listen + " {", 1},
	} {
		if got := strings.Count(conf, r.old); got != r.n {
			t.Fatalf("caddy/Caddyfile should hold %q %d times (holds it %d)", r.old, r.n, got)
		}
		conf = strings.ReplaceAll(conf, r.old, r.new)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}

	pingback, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pingback.Close()
	token := make([]byte, 16)
	_, _ = rand.Read(token)
	var output bytes.Buffer
	cmd := exec.Command(bin, "run", "--config", file, "--adapter", "caddyfile", "--pingback", pingback.Addr().String())
	// Its own home: caddy keeps data and an autosaved config there.
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir)
	cmd.Stdin = bytes.NewReader(token)
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("caddy output:\n%s", output.String())
		}
	})

	ready := make(chan []byte, 1)
	go func() {
		conn, err := pingback.Accept()
		if err != nil {
			ready <- nil
			return
		}
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		b := make([]byte, len(token)) // caddy keeps the connection open
		n, _ := io.ReadFull(conn, b)
		ready <- b[:n]
	}()
	select {
	case b := <-ready:
		if !bytes.Equal(b, token) {
			t.Fatalf("caddy's pingback wrote %q, want the token it was given", b)
		}
	case err := <-exited:
		t.Fatalf("caddy exited before it was up: %v\n%s", err, output.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("caddy did not come up within 30s\n%s", output.String())
	}
	return "http://" + listen
}

// TestCaddySheds runs deploy/caddy/Caddyfile in real Caddy between a
// client and a service, with a real degraded deciding: each level sheds
// exactly the routes below its priority threshold, with 503, Retry-After
// and X-Degraded-Level from degraded, and admits the others; with
// degraded down, it fails open through the second upstream.
func TestCaddySheds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts caddy")
	}
	caddyPath(t)
	daemon := startDaemon(t)
	svc := startApp(t)
	base := startCaddy(t, daemon.Listener.Addr().String(), svc.srv.Listener.Addr().String())
	client := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)

	// Route priorities in the example: /recommendations/ 20, everything
	// else 50, /checkout/ 90; /healthz is never gated.
	paths := []string{"/recommendations/for-you", "/search", "/checkout/pay", "/healthz"}
	steps := []struct {
		level  string // pinned by an override; "" leaves Normal
		served []bool // per path
	}{
		{"", []bool{true, true, true, true}},
		{"Moderate", []bool{false, true, true, true}},    // threshold 30
		{"Major", []bool{false, true, true, true}},       // 50: 50 is admitted
		{"Severe", []bool{false, false, true, true}},     // 70
		{"Emergency", []bool{false, false, false, true}}, // 100
		{"Normal", []bool{true, true, true, true}},       // pinned back
	}
	for _, step := range steps {
		name := step.level
		if name == "" {
			name = "start"
		}
		t.Run(name, func(t *testing.T) {
			if step.level != "" {
				setOverride(t, daemon, step.level)
			}
			for i, path := range paths {
				before := svc.served(path)
				got := get(t, client, base+path)
				reached := svc.served(path) - before
				if step.served[i] {
					if got.code != http.StatusOK || reached != 1 {
						t.Errorf("%s: %d %q (service saw %d), want 200 from the service", path, got.code, got.body, reached)
					}
					continue
				}
				if got.code != http.StatusServiceUnavailable || reached != 0 {
					t.Errorf("%s: %d %q (service saw %d), want 503 shed before the service", path, got.code, got.body, reached)
					continue
				}
				if n, err := strconv.Atoi(got.retryAfter); err != nil || n < 1 || n > 300 {
					t.Errorf("%s: Retry-After %q, want whole seconds in 1..300 (the override's ttl)", path, got.retryAfter)
				}
				if got.level != step.level {
					t.Errorf("%s: X-Degraded-Level %q, want %q", path, got.level, step.level)
				}
				var body struct{ Error, Level string }
				if err := json.Unmarshal([]byte(got.body), &body); err != nil || body.Error != "shed" || body.Level != step.level {
					t.Errorf("%s: body %q, want {\"error\":\"shed\",\"level\":%q}", path, got.body, step.level)
				}
			}
		})
	}

	t.Run("degraded down: fail open", func(t *testing.T) {
		setOverride(t, daemon, "Emergency")
		if got := get(t, client, base+"/recommendations/for-you"); got.code != http.StatusServiceUnavailable {
			t.Fatalf("at Emergency: %d, want 503", got.code)
		}
		daemon.Close()
		for i, path := range []string{"/recommendations/for-you", "/search", "/checkout/pay"} {
			before := svc.served(path)
			got := get(t, client, base+path)
			if got.code != http.StatusOK || svc.served(path) != before+1 {
				t.Errorf("request %d with degraded down, %s: %d %q, want 200 from the service", i, path, got.code, got.body)
			}
		}
	})
}
