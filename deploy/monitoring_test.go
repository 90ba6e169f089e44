package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/degraded/degraded/api"
	"github.com/prometheus/client_golang/prometheus"
)

// exported returns the names of the series the daemon exports, as
// Prometheus stores them (a histogram as _bucket, _sum and _count).
func exported(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := api.NewMetrics(reg, []string{"Normal", "Minor"})
	m.Transition("Normal", "Minor", "auto") // a vector is gathered once it has a series
	api.RegisterFleetMetrics(reg, nil)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
		if f.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+s] = true
			}
		}
	}
	return names
}

type dashboard struct {
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		GridPos struct {
			X, Y, W, H int
		} `json:"gridPos"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr       string `json:"expr"`
			RefID      string `json:"refId"`
			Datasource *struct {
				UID string `json:"uid"`
			} `json:"datasource"`
		} `json:"targets"`
	} `json:"panels"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("monitoring", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	return d
}

// dashboardExprs are the PromQL expressions of the Grafana dashboard, with
// Grafana's variables replaced by values Prometheus accepts.
func dashboardExprs(t *testing.T) []string {
	d := loadDashboard(t)
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			e := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*").Replace(tg.Expr)
			out = append(out, e)
		}
	}
	return out
}

var metricName = regexp.MustCompile(`\bdegraded_[a-z0-9_]+`)

// TestMonitoringNamesExportedMetrics keeps the alerts and the dashboard in
// step with api/metrics.go: a renamed metric would silently empty a panel
// or make an alert never fire.
func TestMonitoringNamesExportedMetrics(t *testing.T) {
	have := exported(t)
	uses := map[string][]string{} // metric -> where
	rules, err := os.ReadFile(filepath.Join("monitoring", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(rules), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue // a wished-for rule may name a metric that does not exist yet
		}
		for _, m := range metricName.FindAllString(line, -1) {
			uses[m] = append(uses[m], fmt.Sprintf("alerts.yml:%d", i+1))
		}
	}
	for _, e := range dashboardExprs(t) {
		for _, m := range metricName.FindAllString(e, -1) {
			uses[m] = append(uses[m], "grafana-dashboard.json: "+e)
		}
	}
	if len(uses) < 10 {
		t.Fatalf("found only %d metric names in the alerts and dashboard; is the pattern broken?", len(uses))
	}
	var unknown []string
	for m, where := range uses {
		if !have[m] {
			unknown = append(unknown, m+" (in "+where[0]+")")
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("names the daemon does not export:\n%s", strings.Join(unknown, "\n"))
	}
	// And the other way round: every degraded_ series is on the dashboard.
	onDashboard := map[string]bool{}
	for _, e := range dashboardExprs(t) {
		for _, m := range metricName.FindAllString(e, -1) {
			onDashboard[m] = true
		}
	}
	var missing []string
	for name := range have {
		histogram := have[name+"_bucket"]
		if !strings.HasPrefix(name, "degraded_") || histogram || strings.HasSuffix(name, "_sum") || strings.HasSuffix(name, "_count") {
			continue
		}
		if !onDashboard[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("exported but on no panel of deploy/monitoring/grafana-dashboard.json: %s\n"+
			"(add a panel, so that operators see it, and consider an alert in alerts.yml)", strings.Join(missing, ", "))
	}
}

func TestGrafanaDashboardLayout(t *testing.T) {
	d := loadDashboard(t)
	ids := map[int]string{}
	for _, p := range d.Panels {
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.GridPos.W < 1 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q is outside the 24-column grid: %+v", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q query %s does not use the $datasource variable", p.Title, tg.RefID)
			}
			if !strings.Contains(tg.Expr, `instance=~"$instance"`) {
				t.Errorf("panel %q query %s ignores the $instance variable: %s", p.Title, tg.RefID, tg.Expr)
			}
		}
	}
}

// promtool finds Debian's promtool (package prometheus), or skips.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("needs promtool (Debian: apt-get install prometheus; .ci/run installs it)")
	}
	return p
}

// TestAlertRules checks the rules and runs their unit tests, as .ci/run
// does, so that `go test ./...` alone catches a broken rule.
func TestAlertRules(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", filepath.Join("monitoring", "alerts.yml")},
		{"test", "rules", filepath.Join("monitoring", "tests", "alerts_test.yml")},
	} {
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestGrafanaQueriesParse hands every dashboard query to promtool as a
// recording rule, which parses it as Prometheus would.
func TestGrafanaQueriesParse(t *testing.T) {
	bin := promtool(t)
	var b strings.Builder
	b.WriteString("groups:\n  - name: grafana\n    rules:\n")
	for i, e := range dashboardExprs(t) {
		q, _ := json.Marshal(e) // a JSON string is a YAML string
		fmt.Fprintf(&b, "      - record: grafana:query_%d\n        expr: %s\n", i, q)
	}
	path := filepath.Join(t.TempDir(), "grafana-queries.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("a dashboard query does not parse: %v\n%s", err, out)
	}
}
