package api

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRefusedReports: a report refused for its token is counted per route,
// logged at WARN at most once per 10s per route (naming the route and the
// peer, never the token), and shown in GET /v1/level's reports without
// changing the ETag.
func TestRefusedReports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, logs := newLog()
		r := newRig(t, Deps{Logger: log})
		r.tokens.Store(&Tokens{Admin: "adm", Report: "rep"})
		start := time.Now()

		doc := decodeBody[levelDocument](t, r.do("GET", "/v1/level", ""))
		if rp := doc.Reports; rp.RefusedTotal != 0 || rp.LastRefusedAt != nil {
			t.Fatalf("reports at start %+v, want none refused and last_refused_at null", rp)
		}
		if raw := r.do("GET", "/v1/level", "").Body.String(); !strings.Contains(raw, `"reports":{"refused_total":0,"last_refused_at":null,"window_attempts":0,"window_failures":0,"would_shed":{"Major":0,"Minor":0,"Moderate":0,"unknown":0}}`) {
			t.Errorf("reports in the raw document: %s", raw)
		}

		for range 3 {
			if w := r.do("POST", "/v1/outcomes", `{"success":1}`, "Authorization", "Bearer wrong-secret"); w.Code != http.StatusUnauthorized {
				t.Fatalf("wrong report token: %d", w.Code)
			}
		}
		if n := strings.Count(logs.String(), "request refused"); n != 1 {
			t.Errorf("%d refusal log lines for 3 refusals within 10s, want 1:\n%s", n, logs)
		}
		line := logs.String()
		for _, want := range []string{"level=WARN", "route=outcomes", "remote_addr=192.0.2.1:1234", "wrong bearer token"} {
			if !strings.Contains(line, want) {
				t.Errorf("refusal log %q lacks %q", line, want)
			}
		}
		if strings.Contains(line, "wrong-secret") {
			t.Errorf("the log holds the token: %s", line)
		}

		r.do("DELETE", "/v1/override", "") // another route logs on its own
		if !strings.Contains(logs.String(), "route=override") || !strings.Contains(logs.String(), "missing bearer token") {
			t.Errorf("a refusal on another route was not logged: %s", logs)
		}

		time.Sleep(10 * time.Second)
		r.do("POST", "/v1/outcomes", `{"success":1}`)
		if n := strings.Count(logs.String(), "route=outcomes"); n != 2 {
			t.Errorf("%d outcomes refusal logs after 10s, want 2", n)
		}
		if !strings.Contains(logs.String(), "suppressed_since_last_log=2") {
			t.Errorf("the second log does not say 2 refusals went unlogged: %s", logs)
		}

		for route, want := range map[string]float64{"outcomes": 4, "override": 1, "reload": 0} {
			if got := testutil.ToFloat64(r.m.authFailures.WithLabelValues(route)); got != want {
				t.Errorf(`auth_failures_total{route=%q} = %v, want %v`, route, got, want)
			}
		}

		if w := r.do("POST", "/v1/outcomes", `{"success":90,"failure":10}`, "Authorization", "Bearer rep"); w.Code != 202 {
			t.Fatalf("outcomes with the report token: %d", w.Code)
		}
		w := r.do("GET", "/v1/level", "")
		doc = decodeBody[levelDocument](t, w)
		last := start.Add(10 * time.Second).UTC()
		if rp := doc.Reports; rp.RefusedTotal != 4 || rp.LastRefusedAt == nil || !rp.LastRefusedAt.Equal(last) || rp.WindowAttempts != 100 || rp.WindowFailures != 10 {
			t.Errorf("reports %+v (last %v), want 4 refused, the last at %v, and the live window 100/10", rp, rp.LastRefusedAt, last)
		}
		if doc.Signals.WindowAttempts != 0 {
			t.Errorf("signals.window_attempts %d: the signals are the last health check's, not live", doc.Signals.WindowAttempts)
		}
		if tag := w.Header().Get("ETag"); tag != `W/"0"` {
			t.Errorf("ETag %q after refusals and reports, want W/\"0\": reports are outside sequence coverage", tag)
		}
		if w := r.do("GET", "/v1/level", "", "If-None-Match", `W/"0"`); w.Code != http.StatusNotModified {
			t.Errorf("If-None-Match after reports changed: %d, want 304", w.Code)
		}
	})
}
