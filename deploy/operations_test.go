package deploy

import (
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// section is the text of a markdown section of doc, from its heading to
// the next heading of the same or a higher level.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("no section %q", heading)
	}
	rest := doc[i+len(heading)+2:]
	level := len(strings.Fields(heading)[0]) // "##" is 2
	if j := regexp.MustCompile(`(?m)^#{1,` + strconv.Itoa(level) + `} `).FindStringIndex(rest); j != nil {
		rest = rest[:j[0]]
	}
	return rest
}

// TestOperationsAlertTable: docs/operations.md's alert table lists every
// alert of deploy/monitoring/alerts.yml, and no other.
func TestOperationsAlertTable(t *testing.T) {
	var inRules []string
	for _, doc := range parseYAML(t, filepath.Join("monitoring", "alerts.yml")) {
		for _, g := range list(doc["groups"]) {
			for _, r := range list(dig(g, "rules")) {
				if a := str(dig(r, "alert")); a != "" {
					inRules = append(inRules, a)
				}
			}
		}
	}
	if len(inRules) == 0 {
		t.Fatal("alerts.yml has no alert")
	}
	table := section(t, read(t, filepath.Join("..", "docs", "operations.md")), "## Monitoring")
	var inTable []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(\\w+)` \\|").FindAllStringSubmatch(table, -1) {
		inTable = append(inTable, m[1])
	}
	for _, a := range inRules {
		if !slices.Contains(inTable, a) {
			t.Errorf("alerts.yml has %s; operations.md's alert table (## Monitoring) does not list it", a)
		}
	}
	for _, a := range inTable {
		if !slices.Contains(inRules, a) {
			t.Errorf("operations.md's alert table lists %s, which alerts.yml does not have", a)
		}
	}
}

// TestOperationsProbes: what docs/operations.md says about the Kubernetes
// sidecar's probes ("`/healthz` (liveness)") is what sidecar.yaml gives
// the degraded container, and it names none that the manifest lacks.
func TestOperationsProbes(t *testing.T) {
	daemon, ok := containers(t)["degraded"]
	if !ok {
		t.Fatal("sidecar.yaml has no container named degraded")
	}
	want := map[string]string{}
	for kind, g := range daemon.probes {
		want[strings.TrimSuffix(kind, "Probe")] = str(g["path"])
	}
	deploying := section(t, read(t, filepath.Join("..", "docs", "operations.md")), "## Deploying")
	i := strings.Index(deploying, "- **Kubernetes**")
	if i < 0 {
		t.Fatal("operations.md's Deploying section has no Kubernetes item")
	}
	item := deploying[i:]
	if j := strings.Index(item[1:], "\n- **"); j >= 0 {
		item = item[:j+1]
	}
	item = strings.Join(strings.Fields(item), " ")
	got := map[string]string{}
	for _, m := range regexp.MustCompile("`(/[a-z]+)` \\(([^):]*)").FindAllStringSubmatch(item, -1) {
		for _, kind := range regexp.MustCompile(`liveness|readiness|startup`).FindAllString(m[2], -1) {
			got[kind] = m[1]
		}
	}
	for kind, path := range want {
		if got[kind] != path {
			t.Errorf("sidecar.yaml gives degraded a %s probe on %s; operations.md says %q", kind, path, got[kind])
		}
	}
	for kind, path := range got {
		if _, ok := want[kind]; !ok {
			t.Errorf("operations.md describes a %s probe on %s, which sidecar.yaml does not have:\n%s", kind, path, item)
		}
	}
}
