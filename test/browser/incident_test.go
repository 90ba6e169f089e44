package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/controller"
	rig "github.com/degraded/degraded/internal/daemon"
	"github.com/degraded/degraded/internal/daemon/daemontest"
	"github.com/degraded/degraded/internal/timeline"
	"github.com/degraded/degraded/levels"
)

// The recorded incident the History view and the replay report are tested
// with: the real daemon (internal/daemon, the wiring of `degraded serve`)
// runs six minutes in fake time (testing/synctest) and records its
// timeline. CPU climbs past Major's threshold, a service reports its
// outcomes and admission every second, alice (an operator, with her own
// token) pins Severe through PUT /v1/override, then reloads a table with
// lower CPU thresholds through POST /-/reload, the pin expires, CPU falls
// and the level steps down to Normal.

// incidentTable is the level table, Major's cpu threshold at major.
func incidentTable(major int) string {
	return fmt.Sprintf(`levels:
  - {name: Minor, priority_threshold: 10, error_rate_percent: 5, cpu_percent: %d}
  - {name: Moderate, priority_threshold: 30, error_rate_percent: 10, cpu_percent: %d}
  - {name: Major, priority_threshold: 50, error_rate_percent: 20, cpu_percent: %d}
  - {name: Severe, priority_threshold: 70, error_rate_percent: 30, cpu_percent: 95}
`, major-20, major-10, major)
}

// incidentConfig is the recording daemon's config.
func incidentConfig(dataDir string, major int) string {
	return fmt.Sprintf(`data_dir: %q
health_check_interval: 1s
minimum_level_duration: 30s
recovery_jitter: 0
error_rate_window: 10s
error_rate_window_buckets: 10
auth: {token: %q, operators: [{name: alice, token: %q}]}
`, dataDir, adminToken, aliceToken) + incidentTable(major)
}

// aliceToken is the operator alice's token.
const aliceToken = "alice-s3cret"

// The incident's script, in seconds from the start.
const (
	incidentCPUUp     = 60  // cpu 40% -> 88%
	incidentPin       = 95  // alice pins Severe for 90s
	incidentReload    = 150 // alice reloads: Major's cpu threshold 80 -> 75
	incidentCPUDown   = 210 // cpu 88% -> 35%
	incidentEnd       = 370
	incidentPinReason = "INC-42 checkout latency"
)

// setting is a sampler whose value the test sets.
type setting struct {
	mu sync.Mutex
	v  float64
}

func (s *setting) set(v float64) { s.mu.Lock(); s.v = v; s.mu.Unlock() }
func (s *setting) Sample(context.Context, time.Time) (float64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.v, nil
}

var _ controller.Sampler = (*setting)(nil)

// incident is the recording, moved in time (every time field by the same
// amount) so that it ends a minute before now and the History view's last
// hour holds it, and the moments the charts are checked at, read from
// the lines.
type incident struct {
	lines                                                  []levels.Line
	start, escalated, pinned, reloaded, expired, recovered time.Time
}

