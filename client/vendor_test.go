package client

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestImportableFromAnotherModule builds a program in a module of its own
// that imports the client through a replace directive, as another team
// would: the client must not drag in the daemon.
func TestImportableFromAnotherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a separate module")
	}
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(here))
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/shop\n\ngo 1.26\n\nrequire github.com/degraded/degraded v0.0.0\n\nreplace github.com/degraded/degraded => " + root + "\n",
		"main.go": `package main

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
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", os.DevNull, "."}, {"list", "-deps", "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, out)
		}
		if args[0] == "list" {
			for _, banned := range []string{"github.com/degraded/degraded/controller", "github.com/degraded/degraded/api", "github.com/prometheus/client_golang"} {
				if slices.Contains(strings.Split(string(out), "\n"), banned) {
					t.Errorf("the client pulls in %s", banned)
				}
			}
		}
	}
}
