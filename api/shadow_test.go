package api

import (
	"strings"
	"testing"
	"time"

	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/levels"
	"github.com/google/go-cmp/cmp"
)

// shadowRig is a rig whose controller runs in shadow mode, pinned at Major
// (priority threshold 50).
func shadowRig(t *testing.T) *rig {
	t.Helper()
	r := newRig(t, Deps{})
	if err := r.c.Reconfigure(controller.Options{Table: testTable(t), Errors: r.win, Rules: levels.Rules{MinimumLevelDuration: time.Minute, Hysteresis: 0.1, Shadow: true}}, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.SetOverride(controller.OverrideRequest{Level: "Major", Mode: controller.ModePin, TTL: time.Hour, Reason: "INC-7"}); err != nil {
		t.Fatal(err)
	}
	return r
}

// wouldShed reads the would-shed counts of GET /v1/level's reports.
func wouldShed(t *testing.T, r *rig) map[string]int64 {
	t.Helper()
	doc := decodeBody[struct {
		Shadow  bool `json:"shadow"`
		Reports struct {
			WouldShed map[string]int64 `json:"would_shed"`
		} `json:"reports"`
	}](t, r.do("GET", "/v1/level", ""))
	if !doc.Shadow {
		t.Errorf("GET /v1/level: shadow false, want true")
	}
	return doc.Reports.WouldShed
}

// TestAdmitInShadowMode: everything is admitted; what enforcement would
// have shed carries X-Degraded-Would-Shed: 1 and is counted.
func TestAdmitInShadowMode(t *testing.T) {
	r := shadowRig(t)
	for _, tt := range []struct {
		query string
		would string
	}{
		{"priority=50", ""},
		{"priority=49", "1"},
		{"priority=0&deny_status=403", "1"},
	} {
		w := r.do("GET", "/v1/admit?"+tt.query, "")
		if w.Code != 204 || w.Header().Get("X-Degraded-Would-Shed") != tt.would || w.Header().Get("X-Degraded-Level") != "Major" {
			t.Errorf("%s: %d would-shed %q level %q, want 204 would-shed %q at Major", tt.query, w.Code, w.Header().Get("X-Degraded-Would-Shed"), w.Header().Get("X-Degraded-Level"), tt.would)
		}
	}
	if !strings.Contains(r.do("GET", "/metrics", "").Body.String(), `degraded_shadow_would_shed_total{level="Major"} 2`) {
		t.Errorf("/metrics: want degraded_shadow_would_shed_total{level=\"Major\"} 2")
	}
	if d := cmp.Diff(map[string]int64{"Minor": 0, "Moderate": 0, "Major": 2, "unknown": 0}, wouldShed(t, r)); d != "" {
		t.Errorf("reports.would_shed (-want +got):\n%s", d)
	}

	// Back to enforce: the same request is shed.
	if err := r.c.Reconfigure(controller.Options{Table: testTable(t), Errors: r.win, Rules: levels.Rules{MinimumLevelDuration: time.Minute, Hysteresis: 0.1}}, "alice"); err != nil {
		t.Fatal(err)
	}
	if w := r.do("GET", "/v1/admit?priority=49", ""); w.Code != 503 || w.Header().Get("X-Degraded-Would-Shed") != "" {
		t.Errorf("enforcing: %d would-shed %q, want 503 without the header", w.Code, w.Header().Get("X-Degraded-Would-Shed"))
	}
}

// TestWouldShedReports: POST /v1/outcomes adds "would_shed" counts by level
// name, in either mode; names the table lacks count as unknown, and a bad
// count is refused naming it.
func TestWouldShedReports(t *testing.T) {
	r := newRig(t, Deps{}) // enforcing
	if w := r.do("POST", "/v1/outcomes", `{"success":10,"would_shed":{"Major":12,"Minor":3,"Gone":4,"Normal":1}}`); w.Code != 202 {
		t.Fatalf("report with would_shed: %d %s, want 202", w.Code, w.Body)
	}
	if w := r.do("POST", "/v1/outcomes", `{"would_shed":{"Major":1}}`); w.Code != 202 {
		t.Fatalf("report of would_shed alone: %d %s, want 202", w.Code, w.Body)
	}
	body := r.do("GET", "/metrics", "").Body.String()
	for _, want := range []string{
		`degraded_shadow_would_shed_total{level="Major"} 13`,
		`degraded_shadow_would_shed_total{level="Minor"} 3`,
		`degraded_shadow_would_shed_total{level="Moderate"} 0`,
		`degraded_shadow_would_shed_total{level="unknown"} 5`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, `level="Gone"`) || strings.Contains(body, `shadow_would_shed_total{level="Normal"}`) {
		t.Errorf("/metrics has a would-shed series for a name outside the table or for Normal")
	}

	for _, tt := range []struct{ body, msg string }{
		{`{"success":1,"would_shed":{"Major":-1}}`, `would_shed.Major must be an integer 0..1000000000 (was -1)`},
		{`{"success":1,"would_shed":{"Major":1000000001}}`, `would_shed.Major must be an integer 0..1000000000 (was 1000000001)`},
		{`{"success":1,"would_shed":{"Major":1.5}}`, `would_shed`},
		{`{"success":1,"would_shed":[1]}`, `would_shed`},
	} {
		w := r.do("POST", "/v1/outcomes", tt.body)
		if w.Code != 400 || !strings.Contains(w.Body.String(), tt.msg) {
			t.Errorf("%s: %d %s, want 400 naming %s", tt.body, w.Code, w.Body, tt.msg)
		}
	}
	if w := r.do("GET", "/metrics", ""); !strings.Contains(w.Body.String(), `degraded_shadow_would_shed_total{level="Major"} 13`) {
		t.Errorf("a refused report was counted")
	}
}

// TestWouldShedFollowsLevelRenames: a reload renaming levels exports the
// new names at 0 and drops the old ones, as level_info does.
func TestWouldShedFollowsLevelRenames(t *testing.T) {
	r := newRig(t, Deps{})
	r.do("POST", "/v1/outcomes", `{"would_shed":{"Major":2,"Minor":1}}`)
	r.m.SetLevelNames([]string{"Normal", "Minor", "Critical"})
	body := r.do("GET", "/metrics", "").Body.String()
	for _, want := range []string{
		`degraded_shadow_would_shed_total{level="Minor"} 1`,
		`degraded_shadow_would_shed_total{level="Critical"} 0`,
		`degraded_shadow_would_shed_total{level="unknown"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics after the rename lacks %q", want)
		}
	}
	if strings.Contains(body, `shadow_would_shed_total{level="Major"}`) || strings.Contains(body, `shadow_would_shed_total{level="Moderate"}`) {
		t.Errorf("/metrics after the rename still has a removed level's series")
	}
}
