package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/degraded/degraded/internal/daemon"
	"github.com/degraded/degraded/internal/daemon/daemontest"
)

const adminToken = "nginx-test-admin"

// startDaemon runs the real API and controller with the default level table
// on a loopback server. Signals are off: the tests move the level with
// overrides, which take effect at once.
func startDaemon(t *testing.T) *httptest.Server {
	t.Helper()
	r := daemontest.Start(t, `
data_dir: ""
signals: {cpu: {source: off}, memory: {source: off}}
auth: {token: "`+adminToken+`"}
`, daemon.Options{})
	r.Controller().Check(context.Background()) // ready at once: the first health check has run
	return r.Server.Server
}

// app is the service behind nginx: it answers 200 and counts what reached it.
type app struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func startApp(t *testing.T) *app {
	t.Helper()
	a := &app{hits: map[string]int{}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.hits[r.URL.Path]++
		a.mu.Unlock()
		fmt.Fprintf(w, "app served %s\n", r.URL.Path)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *app) served(path string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.hits[path]
}

// nginxPath finds Debian's nginx, which lives in /usr/sbin.
func nginxPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	t.Skip("the nginx test needs nginx (Debian: apt-get install nginx; .ci/run installs it)")
	return ""
}

// startNginx runs nginx/degraded.conf, unchanged but for its three
// addresses, in real nginx, and returns its base URL.
func startNginx(t *testing.T, daemonAddr, appAddr string) string {
	t.Helper()
	example, err := os.ReadFile(filepath.Join("nginx", "degraded.conf"))
	if err != nil {
		t.Fatal(err)
	}
	return runNginx(t, func(addr string) string {
		conf := string(example)
		for old, repl := range map[string]string{
			"server 127.0.0.1:8470;": "server " + daemonAddr + ";",
			"server 127.0.0.1:8080;": "server " + appAddr + ";",
			"listen 8000;":           "listen " + addr + ";",
		} {
			if strings.Count(conf, old) != 1 {
				t.Fatalf("nginx/degraded.conf should hold %q once", old)
			}
			conf = strings.Replace(conf, old, repl, 1)
		}
		return conf
	})
}

// runNginx runs the http-level configuration that conf returns for a
// listen address in a foreground nginx with its own prefix, and returns
// its base URL.
//
// The listening socket is made here and handed to nginx as an inherited
// socket (the NGINX environment variable, as in nginx's binary upgrade):
// connections queue on it from the start, so no port can be taken in
// between and nothing has to poll until nginx is up.
func runNginx(t *testing.T, conf func(listen string) string) string {
	t.Helper()
	bin := nginxPath(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	lnFile, err := ln.(*net.TCPListener).File()
	ln.Close() // nginx holds the duplicate
	if err != nil {
		t.Fatal(err)
	}
	defer lnFile.Close()

	dir := t.TempDir()
	// A master and one worker: single-process mode (master_process off)
	// crashes on inherited sockets in nginx 1.22. As root, the worker
	// stays root so that it can reach the temporary prefix.
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;"
	}
	main := fmt.Sprintf(`daemon off;
%[2]s
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/degraded.conf;
}
`, dir, user)
	for name, body := range map[string]string{"nginx.conf": main, "degraded.conf": conf(addr)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	args := []string{"-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", filepath.Join(dir, "error.log")}
	if out, err := exec.Command(bin, append(args, "-t")...).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t rejects the example: %v\n%s", err, out)
	}
	var output bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "NGINX=3;") // fd 3 is the first of ExtraFiles
	cmd.ExtraFiles = []*os.File{lnFile}
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt) // fast shutdown
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx output:\n%s\nerror.log:\n%s", output.String(), log)
		}
	})
	return "http://" + addr
}

type answer struct {
	code       int
	retryAfter string
	level      string
	body       string
}

func get(t *testing.T, client *http.Client, url string) answer {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("X-Degraded-Level"), string(b)}
}

func setOverride(t *testing.T, daemon *httptest.Server, level string) {
	t.Helper()
	body := fmt.Sprintf(`{"level":%q,"mode":"pin","ttl":"5m","reason":"nginx test"}`, level)
	req, _ := http.NewRequest("PUT", daemon.URL+"/v1/override", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := daemon.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("PUT /v1/override %s: %d %s", level, resp.StatusCode, b)
	}
}

