package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// fakeTimeline serves one line per call and remembers the range asked;
// its series is {"points":N}, or fail.
type fakeTimeline struct {
	off      bool
	from, to time.Time
	points   int
	fail     error
}

func (f *fakeTimeline) Enabled() bool { return !f.off }

func (f *fakeTimeline) WriteRange(_ context.Context, w io.Writer, from, to time.Time) error {
	f.from, f.to = from, to
	_, err := io.WriteString(w, `{"v":1,"at":"2026-12-01T10:00:00Z"}`+"\n")
	return err
}

func (f *fakeTimeline) WriteSeries(_ context.Context, w io.Writer, from, to time.Time, points int) error {
	f.from, f.to, f.points = from, to, points
	if f.fail != nil {
		return f.fail
	}
	_, err := fmt.Fprintf(w, `{"points":%d}`+"\n", points)
	return err
}

func TestTimeline(t *testing.T) {
	tl := &fakeTimeline{}
	r := newRig(t, Deps{Timeline: tl})
	r.tokens.Store(&Tokens{Admin: "admin-secret"})
	auth := []string{"Authorization", "Bearer admin-secret"}

	w := r.do("GET", "/v1/timeline?from=2026-12-01T10:00:00Z&to=2026-12-01T11:00:00%2B01:00", "", auth...)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/x-ndjson" || !strings.HasPrefix(w.Body.String(), `{"v":1`) {
		t.Fatalf("GET /v1/timeline = %d %s %q, want 200 application/x-ndjson lines", w.Code, w.Header().Get("Content-Type"), w.Body.String())
	}
	if want := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC); !tl.from.Equal(want) || !tl.to.Equal(want) {
		t.Errorf("range asked = %s..%s, want both ends at %s", tl.from, tl.to, want)
	}

	tests := []struct {
		name   string
		target string
		hdr    []string
		code   int
		msg    string
	}{
		{"no token", "/v1/timeline", nil, http.StatusUnauthorized, "bearer token"},
		{"the report token is not enough", "/v1/timeline", []string{"Authorization", "Bearer report"}, http.StatusUnauthorized, "bearer token"},
		{"a bad from", "/v1/timeline?from=yesterday", auth, http.StatusBadRequest, `from must be an RFC 3339 time such as 2026-12-01T10:00:00Z (was \"yesterday\")`},
		{"a bad to", "/v1/timeline?to=2026-12-01", auth, http.StatusBadRequest, `to must be an RFC 3339 time`},
		{"to before from", "/v1/timeline?from=2026-12-02T00:00:00Z&to=2026-12-01T00:00:00Z", auth, http.StatusBadRequest, "is before from"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := r.do("GET", tt.target, "", tt.hdr...)
			if w.Code != tt.code || !strings.Contains(w.Body.String(), tt.msg) {
				t.Errorf("GET %s = %d %s, want %d naming %q", tt.target, w.Code, w.Body.String(), tt.code, tt.msg)
			}
		})
	}

	tl.off = true
	if w := r.do("GET", "/v1/timeline", "", auth...); w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "recording is off") {
		t.Errorf("recording off: %d %s, want 404 saying so", w.Code, w.Body.String())
	}
	if w := newRig(t, Deps{}).do("GET", "/v1/timeline", ""); w.Code != http.StatusNotFound {
		t.Errorf("no timeline (data_dir \"\"): %d, want 404", w.Code)
	}
}

// TestTimelineSeries: with ?points= the answer is the JSON summary; to is
// clamped to now, from defaults to an hour before it, and each bad
// parameter is a 400 naming it.
func TestTimelineSeries(t *testing.T) {
	tl := &fakeTimeline{}
	r := newRig(t, Deps{Timeline: tl})
	before := time.Now()
	w := r.do("GET", "/v1/timeline?points=2000&to=2999-01-01T00:00:00Z", "")
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" || w.Body.String() != `{"points":2000}`+"\n" {
		t.Fatalf("GET /v1/timeline?points=2000 = %d %s %q, want 200 application/json", w.Code, w.Header().Get("Content-Type"), w.Body.String())
	}
	if tl.to.Before(before) || tl.to.After(time.Now()) || tl.to.Sub(tl.from) != time.Hour || tl.points != 2000 {
		t.Errorf("asked %s..%s in %d points, want to clamped to now, from an hour before, 2000 points", tl.from, tl.to, tl.points)
	}
	w = r.do("GET", "/v1/timeline?points=5000&from=2026-11-30T10:00:00Z&to=2026-11-30T16:00:00Z", "")
	if want := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC); w.Code != http.StatusOK || !tl.from.Equal(want) || tl.to.Sub(tl.from) != 6*time.Hour {
		t.Errorf("a past range: %d, asked %s..%s, want it as given", w.Code, tl.from, tl.to)
	}

	tests := []struct {
		name, target, msg string
	}{
		{"no points", "/v1/timeline?points=", `points must be an integer from 1 to 5000 (was \"\")`},
		{"zero points", "/v1/timeline?points=0", `points must be an integer from 1 to 5000 (was \"0\")`},
		{"too many points", "/v1/timeline?points=5001", `points must be an integer from 1 to 5000 (was \"5001\")`},
		{"points not a number", "/v1/timeline?points=lots", `points must be an integer`},
		{"a bad from", "/v1/timeline?points=10&from=an+hour+ago", `from must be an RFC 3339 time`},
		{"a bad to", "/v1/timeline?points=10&to=now", `to must be an RFC 3339 time`},
		{"from in the future", "/v1/timeline?points=10&from=2999-01-01T00:00:00Z", `from must not be in the future (was 2999-01-01T00:00:00Z`},
		{"to before from", "/v1/timeline?points=10&from=2026-11-30T10:00:00Z&to=2026-11-30T09:00:00Z", `to (2026-11-30T09:00:00Z) is before from (2026-11-30T10:00:00Z)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := r.do("GET", tt.target, "")
			if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), tt.msg) {
				t.Errorf("GET %s = %d %s, want 400 naming %q", tt.target, w.Code, w.Body.String(), tt.msg)
			}
		})
	}

	tl.fail = errors.New("read data/timeline/2026-11-30.jsonl: input/output error")
	if w := r.do("GET", "/v1/timeline?points=10", ""); w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), "input/output") {
		t.Errorf("a failed read: %d %s, want 500 without the internal error", w.Code, w.Body.String())
	}
}

func TestTimelineDropsCounted(t *testing.T) {
	r := newRig(t, Deps{})
	body := r.do("GET", "/metrics", "").Body.String()
	for _, reason := range []string{"full", "write_error"} {
		if want := fmt.Sprintf(`degraded_timeline_dropped_total{reason=%q} 0`, reason); !strings.Contains(body, want) {
			t.Errorf("/metrics at start lacks %s", want)
		}
	}
	r.m.TimelineDropped("write_error")
	if body := r.do("GET", "/metrics", "").Body.String(); !strings.Contains(body, `degraded_timeline_dropped_total{reason="write_error"} 1`) {
		t.Error("a dropped line is not counted")
	}
}