// recordIncident records the incident into dataDir/timeline.
func recordIncident(t *testing.T, dataDir string) incident {
	t.Helper()
	rec := filepath.Join(t.TempDir(), "recorded")
	var start time.Time
	synctest.Test(t, func(t *testing.T) {
		cpu, mem := &setting{v: 40}, &setting{v: 52}
		var mu sync.Mutex
		major := 80
		load := func(bool) (*config.Config, []string, error) {
			mu.Lock()
			defer mu.Unlock()
			return daemontest.Config(t, incidentConfig(rec, major)), nil, nil
		}
		d := daemontest.New(t, incidentConfig(rec, major), rig.Options{CPU: cpu, Memory: mem, Load: load})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		start = time.Now()
		time.Sleep(500 * time.Millisecond) // between health checks

		client := &service{h: d.Handler(), t: t}
		for sec := 0; sec < incidentEnd; sec++ {
			switch sec {
			case incidentCPUUp:
				cpu.set(88)
			case incidentPin:
				client.as(aliceToken, "PUT", "/v1/override", `{"level":"Severe","mode":"pin","ttl":"90s","reason":"`+incidentPinReason+`"}`)
			case incidentReload:
				mu.Lock()
				major = 75
				mu.Unlock()
				client.as(aliceToken, "POST", "/-/reload", "")
			case incidentCPUDown:
				cpu.set(22)
			}
			failures := 0 // 3% errors while the CPU is high
			if sec >= incidentCPUUp && sec < incidentCPUDown {
				failures = 3
			}
			client.report(d.Controller().State(), failures)
			time.Sleep(time.Until(start.Add(time.Duration(sec+1)*time.Second + 500*time.Millisecond)))
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
	})
	by := time.Now().Add(-time.Minute - incidentEnd*time.Second).Sub(start)
	shift(t, filepath.Join(rec, "timeline"), filepath.Join(dataDir, "timeline"), by)
	in := incident{lines: readLines(t, filepath.Join(dataDir, "timeline")), start: start.Add(by)}
	for i, l := range in.lines {
		switch {
		case in.escalated.IsZero() && l.Published != levels.NormalName:
			in.escalated = l.At
		case l.Trigger == levels.TriggerOverride && l.Request != nil && l.Request.Action == "set":
			in.pinned = l.At
		case l.Trigger == levels.TriggerReload:
			in.reloaded = l.At
		case !in.pinned.IsZero() && in.expired.IsZero() && l.Override == nil:
			in.expired = l.At
		case !in.expired.IsZero() && in.recovered.IsZero() && l.Published == levels.NormalName && in.lines[i-1].Published != levels.NormalName:
			in.recovered = l.At
		}
	}
	for name, at := range map[string]time.Time{"escalation": in.escalated, "pin": in.pinned, "reload": in.reloaded, "expiry": in.expired, "recovery": in.recovered} {
		if at.IsZero() {
			t.Fatalf("the recorded incident has no %s", name)
		}
	}
	return in
}

// service is a client of the daemon: each second it reports 100 requests,
// offered at priorities 10, 40 and 80, and what the state it follows
// admitted of them.
type service struct {
	h http.Handler
	t *testing.T
}

// as makes an operator's request, which must succeed.
func (s *service) as(token, method, path, body string) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Host = "localhost"
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	s.h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		s.t.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
	}
}

func (s *service) report(st *controller.State, failures int) {
	offered := map[int]int64{10: 30, 40: 30, 80: 40}
	var admitted, shedPartial, shedBelow int64
	for p, n := range offered {
		switch {
		case p >= st.PriorityThreshold:
			admitted += n
		case st.Partial != nil && p >= st.Partial.From:
			a := int64(float64(n) * st.Partial.Fraction)
			admitted += a
			shedPartial += n - a
		default:
			shedBelow += n
		}
	}
	body, _ := json.Marshal(map[string]any{"success": admitted - int64(failures), "failure": failures,
		"admission": map[string]any{"sequence": st.Sequence, "admitted": admitted, "shed_partial": shedPartial, "shed_below": shedBelow,
			"seconds": 1, "reporter": "5e7c1a", "offered": map[string]int64{"10": 30, "40": 30, "80": 40}}})
	req := httptest.NewRequest("POST", "/v1/outcomes", strings.NewReader(string(body)))
	req.Host = "localhost"
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	s.h.ServeHTTP(w, req)
	if w.Code != http.StatusAccepted {
		s.t.Fatalf("POST /v1/outcomes %s: %d %s", body, w.Code, w.Body)
	}
}

// shift copies the timeline files of src into dst with every time moved
// by d, into the files of the days they then fall on.
func shift(t *testing.T, src, dst string, d time.Duration) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o750); err != nil {
		t.Fatal(err)
	}
	names, err := filepath.Glob(filepath.Join(src, "*.jsonl"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no timeline recorded in %s (%v)", src, err)
	}
	files := map[string]*os.File{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	mv := func(o *levels.LineOverride) {
		if o != nil {
			o.SetAt, o.ExpiresAt = o.SetAt.Add(d), o.ExpiresAt.Add(d)
		}
	}
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var l levels.Line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			l.At = l.At.Add(d)
			mv(l.Override)
			mv(l.FleetOverride)
			if l.Fleet != nil {
				mv(l.Fleet.Override)
			}
			for i := range l.Reports {
				l.Reports[i].At = l.Reports[i].At.Add(d)
			}
			out := files[timeline.FileName(l.At)]
			if out == nil {
				if out, err = os.OpenFile(filepath.Join(dst, timeline.FileName(l.At)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640); err != nil {
					t.Fatal(err)
				}
				files[timeline.FileName(l.At)] = out
			}
			b, _ := json.Marshal(l)
			if _, err := out.Write(append(b, '\n')); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// readLines reads every line of the timeline directory, in order.
func readLines(t *testing.T, dir string) []levels.Line {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	var out []levels.Line
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var l levels.Line
			if err := json.Unmarshal([]byte(s), &l); err != nil {
				t.Fatal(err)
			}
			out = append(out, l)
		}
	}
	return out
}
