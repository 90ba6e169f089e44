package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// recordConfig is the recorded daemon's config: fmt it with the data_dir.
// Two levels on the error rate and a pushed queue_depth, a 1s dwell.
const recordConfig = `
listen: 127.0.0.1:0
data_dir: %q
health_check_interval: 200ms
minimum_level_duration: 1s
error_rate_window: 1s
error_rate_window_buckets: 5
min_throughput: 10
signals:
  cpu: {source: off}
  memory: {source: off}
  custom: [{name: queue_depth, ttl: 1m}]
auth: {token: "admin-secret"}
levels:
  - {name: Minor, priority_threshold: 10, error_rate_percent: %g, custom: {queue_depth: 100}}
  - {name: Major, priority_threshold: 50, error_rate_percent: %g, custom: {queue_depth: 500}}
`

// replayOutput is `degraded replay --format json`.
type replayOutput struct {
	Transitions []struct {
		At                       time.Time
		From, To, Source, Reason string
	} `json:"transitions"`
	Recorded []struct {
		At               time.Time
		From, To, Source string
	} `json:"recorded"`
	TimeAtLevel map[string]string `json:"time_at_level"`
	Flaps       int               `json:"flaps"`
	// RecordedFlaps counts the recording's flaps in the same window.
	RecordedFlaps int `json:"recorded_flaps"`
	Corrupt       int `json:"corrupt"`
}

// replayBinary runs `degraded replay --format json` on the timeline with
// a candidate config and returns its output.
func replayBinary(t *testing.T, timeline, candidate string) replayOutput {
	t.Helper()
	out, err := exec.Command(binary, "replay", "--config", candidate, "--format", "json", timeline).Output()
	if err != nil {
		t.Fatalf("degraded replay: %v", err)
	}
	var r replayOutput
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("replay output %q: %v", out, err)
	}
	return r
}

func (r replayOutput) at(t *testing.T, level string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(r.TimeAtLevel[level])
	if err != nil {
		t.Fatalf("time_at_level[%s] = %q: %v", level, r.TimeAtLevel[level], err)
	}
	return d
}

// TestRecordAndReplay drives the real binary through an incident (outcome
// reports escalate to Minor, then Major, hold 15% failures for 2 s, then
// recover; a pushed
// queue_depth flips between 600 and 50), then replays the timeline: the
// same config reproduces the recorded transitions at the same lines, a
// lower Major threshold spends more time at Major, and
// minimum_level_duration: 0 flaps.
func TestRecordAndReplay(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	d := start(t, "serve", "--config", writeConfig(t, dir, fmt.Sprintf(recordConfig, data, 5.0, 20.0)))
	post := func(body string) {
		if resp, b := d.request(t, "POST", "/v1/outcomes", "", body); resp.StatusCode != 202 {
			t.Fatalf("outcomes: %d %s", resp.StatusCode, b)
		}
	}
	push := func(v string) {
		if resp, b := d.request(t, "PUT", "/v1/signals/queue_depth", "", `{"value":`+v+`}`); resp.StatusCode/100 != 2 {
			t.Fatalf("PUT queue_depth: %d %s", resp.StatusCode, b)
		}
	}
	push("0")
	post(`{"success":90,"failure":10}`) // 10%: Minor
	d.waitLevel(t, "Minor")
	post(`{"success":50,"failure":50}`) // 60 of 200 in the window, 30%: Major
	d.waitLevel(t, "Major")
	// 15% for 2 s: under Major's 20%, so the recorded level leaves Major
	// after its dwell, but over the candidate's 8%, which holds it for the
	// 2 s and the window after. (Without it, the two configs' time at Major
	// differed by the few milliseconds between the first two reports, and a
	// loaded machine's late health checks could reverse them.)
	for range 8 {
		post(`{"success":85,"failure":15}`)
		time.Sleep(250 * time.Millisecond)
	}
	d.waitLevel(t, "Normal") // the window empties; one step per dwell
	for _, v := range []string{"600", "50", "600", "50"} {
		push(v)
		time.Sleep(250 * time.Millisecond)
	}
	d.waitLevel(t, "Normal")

	resp, body := d.request(t, "GET", "/v1/timeline", "admin-secret", "")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" || !strings.Contains(body, `"trigger":"start"`) {
		t.Fatalf("GET /v1/timeline: %d %s, want the recorded lines from the start", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, d.logs)
	}
	timeline := filepath.Join(data, "timeline")

	same := writeConfig(t, t.TempDir(), fmt.Sprintf(recordConfig, data, 5.0, 20.0))
	got := replayBinary(t, timeline, same)
	if len(got.Recorded) < 6 {
		t.Fatalf("recorded transitions %+v, want the incident's", got.Recorded)
	}
	if len(got.Transitions) != len(got.Recorded) {
		t.Fatalf("replayed %+v\nrecorded %+v", got.Transitions, got.Recorded)
	}
	for i, r := range got.Recorded {
		p := got.Transitions[i]
		if !p.At.Equal(r.At) || p.From != r.From || p.To != r.To || p.Source != r.Source {
			t.Errorf("transition %d: replayed %s %s -> %s (%s), recorded %s %s -> %s (%s)", i, p.At, p.From, p.To, p.Source, r.At, r.From, r.To, r.Source)
		}
		if p.Reason == "" {
			t.Errorf("transition %d has no reason", i)
		}
	}

	lower := replayBinary(t, timeline, writeConfig(t, t.TempDir(), fmt.Sprintf(recordConfig, data, 5.0, 8.0)))
	if lower.at(t, "Major") <= got.at(t, "Major") {
		t.Errorf("Major at 8%%: %v at Major, want more than the recorded config's %v", lower.at(t, "Major"), got.at(t, "Major"))
	}

	report := filepath.Join(t.TempDir(), "report.html")
	if out, err := exec.Command(binary, "replay", "--config", same, "--format", "html", "--out", report, timeline).CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "wrote "+report) {
		t.Fatalf("degraded replay --format html: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(report); err != nil || !strings.Contains(string(b), `id="report-data"`) || !strings.Contains(string(b), "const DegradedCharts") {
		t.Errorf("the report %s: %v, want the page with its charts and data (%d bytes)", report, err, len(b))
	}

	nodwell := strings.Replace(fmt.Sprintf(recordConfig, data, 5.0, 20.0), "minimum_level_duration: 1s", "minimum_level_duration: 0s", 1)
	flappy := replayBinary(t, timeline, writeConfig(t, t.TempDir(), nodwell))
	if flappy.Flaps < 1 || flappy.Flaps <= flappy.RecordedFlaps {
		t.Errorf("minimum_level_duration 0: %d flaps, want the queue's flips counted, more than the recording's %d\n%+v", flappy.Flaps, flappy.RecordedFlaps, flappy.Transitions)
	}
}

