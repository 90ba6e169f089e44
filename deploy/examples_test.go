package deploy

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/degraded/degraded/config"
	"github.com/knadh/koanf/parsers/yaml"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// loadExample loads an example config as the daemon would, with its
// token_file pointed at a temporary file (validation reads it).
func loadExample(t *testing.T, path string, environ []string) (*config.Config, error) {
	t.Helper()
	dir := t.TempDir()
	token := filepath.Join(dir, "admin-token")
	if err := os.WriteFile(token, []byte("test-admin-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`(?m)^(\s*token_file:\s*).*$`).ReplaceAllString(read(t, path), "${1}"+token)
	tmp := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(config.LoadOptions{Path: tmp, Environ: environ}) // warnings are fine
	return cfg, err
}

// TestSystemdExample: the unit's config validates, and the unit and the
// config agree on where things are.
func TestSystemdExample(t *testing.T) {
	// The operator replaces the placeholder report token; here the
	// environment does (TestSystemdPlaceholderRefused: as shipped, it fails).
	cfg, err := loadExample(t, filepath.Join("systemd", "degraded.yaml"), []string{"DEGRADED_AUTH__REPORT_TOKEN=a-real-report-token"})
	if err != nil {
		t.Fatalf("systemd/degraded.yaml does not validate: %v", err)
	}
	unit := read(t, filepath.Join("systemd", "degraded.service"))
	for _, want := range []string{
		"ExecStart=/usr/local/bin/degraded serve --config /etc/degraded/degraded.yaml",
		"StateDirectory=" + strings.TrimPrefix(cfg.DataDir, "/var/lib/"),
		"ExecReload=/bin/kill -HUP $MAINPID",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("degraded.service lacks %q", want)
		}
	}
	if cfg.DataDir != "/var/lib/degraded" {
		t.Errorf("data_dir %q, want the unit's state directory /var/lib/degraded", cfg.DataDir)
	}
	if !cfg.IsLoopback() {
		t.Errorf("the per-host example should listen on loopback, not %s", cfg.Listen)
	}
}

// TestSystemdHardening rates the unit's sandbox with systemd-analyze, where
// it is installed, and fails if it gets weaker than "OK".
func TestSystemdHardening(t *testing.T) {
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("needs systemd-analyze")
	}
	// verify wants ExecStart to exist; the rating does not look at it.
	unit := regexp.MustCompile(`(?m)^ExecStart=.*$`).ReplaceAllString(read(t, filepath.Join("systemd", "degraded.service")), "ExecStart=/bin/true")
	path := filepath.Join(t.TempDir(), "degraded.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "verify", path).CombinedOutput(); err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "security", "--offline=yes", "--no-pager", path).CombinedOutput()
	if err != nil {
		t.Skipf("systemd-analyze security --offline not available here: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for degraded.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	if level, _ := strconv.ParseFloat(string(m[1]), 64); level > 2.0 {
		t.Errorf("exposure level %v, want at most 2.0 (\"OK\"):\n%s", level, out)
	}
}

// TestKubernetesExample: the sidecar's config validates with the
// environment the sidecar gives it, needs that environment, and names
// paths the manifest mounts.
func TestKubernetesExample(t *testing.T) {
	path := filepath.Join("kubernetes", "degraded.yaml")
	manifest := read(t, filepath.Join("kubernetes", "sidecar.yaml"))

	if _, err := loadExample(t, path, nil); err == nil || !strings.Contains(err.Error(), "report_token") {
		t.Errorf("without DEGRADED_AUTH__REPORT_TOKEN the config should be refused (it listens beyond loopback); got %v", err)
	}
	m := regexp.MustCompile(`(?m)^\s*token_file:\s*(\S+)`).FindStringSubmatch(read(t, path))
	if m == nil {
		t.Fatal("kubernetes/degraded.yaml sets no auth.token_file")
	}
	tokenFile := m[1]
	cfg, err := loadExample(t, path, []string{"DEGRADED_AUTH__REPORT_TOKEN=test-report-token"})
	if err != nil {
		t.Fatalf("kubernetes/degraded.yaml does not validate: %v", err)
	}
	if cfg.Signals.CPU.Source != "cgroup" || cfg.Signals.Memory.Source != "cgroup" {
		t.Errorf("signals %+v, want both from the cgroup", cfg.Signals)
	}
	for what, want := range map[string]string{
		"the report token from the Secret":  "name: DEGRADED_AUTH__REPORT_TOKEN",
		"the config file":                   "args: [serve, --config, /etc/degraded/config/degraded.yaml]",
		"the config volume":                 "mountPath: /etc/degraded/config,",
		"the token file's directory":        "mountPath: " + filepath.Dir(tokenFile) + ",",
		"the state directory":               "mountPath: " + cfg.DataDir + "}",
		"the pod cgroup link's directory":   "mountPath: " + filepath.Dir(cfg.Signals.CgroupPath) + ",",
		"the link the init container makes": "ln -sfn \"$dir\" " + cfg.Signals.CgroupPath,
		"a liveness probe on /healthz":      "livenessProbe:\n            httpGet: {path: /healthz",
		"the listen port":                   "containerPort: " + cfg.Listen[strings.LastIndex(cfg.Listen, ":")+1:] + "}",
	} {
		if !strings.Contains(manifest, want) {
			t.Errorf("sidecar.yaml lacks %s: %q", what, want)
		}
	}
	kust := read(t, filepath.Join("kubernetes", "kustomization.yaml"))
	for _, want := range []string{"- sidecar.yaml", "- degraded.yaml", "name: degraded-config"} {
		if !strings.Contains(kust, want) {
			t.Errorf("kustomization.yaml lacks %q", want)
		}
	}
}

// container is what TestKubernetesSidecarWiring reads of a container.
type container struct {
	args, env []string // env: the names set
	ports     map[string]int
	probes    map[string]map[string]any // kind -> httpGet
}

// containers reads sidecar.yaml's containers and init containers by name.
func containers(t *testing.T) map[string]container {
	t.Helper()
	doc, err := yaml.Parser().Unmarshal([]byte(read(t, filepath.Join("kubernetes", "sidecar.yaml"))))
	if err != nil {
		t.Fatalf("sidecar.yaml: %v", err)
	}
	dig := func(m any, keys ...string) any {
		for _, k := range keys {
			mm, _ := m.(map[string]any)
			m = mm[k]
		}
		return m
	}
	spec := dig(doc, "spec", "template", "spec")
	out := map[string]container{}
	for _, list := range []string{"containers", "initContainers"} {
		items, _ := dig(spec, list).([]any)
		for _, it := range items {
			c := container{ports: map[string]int{}, probes: map[string]map[string]any{}}
			args, _ := dig(it, "args").([]any)
			for _, a := range args {
				c.args = append(c.args, fmt.Sprint(a))
			}
			envs, _ := dig(it, "env").([]any)
			for _, e := range envs {
				c.env = append(c.env, fmt.Sprint(dig(e, "name")))
			}
			ports, _ := dig(it, "ports").([]any)
			for _, p := range ports {
				n, _ := strconv.Atoi(fmt.Sprint(dig(p, "containerPort")))
				c.ports[fmt.Sprint(dig(p, "name"))] = n
			}
			for _, kind := range []string{"startupProbe", "readinessProbe", "livenessProbe"} {
				if g, ok := dig(it, kind, "httpGet").(map[string]any); ok {
					c.probes[kind] = g
				} else if dig(it, kind) != nil {
					c.probes[kind] = map[string]any{}
				}
			}
			out[fmt.Sprint(dig(it, "name"))] = c
		}
	}
	return out
}

// TestKubernetesSidecarWiring: the app container gets exactly the
// DEGRADED_ variables the shop and docs/client.md read, probes paths the
// shop serves, listens where the kubelet reaches it, and degraded cannot
// take the pod out of service.
func TestKubernetesSidecarWiring(t *testing.T) {
	cs := containers(t)
	app, ok := cs["app"]
	if !ok {
		t.Fatal("sidecar.yaml has no container named app")
	}
	daemon, ok := cs["degraded"]
	if !ok {
		t.Fatal("sidecar.yaml has no init container named degraded")
	}

	// What the app reads: os.Getenv("DEGRADED_...") in the shop and in the
	// client docs' examples.
	getenv := regexp.MustCompile(`Getenv\("(DEGRADED_[A-Z_]+)"\)`)
	var reads []string
	sources, _ := filepath.Glob(filepath.Join("..", "examples", "shop", "*.go"))
	for _, f := range append(sources, filepath.Join("..", "docs", "client.md")) {
		for _, m := range getenv.FindAllStringSubmatch(read(t, f), -1) {
			if !slices.Contains(reads, m[1]) {
				reads = append(reads, m[1])
			}
		}
	}
	var sets []string
	for _, e := range app.env {
		if strings.HasPrefix(e, "DEGRADED_") {
			sets = append(sets, e)
		}
	}
	slices.Sort(reads)
	slices.Sort(sets)
	if !slices.Contains(reads, "DEGRADED_REPORT_TOKEN") || !slices.Equal(reads, sets) {
		t.Errorf("the app reads %v, the manifest gives it %v: they must be the same (and include DEGRADED_REPORT_TOKEN)", reads, sets)
	}

	// The shop's routes, as it registers them.
	shop := read(t, filepath.Join("..", "examples", "shop", "main.go"))
	for kind, g := range app.probes {
		path := fmt.Sprint(g["path"])
		if !strings.Contains(shop, `"GET `+path+`"`) {
			t.Errorf("the app's %s asks %s, which the shop does not serve", kind, path)
		}
		if port := fmt.Sprint(g["port"]); app.ports[port] == 0 {
			t.Errorf("the app's %s names port %q, which the container does not declare", kind, port)
		}
	}
	if _, ok := app.probes["readinessProbe"]; !ok {
		t.Error("the app has no readinessProbe")
	}

	// The shop listens on every interface, on its declared port.
	i := slices.Index(app.args, "-listen")
	if i < 0 || i+1 >= len(app.args) {
		t.Fatalf("the app's args %v give no -listen: the shop's default, 127.0.0.1, is not reachable by the kubelet", app.args)
	}
	host, port, err := net.SplitHostPort(app.args[i+1])
	if p, _ := strconv.Atoi(port); err != nil || host != "" && host != "0.0.0.0" && host != "::" || p != app.ports["http"] {
		t.Errorf("-listen %s: want every interface on the http port %d", app.args[i+1], app.ports["http"])
	}

	// degraded: alive or restarted, never holding the pod back.
	for _, kind := range []string{"readinessProbe", "startupProbe"} {
		if _, ok := daemon.probes[kind]; ok {
			t.Errorf("degraded has a %s: it could hold the pod out of service, but degraded is an advisor, never a dependency", kind)
		}
	}
	if g := daemon.probes["livenessProbe"]; fmt.Sprint(g["path"]) != "/healthz" {
		t.Errorf("degraded's livenessProbe is %v, want /healthz", g)
	}
	if want := fmt.Sprintf("value: http://127.0.0.1:%d", daemon.ports["degraded"]); !strings.Contains(read(t, filepath.Join("kubernetes", "sidecar.yaml")), want) {
		t.Errorf("DEGRADED_ADDR should be the daemon on the pod's loopback: %q", want)
	}
}

// TestDockerRunExample: the `docker run` in the Dockerfile's header mounts
// every file it points the daemon at, so that it runs as written.
func TestDockerRunExample(t *testing.T) {
	var run []string
	in := false
	for _, line := range strings.Split(read(t, filepath.Join("docker", "Dockerfile")), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(line, "#"))
		if strings.HasPrefix(line, "docker run ") {
			in = true
		}
		if in {
			run = append(run, strings.Fields(strings.TrimSuffix(line, "\\"))...)
			if !strings.HasSuffix(line, "\\") {
				break
			}
		}
	}
	if len(run) == 0 {
		t.Fatal("the Dockerfile shows no docker run")
	}
	var files, mounts []string
	for i := 0; i+1 < len(run); i++ {
		switch run[i] {
		case "-e":
			if k, v, _ := strings.Cut(run[i+1], "="); strings.HasSuffix(k, "_FILE") {
				files = append(files, v)
			}
		case "-v":
			parts := strings.Split(strings.Trim(run[i+1], `"`), ":")
			if len(parts) >= 2 {
				mounts = append(mounts, parts[1])
			}
		}
	}
	if len(files) == 0 {
		t.Fatalf("docker run %v sets no *_FILE variable; this test expects the admin token file", run)
	}
	for _, f := range files {
		mounted := false
		for _, m := range mounts {
			if f == m || strings.HasPrefix(f, strings.TrimSuffix(m, "/")+"/") {
				mounted = true
			}
		}
		if !mounted {
			t.Errorf("docker run points the daemon at %s but mounts only %v: it exits 2 as written", f, mounts)
		}
	}
}
