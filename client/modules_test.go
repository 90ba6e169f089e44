package client

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// consumer is a service's program that uses the client as another team
// would.
const consumer = `package main

import (
	"context"
	"net/http"

	"github.com/degraded/degraded/client"
)

func main() {
	c, err := client.New("http://127.0.0.1:8470", client.WithFailMode(client.FailOpen))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = c.Run(ctx)
	h := client.Middleware(c, client.PriorityFromHeader("X-Priority", 50))(http.NotFoundHandler())
	_ = h
	c.Record(c.Allow(10))
}
`

// TestConsumerGetsNoOtherModule builds a module of its own that imports
// only the client, through a replace to this directory, tidies it offline
// and checks its module graph: a service that imports the client must get
// no other module in go list -m all, go.mod or go.sum.
func TestConsumerGetsNoOtherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a separate module")
	}
	_, here, _, _ := runtime.Caller(0)
	const self = "github.com/degraded/degraded/client"
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":  "module example.com/shop\n\ngo 1.26\n\nrequire " + self + " v0.0.0\n\nreplace " + self + " => " + filepath.Dir(here) + "\n",
		"main.go": consumer,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		// Offline and outside any workspace: a module the client needed
		// would have to be fetched, and fails here instead.
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	goCmd("mod", "tidy")
	goCmd("build", "-o", os.DevNull, ".")
	for _, m := range strings.Fields(goCmd("list", "-m", "-f", "{{.Path}}", "all")) {
		if m != "example.com/shop" && m != self {
			t.Errorf("go list -m all of a module importing only the client holds %s", m)
		}
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(mod), "require"); n != 1 || strings.Contains(string(mod), "// indirect") {
		t.Errorf("the consumer's go.mod should require the client alone:\n%s", mod)
	}
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(sum)) {
		if !strings.HasPrefix(line, self+" ") {
			t.Errorf("the consumer's go.sum holds another module: %s", line)
		}
	}
}
