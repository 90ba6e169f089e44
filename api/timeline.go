package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Timeline is the recorded timeline GET /v1/timeline streams
// (internal/timeline's Recorder).
type Timeline interface {
	// Enabled reports whether recording is on; when off the route is 404.
	Enabled() bool
	// WriteRange writes the lines whose "at" is within [from, to] (a zero
	// end is open) to w, one JSON object per line, oldest file first.
	WriteRange(ctx context.Context, w io.Writer, from, to time.Time) error
}

// timelineDropReasons are the reasons of timeline_dropped_total, exported
// at 0 from the start (internal/timeline's DropReasons).
var timelineDropReasons = []string{"full", "write_error", "budget", "disk_full"}

// TimelineDropped counts a timeline line that was not recorded.
func (m *Metrics) TimelineDropped(reason string) {
	if m != nil {
		m.timelineDropped.WithLabelValues(reason).Inc()
	}
}

// handleTimeline streams the recorded lines of ?from=&to= (RFC 3339, both
// optional) as application/x-ndjson.
func handleTimeline(tl Timeline) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !tl.Enabled() {
			writeError(w, http.StatusNotFound, "recording is off (record.enabled: false)")
			return
		}
		var bounds [2]time.Time
		for i, key := range []string{"from", "to"} {
			s := r.URL.Query().Get(key)
			if s == "" {
				continue
			}
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("%s must be an RFC 3339 time such as 2026-12-01T10:00:00Z (was %q)", key, s))
				return
			}
			bounds[i] = t
		}
		if from, to := bounds[0], bounds[1]; !from.IsZero() && !to.IsZero() && to.Before(from) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("to (%s) is before from (%s)", to.Format(time.RFC3339), from.Format(time.RFC3339)))
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		// The status is sent: a failure now can only cut the stream short.
		_ = tl.WriteRange(r.Context(), w, bounds[0], bounds[1])
	}
}
