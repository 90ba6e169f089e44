package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/degraded/degraded/client"
)

// statusTable is GET /v1/levels for the status tests: the default table.
const statusTable = `{"levels":[{"name":"Normal","index":0,"priority_threshold":0},` +
	`{"name":"Minor","index":1,"priority_threshold":10,"error_rate_percent":1},` +
	`{"name":"Moderate","index":2,"priority_threshold":30,"error_rate_percent":5},` +
	`{"name":"Major","index":3,"priority_threshold":50,"error_rate_percent":10},` +
	`{"name":"Severe","index":4,"priority_threshold":70,"error_rate_percent":25},` +
	`{"name":"Emergency","index":5,"priority_threshold":100,"error_rate_percent":50}]}`

// statusDocJSON is a hand-written state document: the level, its source and
// reason, and the rest of the keys as JSON ("override", "partial",
// "shadow", "fleet").
func statusDocJSON(level string, index, threshold int, source, reason, rest string) string {
	if rest != "" {
		rest = "," + rest
	}
	return fmt.Sprintf(`{"level":%q,"index":%d,"priority_threshold":%d,"source":%q,"recommended":"Moderate","reason":%q,`+
		`"since":"2026-12-01T09:00:00Z","earliest_recovery_at":null,"sequence":17,"disabled_features":[],`+
		`"override":null,"partial":null,`+
		`"signals":{"error_rate_percent":6.1,"window_attempts":1000,"window_failures":61,"status":{"cpu":"off","memory":"off","error_rate":"available"}}%s}`,
		level, index, threshold, source, reason, rest)
}

