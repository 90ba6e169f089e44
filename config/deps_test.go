package config

import (
	"os/exec"
	"strings"
	"testing"
)

// TestConfigImportsLevelsOnly: config depends on the domain root alone
// (DESIGN.md "Layout"), so that replay and the CLI's config commands pull
// in no sampler, no gopsutil and no Prometheus client.
func TestConfigImportsLevelsOnly(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/degraded/degraded/") && pkg != "github.com/degraded/degraded/levels" && pkg != "github.com/degraded/degraded/config" {
			t.Errorf("config depends on %s; it may import levels only", pkg)
		}
		for _, banned := range []string{"gopsutil", "prometheus/client_golang", "prometheus/common"} {
			if strings.Contains(pkg, banned) {
				t.Errorf("config depends on %s", pkg)
			}
		}
	}
}