// TestNginxSheds runs deploy/nginx/degraded.conf in real nginx between a
// client and a service, with a real degraded deciding, and checks that
// each level sheds exactly the locations below its priority threshold.
func TestNginxSheds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nginx")
	}
	daemon := startDaemon(t)
	svc := startApp(t)
	base := startNginx(t, daemon.Listener.Addr().String(), svc.srv.Listener.Addr().String())
	client := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)

	// Location priorities in the example: /recommendations/ 20, / 50,
	// /checkout/ 90; /healthz is never gated.
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
						t.Errorf("%s: %d (service saw %d), want 200 from the service", path, got.code, reached)
					}
					continue
				}
				if got.code != http.StatusServiceUnavailable {
					t.Errorf("%s: %d %q, want 503 (shed)", path, got.code, got.body)
					continue
				}
				if reached != 0 {
					t.Errorf("%s: shed, yet the service saw it", path)
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
		before := svc.served("/recommendations/for-you")
		got := get(t, client, base+"/recommendations/for-you")
		if got.code != http.StatusOK || svc.served("/recommendations/for-you") != before+1 {
			t.Errorf("with degraded down: %d %q, want 200 from the service", got.code, got.body)
		}
	})
}

// apiSnippet is the nginx snippet of docs/api.md's /v1/admit section.
func apiSnippet(t *testing.T) string {
	t.Helper()
	doc := read(t, filepath.Join("..", "docs", "api.md"))
	i := strings.Index(doc, "### `GET /v1/admit`")
	if i < 0 {
		t.Fatal("docs/api.md has no /v1/admit section")
	}
	doc = doc[i:]
	start := strings.Index(doc, "```nginx\n")
	if start < 0 {
		t.Fatal("docs/api.md's /v1/admit section has no nginx snippet")
	}
	doc = doc[start+len("```nginx\n"):]
	return doc[:strings.Index(doc, "```")]
}

// TestNginxAPISnippet runs the snippet of docs/api.md in real nginx: it
// serves unmarked requests at Normal, sheds by each location's own
// priority whatever priority header the client sends, and fails open when
// degraded is down.
func TestNginxAPISnippet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nginx")
	}
	snippet := apiSnippet(t)
	if strings.Contains(snippet, "$http_") {
		t.Errorf("the snippet reads a request header: a client could pick its own priority:\n%s", snippet)
	}
	daemon := startDaemon(t)
	svc := startApp(t)
	if strings.Count(snippet, "127.0.0.1:8470") != 1 {
		t.Fatalf("the snippet should name degraded at 127.0.0.1:8470 once:\n%s", snippet)
	}
	snippet = strings.Replace(snippet, "127.0.0.1:8470", daemon.Listener.Addr().String(), 1)
	base := runNginx(t, func(listen string) string {
		return fmt.Sprintf("upstream app { server %s; }\nserver {\n    listen %s;\n%s}\n", svc.srv.Listener.Addr(), listen, snippet)
	})
	client := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	do := func(path, priority string) answer {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		if priority != "" {
			req.Header.Set("X-Priority", priority)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("X-Degraded-Level"), string(b)}
	}
	steps := []struct {
		level          string // pinned; "" leaves Normal
		path, priority string
		code           int
	}{
		{"", "/search", "", 200},
		{"", "/recommendations/for-you", "", 200},
		{"", "/search", "2147483647", 200},
		{"Moderate", "/search", "", 200},
		{"Moderate", "/recommendations/for-you", "", 503},
		{"Moderate", "/recommendations/for-you", "2147483647", 503},
		{"Severe", "/search", "", 503},
		{"Severe", "/search", "2147483647", 503},
		{"Severe", "/search", "junk", 503},
	}
	for _, st := range steps {
		if st.level != "" {
			setOverride(t, daemon, st.level)
		}
		got := do(st.path, st.priority)
		if got.code != st.code {
			t.Errorf("at %q, %s with X-Priority %q: %d %q, want %d", st.level, st.path, st.priority, got.code, got.body, st.code)
			continue
		}
		if st.code == 503 {
			if n, err := strconv.Atoi(got.retryAfter); err != nil || n < 1 || got.level != st.level {
				t.Errorf("at %s, %s shed with Retry-After %q and X-Degraded-Level %q, want whole seconds and %s", st.level, st.path, got.retryAfter, got.level, st.level)
			}
		}
	}

	daemon.Close()
	before := svc.served("/recommendations/for-you")
	if got := do("/recommendations/for-you", ""); got.code != 200 || svc.served("/recommendations/for-you") != before+1 {
		t.Errorf("with degraded down: %d %q, want 200 from the service (fail open)", got.code, got.body)
	}
}