// serveState answers GET /v1/level with doc and GET /v1/levels with the
// default table, as a daemon would.
func serveState(t *testing.T, doc string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/level":
			fmt.Fprintln(w, doc)
		case "/v1/levels":
			fmt.Fprintln(w, statusTable)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// oneSpace collapses runs of spaces, so that wants do not depend on the
// table's column widths.
func oneSpace(s string) string { return regexp.MustCompile(` +`).ReplaceAllString(s, " ") }

// TestStatusForEverySourceAndMode: status names what decides the level and
// what is shed, for each source (auto, a local override, the fleet
// override) and mode (enforce, shadow), from state documents as a daemon
// sends them: who set each override and when it ends, a fleet override
// as a fleet override (never "Override none" alone), the graduated
// admission's band with the share it sheds, and in shadow mode what would
// be shed, never a claim that anything is.
func TestStatusForEverySourceAndMode(t *testing.T) {
	exp := time.Now().Add(15 * time.Minute).UTC().Format(time.RFC3339)
	expStamp := exp[:len("2006-01-02T15:04:05")] + "Z"
	override := func(mode, level, actor, reason string) string {
		return fmt.Sprintf(`{"level":%q,"mode":%q,"reason":%q,"set_at":"2026-12-01T09:00:00Z","expires_at":%q,"actor":%q}`, level, mode, reason, exp, actor)
	}
	tests := []struct {
		name           string
		doc            string
		want, unwanted []string
	}{
		{"auto at Normal", statusDocJSON("Normal", 0, 0, "auto", "started", ""),
			[]string{"Level Normal (0 of 5): nothing shed", "Source auto (recommended: Moderate)", "Override none"},
			[]string{"Fleet", "SHADOW", "sheds"}},
		{"auto, the whole band below", statusDocJSON("Moderate", 2, 30, "auto", "error_rate 6.10% > 5% (Moderate)", ""),
			[]string{"Level Moderate (2 of 5): sheds priority below 30", "Reason error_rate 6.10% > 5% (Moderate)"},
			[]string{"% of"}},
		{"auto, graduated admission", statusDocJSON("Major", 3, 50, "auto", "error_rate 12.00% > 10% (Major)", `"partial":{"from":30,"fraction":0.23}`),
			[]string{"Level Major (3 of 5): sheds priority below 30, and 77% of 30-49"},
			[]string{"below 50"}},
		{"auto, graduated admission of the first band", statusDocJSON("Minor", 1, 10, "auto", "error_rate 2.00% > 1% (Minor)", `"partial":{"from":0,"fraction":0.999}`),
			[]string{"Level Minor (1 of 5): sheds <1% of priority 0-9"},
			[]string{"below 0"}},
		{"a local pin", statusDocJSON("Major", 3, 50, "override", "override set: pin Major for 15m0s: INC-42", `"override":`+override("pin", "Major", "alice", "INC-42")),
			[]string{"Source override", "Override pin Major until " + expStamp + " (in ", "), set by alice: INC-42"},
			[]string{"Override none", "Fleet"}},
		{"a local floor below the automatic level", statusDocJSON("Severe", 4, 70, "auto", "error_rate 30.00% > 25% (Severe)", `"override":`+override("floor", "Minor", "admin", "INC-43")),
			[]string{"Level Severe (4 of 5): sheds priority below 70", "Source auto", "Override floor Minor until " + expStamp, ", set by admin: INC-43"},
			nil},
		{"the fleet override decides", statusDocJSON("Major", 3, 50, "fleet", "fleet override set: pin Major for 15m0s: INC-7",
			`"fleet":{"name":"shop","instance":"web-1","connected":true,"override":`+strings.TrimSuffix(override("pin", "Major", "bob", "INC-7"), "}")+`,"mod_revision":42}}`),
			[]string{"Source fleet", "Override none", "Fleet shop, instance web-1, connected to etcd",
				"Fleet override pin Major until " + expStamp + " (in ", "), set by bob: INC-7"},
			[]string{"Fleet override none"}},
		{"fleet mode, etcd unreachable, no fleet override", statusDocJSON("Normal", 0, 0, "auto", "started", `"fleet":{"name":"shop","instance":"web-1","connected":false,"override":null}`),
			[]string{"Fleet shop, instance web-1, etcd unreachable", "Fleet override none"},
			nil},
		{"shadow", statusDocJSON("Moderate", 2, 30, "auto", "error_rate 6.10% > 5% (Moderate)", `"shadow":true`),
			[]string{"Level Moderate (2 of 5): would shed priority below 30 (shadow mode)", "Mode SHADOW: nothing is shed"},
			[]string{"sheds", "priority < 30 shed"}},
		{"shadow, graduated admission", statusDocJSON("Major", 3, 50, "auto", "error_rate 12.00% > 10% (Major)", `"shadow":true,"partial":{"from":30,"fraction":0.5}`),
			[]string{"would shed priority below 30, and 50% of 30-49 (shadow mode)", "Mode SHADOW: nothing is shed"},
			[]string{"sheds"}},
		{"the state file cannot be saved, and the state is held", statusDocJSON("Major", 3, 50, "auto", "error_rate 12.00% > 10% (Major)", `"state_file":{"error":"write state: no space left on device","failing_since":"2026-12-01T09:00:00Z","held":true}`),
			[]string{"State file NOT SAVED since 2026-12-01T09:00:00Z (", "ago): write state: no space left on device; HELD: nothing in this document can change"},
			[]string{"a restart goes back"}},
		{"the state file cannot be saved, not held yet", statusDocJSON("Major", 3, 50, "auto", "error_rate 12.00% > 10% (Major)", `"state_file":{"error":"write state: no space left on device","failing_since":"2026-12-01T09:00:00Z","held":false}`),
			[]string{"State file NOT SAVED since 2026-12-01T09:00:00Z (", "no space left on device; a restart goes back to the state last saved"},
			[]string{"HELD"}},
		{"shadow under a pin", statusDocJSON("Major", 3, 50, "override", "override set: pin Major for 15m0s: INC-9",
			`"shadow":true,"override":`+override("pin", "Major", "carol", "INC-9")),
			[]string{"would shed priority below 50 (shadow mode)", "set by carol: INC-9", "Mode SHADOW: nothing is shed"},
			[]string{"sheds"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, nil, "status", "--addr", serveState(t, tt.doc))
			if code != 0 {
				t.Fatalf("status: exit %d: %s", code, errOut)
			}
			got := oneSpace(out)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("status lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tt.unwanted {
				if strings.Contains(got, w) {
					t.Errorf("status says %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestShedText(t *testing.T) {
	for _, tt := range []struct {
		st   client.State
		want string
	}{
		{client.State{}, "nothing shed"},
		{client.State{PriorityThreshold: 50}, "sheds priority below 50"},
		{client.State{PriorityThreshold: 50, Partial: &client.Partial{From: 30, Fraction: 0.23}}, "sheds priority below 30, and 77% of 30-49"},
		{client.State{PriorityThreshold: 50, Partial: &client.Partial{From: 30, Fraction: 0.001}}, "sheds priority below 30, and >99% of 30-49"},
		{client.State{PriorityThreshold: 10, Partial: &client.Partial{From: 0, Fraction: 0.6}}, "sheds 40% of priority 0-9"},
		{client.State{PriorityThreshold: 50, Shadow: true}, "would shed priority below 50 (shadow mode)"},
	} {
		if got := shedText(tt.st); got != tt.want {
			t.Errorf("shedText(%+v) = %q, want %q", tt.st, got, tt.want)
		}
	}
}
