package degradedgrpc

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// consumer is a service's program that uses degradedgrpc as another team
// would.
const consumer = `package main

import (
	"github.com/degraded/degraded/client"
	"github.com/degraded/degraded/degradedgrpc"
	"google.golang.org/grpc"
)

func main() {
	c, err := client.New("http://127.0.0.1:8470")
	if err != nil {
		panic(err)
	}
	prio := degradedgrpc.PriorityFromMetadata("x-priority", 50)
	_ = grpc.NewServer(grpc.ChainUnaryInterceptor(degradedgrpc.UnaryServerInterceptor(c, prio)),
		grpc.ChainStreamInterceptor(degradedgrpc.StreamServerInterceptor(c, prio)))
}
`

// TestConsumerGetsOnlyGRPCAndTheClient builds a module of its own that
// imports degradedgrpc, through replaces to this repository, tidies it
// offline and checks its module graph: every module in go list -m all is
// the consumer, degradedgrpc, the client, or one that grpc itself
// requires (directly or not, as go mod graph shows).
func TestConsumerGetsOnlyGRPCAndTheClient(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a separate module")
	}
	_, here, _, _ := runtime.Caller(0)
	dir := filepath.Dir(here)
	const (
		self   = "github.com/degraded/degraded/degradedgrpc"
		client = "github.com/degraded/degraded/client"
		grpc   = "google.golang.org/grpc"
	)
	mod := "module example.com/shop\n\ngo 1.26\n\nrequire (\n\t" + self + " v0.0.0\n\t" + client + " v0.0.0\n)\n\n" +
		"replace " + self + " => " + dir + "\n\nreplace " + client + " => " + filepath.Join(dir, "..", "client") + "\n"
	goCmd := consumerModule(t, map[string]string{"go.mod": mod, "main.go": consumer})
	goCmd("mod", "tidy")
	goCmd("build", "-o", os.DevNull, ".")
	// -e: the modules grpc requires but this build never loads (xds's
	// cloud dependencies) are listed without their details, which offline
	// the go command cannot look up.

	// What grpc requires: everything reachable from its node in the graph.
	edges := map[string][]string{}
	var grpcNode string
	for line := range strings.Lines(goCmd("mod", "graph")) {
		from, to, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		edges[from] = append(edges[from], to)
		if strings.HasPrefix(to, grpc+"@") && !strings.Contains(from, "@") {
			grpcNode = to
		}
	}
	if grpcNode == "" {
		t.Fatal("go mod graph: the consumer does not require grpc")
	}
	allowed := map[string]bool{"example.com/shop": true, self: true, client: true}
	for todo := []string{grpcNode}; len(todo) > 0; {
		n := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		path, _, _ := strings.Cut(n, "@")
		if allowed[path] && path != grpc {
			continue
		}
		allowed[path] = true
		todo = append(todo, edges[n]...)
	}
	for _, m := range strings.Fields(goCmd("list", "-m", "-e", "-f", "{{.Path}}", "all")) {
		if !allowed[m] {
			t.Errorf("go list -m all of a module importing degradedgrpc holds %s, which grpc does not require", m)
		}
	}
}

// consumerModule writes files into a new module directory and returns a
// func running the go command there: offline and outside any workspace,
// so that a module degradedgrpc needed beyond what this module already
// fetched would fail here.
func consumerModule(t *testing.T, files map[string]string) func(args ...string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		// Offline: the modules come from the local cache, which holds
		// them only as this repository's go.sum verified them. The
		// checksum database is off too: the consumer's go.sum starts
		// empty, and on a fresh machine its lookups (sum.golang.org,
		// not the proxy, once GOPROXY is off) fail with no network.
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
}