// TestReplayErrors: a bad candidate config is exit 2 with validate's
// problems; a timeline without a valid line is exit 1; a corrupt line is
// skipped and counted.
func TestReplayErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("hysteresis: 1\n"), 0o600)
	good := filepath.Join(dir, "timeline.jsonl")
	os.WriteFile(good, []byte(`{"v":1,"at":"2026-12-01T10:00:00Z","trigger":"start","published":"Normal","source":"auto"}`+"\n"+"{torn\n"), 0o600)
	corrupt := filepath.Join(dir, "corrupt.jsonl")
	os.WriteFile(corrupt, []byte("{torn\n"), 0o600)

	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"bad candidate", []string{"replay", "--config", bad, good}, 2, "", "hysteresis: must be in [0, 1) (was 1)"},
		{"no valid line", []string{"replay", corrupt}, 1, "", "no valid timeline line"},
		{"no timeline", []string{"replay"}, 2, "", "requires at least 1 arg"},
		{"a bad --from", []string{"replay", "--from", "yesterday", good}, 2, "", `--from must be an RFC 3339 time`},
		{"a bad --format", []string{"replay", "--format", "yaml", good}, 2, "", `--format must be text, json or html`},
		{"a missing file", []string{"replay", filepath.Join(dir, "nope")}, 1, "", "no such file"},
		{"corrupt lines counted", []string{"replay", good}, 0, "(1 corrupt lines skipped)", ""},
		{"json", []string{"replay", "--format", "json", good}, 0, `"corrupt": 1`, ""},
		{"--seed draws the jitter", []string{"replay", "--seed", "7", good}, 0, "replayed 1 lines", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, nil, tt.args...)
			if code != tt.code || !strings.Contains(stdout, tt.stdout) || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q", code, stdout, stderr, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
}

// TestReplayHTMLOut: --format html writes the report to --out (or
// stdout); --out takes the other formats too; a failed replay leaves an
// earlier file as it was and no temporary file beside it; an --out that
// cannot be written is exit 1 naming it.
func TestReplayHTMLOut(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "timeline.jsonl")
	os.WriteFile(good, []byte(`{"v":1,"at":"2026-12-01T10:00:00Z","trigger":"start","published":"Normal","source":"auto"}`+"\n"+
		`{"v":1,"at":"2026-12-01T10:00:30Z","trigger":"tick","published":"Normal","source":"auto"}`+"\n"), 0o600)
	corrupt := filepath.Join(dir, "corrupt.jsonl")
	os.WriteFile(corrupt, []byte("{torn\n"), 0o600)
	report := filepath.Join(dir, "report.html")

	code, stdout, stderr := runCLI(t, nil, "replay", "--format", "html", "--out", report, good)
	b, err := os.ReadFile(report)
	if code != 0 || stdout != "" || !strings.Contains(stderr, "wrote "+report+": 2 lines replayed") || err != nil || !strings.HasPrefix(string(b), "<!doctype html>") {
		t.Fatalf("--format html --out: exit %d, stdout %q, stderr %q, file %d bytes (%v)", code, stdout, stderr, len(b), err)
	}
	if code, stdout, _ := runCLI(t, nil, "replay", "--format", "html", good); code != 0 || !strings.Contains(stdout, `id="report-data"`) {
		t.Errorf("--format html without --out: exit %d, want the page on stdout", code)
	}
	js := filepath.Join(dir, "out.json")
	if code, _, _ := runCLI(t, nil, "replay", "--format", "json", "--out", js, good); code != 0 {
		t.Errorf("--format json --out: exit %d", code)
	} else if b, _ := os.ReadFile(js); !strings.Contains(string(b), `"lines": 2`) {
		t.Errorf("--out %s holds %q", js, b)
	}

	if code, _, stderr := runCLI(t, nil, "replay", "--format", "html", "--out", report, corrupt); code != 1 || !strings.Contains(stderr, "no valid timeline line") {
		t.Errorf("a failed replay: exit %d, stderr %q; want 1 naming the cause", code, stderr)
	}
	if after, _ := os.ReadFile(report); string(after) != string(b) {
		t.Error("a failed replay changed the earlier report")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".report.html.*")); len(left) > 0 {
		t.Errorf("a failed replay left %v", left)
	}
	missing := filepath.Join(dir, "no", "such", "dir", "r.html")
	if code, _, stderr := runCLI(t, nil, "replay", "--format", "html", "--out", missing, good); code != 1 || !strings.Contains(stderr, "--out") {
		t.Errorf("an --out in a missing directory: exit %d, stderr %q; want 1 naming --out", code, stderr)
	}
}
