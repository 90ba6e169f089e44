package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// readmeTour is the README's two-minute tour: its fast config, the report
// it sends and what it says comes back.
type readmeTour struct {
	text                   string // the tour's section of the README
	config, report, reason string
	admit                  map[string]int // priority -> the status the README shows
}

func readTour(t *testing.T) readmeTour {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, "## A two-minute tour")
	if i < 0 {
		t.Fatal("README.md has no two-minute tour")
	}
	tour := readme[i:]
	m := regexp.MustCompile(`(?s)<<'YAML'\n(.*?)\nYAML\n`).FindStringSubmatch(tour)
	report := regexp.MustCompile(`-XPOST localhost:8470/v1/outcomes .* -d '(\{[^']*\})'`).FindStringSubmatch(tour)
	reason := regexp.MustCompile(`# \{"level":"Moderate".*"reason":"([^"]+)"`).FindStringSubmatch(tour)
	if m == nil || report == nil || reason == nil {
		t.Fatalf("the tour's config, report or answer is not where this test looks (config %v, report %v, answer %v)", m != nil, report != nil, reason != nil)
	}
	admit := map[string]int{}
	for _, a := range regexp.MustCompile(`'localhost:8470/v1/admit\?priority=(\d+)'\s+# (\d{3})`).FindAllStringSubmatch(tour, -1) {
		admit[a[1]], _ = strconv.Atoi(a[2])
	}
	if len(admit) < 2 {
		t.Fatalf("the tour shows %d admit requests with their answers, want one shed and one admitted", len(admit))
	}
	return readmeTour{text: tour, config: m[1], report: report[1], reason: reason[1], admit: admit}
}

// TestReadmeTour follows the README's tour: its fast config validates and
// starts without a warning, and its report moves the level to Moderate at
// once (event-driven), before any health check could, as the README says:
// the next GET already shows it, with the reason the README shows.
func TestReadmeTour(t *testing.T) {
	tour := readTour(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, tour.config)

	code, out, errOut := runCLI(t, nil, "validate", "--config", cfg)
	if code != 0 || out != "config OK: "+cfg+"\n" {
		t.Errorf("validate the tour's config: exit %d, printed %q %q; want only \"config OK\"", code, out, errOut)
	}

	// The README runs it in the repository, on the default port; here in a
	// temporary directory (data_dir "data" is relative), on a free port.
	cmd := exec.Command(binary, "serve", "--config", cfg, "--listen", "127.0.0.1:0")
	cmd.Dir = dir
	d := startCmd(t, cmd)
	before := d.level(t, "")
	if resp, body := d.request(t, "POST", "/v1/outcomes", "", tour.report); resp.StatusCode != 202 {
		t.Fatalf("the tour's report: %d %s", resp.StatusCode, body)
	}
	// The 202 comes before the controller has evaluated the report: the
	// next state document is the report's, long-polled for as a client
	// would, well within the tour's 1 s health check.
	if doc := d.level(t, fmt.Sprintf("?wait=900ms&after=%d", before.Sequence)); doc.Level != "Moderate" || doc.Reason != tour.reason {
		t.Errorf("right after the report the level is %s (%q); the README says Moderate (%q) at once", doc.Level, doc.Reason, tour.reason)
	}
	for q, want := range tour.admit {
		if resp, _ := d.request(t, "GET", "/v1/admit?priority="+q, "", ""); resp.StatusCode != want {
			t.Errorf("admit priority %s: %d, the README says %d", q, resp.StatusCode, want)
		}
	}
	// The operator's part: the README's pin and its DELETE.
	pinBody := regexp.MustCompile(`-XPUT localhost:8470/v1/override .*\n\s*-d '(\{[^']*\})'`).FindStringSubmatch(tour.text)
	if pinBody == nil {
		t.Fatal("the tour's override PUT is not where this test looks")
	}
	if resp, body := d.request(t, "PUT", "/v1/override", "", pinBody[1]); resp.StatusCode != 200 {
		t.Fatalf("the tour's pin: %d %s", resp.StatusCode, body)
	}
	if resp, body := d.request(t, "DELETE", "/v1/override", "", ""); resp.StatusCode != 200 {
		t.Fatalf("the tour's DELETE: %d %s", resp.StatusCode, body)
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}
	for _, line := range strings.Split(d.logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "config:") {
			t.Errorf("the tour's daemon warns at start: %s", line)
		}
	}

	// Replayed with its own config, the tour's recording reproduces every
	// recorded transition, the pin's included.
	code, out, errOut = runCLI(t, nil, "replay", "--config", cfg, "--format", "json", filepath.Join(dir, "data", "timeline"))
	if code != 0 {
		t.Fatalf("replay: exit %d: %s", code, errOut)
	}
	var res struct {
		Transitions, Recorded []struct{ At, From, To, Source string }
		RecordedConfig        bool `json:"recorded_config"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("replay's JSON: %v\n%s", err, out)
	}
	if !res.RecordedConfig || len(res.Recorded) < 2 || !slices.Equal(res.Recorded, res.Transitions) {
		t.Errorf("replay of the tour with its own config (recorded config %v):\n recorded %v\n replayed %v\nwant every recorded transition reproduced",
			res.RecordedConfig, res.Recorded, res.Transitions)
	}
	if errOut != "" {
		t.Errorf("replay of the tour warns: %s", errOut)
	}
}
