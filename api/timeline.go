package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// Timeline is the recorded timeline GET /v1/timeline serves
// (internal/timeline's Recorder).
type Timeline interface {
	// Enabled reports whether recording is on; when off the route is 404.
	Enabled() bool
	// WriteRange writes the lines whose "at" is within [from, to] (a zero
	// end is open) to w, one JSON object per line, oldest file first.
	WriteRange(ctx context.Context, w io.Writer, from, to time.Time) error
	// WriteSeries writes the History view's summary of [from, to] in at
	// most points buckets to w, one JSON document (openapi.yaml's
	// TimelineSeries). It writes nothing before the summary is complete:
	// an error with nothing written is the handler's to answer.
	WriteSeries(ctx context.Context, w io.Writer, from, to time.Time, points int) error
}

// maxSeriesPoints bounds ?points= (internal/timeline.MaxPoints).
const maxSeriesPoints = 5000

// defaultSeriesSpan is the range a series covers without ?from=.
const defaultSeriesSpan = time.Hour

// timelineDropReasons are the reasons of timeline_dropped_total, exported
// at 0 from the start (internal/timeline's DropReasons).
var timelineDropReasons = []string{"full", "write_error", "budget", "disk_full"}

// TimelineDropped counts a timeline line that was not recorded.
func (m *Metrics) TimelineDropped(reason string) {
	if m != nil {
		m.timelineDropped.WithLabelValues(reason).Inc()
	}
}

// handleTimeline serves ?from=&to= (RFC 3339, both optional): the recorded
// lines as application/x-ndjson, or with ?points=N (1..5000) their summary
// as JSON for the History view, to clamped to now and from defaulting to
// an hour before to. Summaries are computed one at a time: each reads
// every line of its range, and the daemon shares its host with the
// service it measures.
func handleTimeline(tl Timeline, log *slog.Logger) http.HandlerFunc {
	one := make(chan struct{}, 1)
	return func(w http.ResponseWriter, r *http.Request) {
		if !tl.Enabled() {
			writeError(w, http.StatusNotFound, "recording is off (record.enabled: false)")
			return
		}
		q := r.URL.Query()
		var bounds [2]time.Time
		for i, key := range []string{"from", "to"} {
			s := q.Get(key)
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
		points := 0
		if s, ok := q["points"]; ok {
			n, err := strconv.Atoi(s[0])
			if err != nil || n < 1 || n > maxSeriesPoints {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("points must be an integer from 1 to %d (was %q)", maxSeriesPoints, s[0]))
				return
			}
			points = n
			now := time.Now()
			if bounds[0].After(now) {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("from must not be in the future (was %s, now is %s)", bounds[0].Format(time.RFC3339), now.UTC().Format(time.RFC3339)))
				return
			}
			if bounds[1].IsZero() || bounds[1].After(now) {
				bounds[1] = now
			}
			if bounds[0].IsZero() {
				bounds[0] = bounds[1].Add(-defaultSeriesSpan)
			}
		}
		if from, to := bounds[0], bounds[1]; !from.IsZero() && !to.IsZero() && to.Before(from) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("to (%s) is before from (%s)", to.Format(time.RFC3339), from.Format(time.RFC3339)))
			return
		}
		if points == 0 {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
			// The status is sent: a failure now can only cut the stream short.
			_ = tl.WriteRange(r.Context(), w, bounds[0], bounds[1])
			return
		}
		select {
		case one <- struct{}{}:
			defer func() { <-one }()
		case <-r.Context().Done():
			return
		}
		lw := &lazyJSON{w: w}
		err := tl.WriteSeries(r.Context(), lw, bounds[0], bounds[1], points)
		switch {
		case err == nil || lw.sent:
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		default:
			log.Error("timeline: cannot summarize", "from", bounds[0], "to", bounds[1], "err", err)
			writeError(w, http.StatusInternalServerError, "the timeline could not be read (the daemon's log says why)")
		}
	}
}

// lazyJSON sends the 200 and its headers with the first byte of the body,
// so that a series that fails before writing can still answer an error.
type lazyJSON struct {
	w    http.ResponseWriter
	sent bool
}

func (l *lazyJSON) Write(b []byte) (int, error) {
	if !l.sent {
		l.sent = true
		h := l.w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		l.w.WriteHeader(http.StatusOK)
	}
	return l.w.Write(b)
}
