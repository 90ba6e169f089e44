package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/levels"
	"github.com/prometheus/client_golang/prometheus"
)

// TestAdmitHonoursPartialAdmission: at Major (threshold 50) admitting 40%
// of 30-49, GET /v1/admit admits 50 and up without a draw, sheds below 30,
// and admits a priority of the band when the daemon's draw for that
// request is below the fraction. In shadow mode a partial shed is a
// would-shed.
func TestAdmitHonoursPartialAdmission(t *testing.T) {
	recovery := time.Now().Add(90 * time.Second)
	st := &controller.State{Level: "Major", Index: 3, PriorityThreshold: 50, EarliestRecoveryAt: &recovery,
		Partial: &levels.Partial{From: 30, Fraction: 0.4}}
	for _, tc := range []struct {
		p      int
		draw   float64
		shadow bool
		code   int
		would  string
	}{
		{50, 0.99, false, 204, ""},
		{90, 0.99, false, 204, ""},
		{40, 0.39, false, 204, ""},
		{30, 0, false, 204, ""},
		{40, 0.4, false, 503, ""},
		{49, 0.9, false, 503, ""},
		{29, 0, false, 503, ""},
		{40, 0.4, true, 204, "1"},
		{40, 0.1, true, 204, ""},
		{10, 0, true, 204, "1"},
	} {
		m := NewMetrics(prometheus.NewRegistry(), []string{"Normal", "Minor", "Moderate", "Major"})
		s := *st
		s.Shadow = tc.shadow
		w := httptest.NewRecorder()
		draws := 0
		answerAdmit(w, &s, tc.p, http.StatusServiceUnavailable, m, func() float64 { draws++; return tc.draw })
		if w.Code != tc.code || w.Header().Get(wouldShedHeader) != tc.would || w.Header().Get("X-Degraded-Level") != "Major" {
			t.Errorf("priority %d, draw %v, shadow %v: %d would-shed %q, want %d %q", tc.p, tc.draw, tc.shadow, w.Code, w.Header().Get(wouldShedHeader), tc.code, tc.would)
		}
		if tc.code == 503 && w.Header().Get("Retry-After") != "90" {
			t.Errorf("priority %d shed with Retry-After %q, want 90", tc.p, w.Header().Get("Retry-After"))
		}
		if tc.p >= 50 && draws != 0 {
			t.Errorf("priority %d drew %d times, want no draw above the threshold", tc.p, draws)
		}
		if got := m.wouldShedJSON(); tc.would == "1" && string(got) != `{"Major":1,"Minor":0,"Moderate":0,"unknown":0}` {
			t.Errorf("would-shed counts %s, want Major 1", got)
		}
	}
}

// TestAdmitDrawsPerRequest: through the real handler, the band is
// admitted at its fraction by the daemon's own draw (100,000 requests: a
// binomial whose 10 standard deviations are 1,550).
func TestAdmitDrawsPerRequest(t *testing.T) {
	st := &controller.State{Level: "Major", PriorityThreshold: 50, Partial: &levels.Partial{From: 30, Fraction: 0.4}}
	n := 0
	const requests = 100_000
	for range requests {
		w := httptest.NewRecorder()
		answerAdmit(w, st, 40, http.StatusForbidden, nil, drawUniform)
		if w.Code == 204 {
			n++
		} else if w.Code != 403 {
			t.Fatalf("shed with %d, want deny_status 403", w.Code)
		}
	}
	if n < 40_000-1_550 || n > 40_000+1_550 {
		t.Errorf("admitted %d of %d in the band, want about 40%%", n, requests)
	}
}
