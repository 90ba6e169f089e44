package api

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/degraded/degraded/controller"
)

// etag is the weak tag of a state: it covers the level and override, which
// only change with the sequence, not the signals.
func etag(st *controller.State) string { return fmt.Sprintf(`W/"%d"`, st.Sequence) }

// handleLevel serves the state document. With ?wait=D&after=N it waits until
// the sequence passes N or D ends (at most MaxWait), then answers either way.
// A waiting long-poll takes a stream slot (503 when none is left).
func (s *server) handleLevel() http.HandlerFunc {
	c := s.Controller
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Has("wait") || q.Has("after") {
			wait, err := time.ParseDuration(q.Get("wait"))
			if err != nil || wait < 0 {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("wait must be a duration such as 30s (was %q)", q.Get("wait")))
				return
			}
			after, err := strconv.ParseUint(q.Get("after"), 10, 64)
			if err != nil {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("after must be a sequence number (was %q)", q.Get("after")))
				return
			}
			if wait > 0 && c.State().Sequence <= after {
				if !s.acquireStream() {
					refuseStream(w, s.streamLimitMessage())
					return
				}
				waitFor(r.Context(), s.shutdown, c, after, min(wait, s.MaxWait))
				s.streams.Add(-1)
			}
		}
		st := c.State()
		tag := etag(st)
		w.Header().Set("ETag", tag)
		w.Header().Set("Cache-Control", "no-cache")
		if matchesETag(r.Header.Get("If-None-Match"), tag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		s.writeLevelDocument(w, st)
	}
}

// writeLevelDocument answers the state document: st's shared encoding
// (the one its SSE event carries) with the live reports appended, so a
// poll encodes only the reports, not the whole state again. The reports
// are written as encoding/json writes the reports type.
func (s *server) writeLevelDocument(w http.ResponseWriter, st *controller.State) {
	e, err := s.encodeLevel(st)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encoding the state: "+err.Error())
		return
	}
	refused, last := s.refusals.get(routeOutcomes)
	attempts, failures := s.Outcomes.Totals(time.Now())
	b := make([]byte, 0, len(e.json)+256)
	b = append(b, e.json[:len(e.json)-1]...) // without its closing brace
	b = append(b, `,"reports":{"refused_total":`...)
	b = strconv.AppendInt(b, refused, 10)
	b = append(b, `,"last_refused_at":`...)
	if last == nil {
		b = append(b, "null"...)
	} else if b, err = last.AppendText(append(b, '"')); err != nil {
		writeError(w, http.StatusInternalServerError, "encoding the reports: "+err.Error())
		return
	} else {
		b = append(b, '"')
	}
	b = append(b, `,"window_attempts":`...)
	b = strconv.AppendInt(b, attempts, 10)
	b = append(b, `,"window_failures":`...)
	b = strconv.AppendInt(b, failures, 10)
	b = append(b, `,"would_shed":`...)
	b = append(b, s.Metrics.wouldShedJSON()...)
	b = append(b, `},"state_file":`...)
	b = appendStateFile(b, s.Controller)
	b = append(b, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b) // the client went away; nothing to do
}

// stateFile is the live "state_file" of GET /v1/level while the state
// cannot be saved: the last save's error, since when saves fail, and
// whether the published state is held (it cannot change until a save
// succeeds). The document above it is then what was last published.
type stateFile struct {
	Error        string    `json:"error"`
	FailingSince time.Time `json:"failing_since"`
	Held         bool      `json:"held"`
}

// appendStateFile appends c's state file trouble as JSON, null when the
// last save succeeded.
func appendStateFile(b []byte, c *controller.Controller) []byte {
	f := c.SaveFailure()
	if f == nil {
		return append(b, "null"...)
	}
	j, err := json.Marshal(stateFile{Error: f.Error, FailingSince: f.Since.UTC(), Held: c.Held()})
	if err != nil { // a string, a time and a bool always encode
		return append(b, "null"...)
	}
	return append(b, j...)
}

// acquireStream takes one of MaxStreams slots for a stream or long-poll;
// the caller gives it back with s.streams.Add(-1).
func (s *server) acquireStream() bool {
	if n := s.streams.Add(1); s.MaxStreams > 0 && n > int64(s.MaxStreams) {
		s.streams.Add(-1)
		return false
	}
	return true
}

func (s *server) streamLimitMessage() string {
	return fmt.Sprintf("stream limit of %d reached (SSE streams and long-polls together, max_connections - 32); retry later or poll without wait", s.MaxStreams)
}

// waitFor returns once the sequence passes after, d elapses, ctx ends or
// shutdown is closed.
func waitFor(ctx context.Context, shutdown <-chan struct{}, c *controller.Controller, after uint64, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		changed := c.LevelChanged()
		if c.State().Sequence > after {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		case <-shutdown:
			return
		}
	}
}

// matchesETag reports whether an If-None-Match header names tag, comparing
// weakly as RFC 9110 says for If-None-Match.
func matchesETag(header, tag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == strings.TrimPrefix(tag, "W/") {
			return true
		}
	}
	return false
}

// retryAfter is the whole seconds until the level could next drop, at least 1.
func retryAfter(st *controller.State, now time.Time) int {
	if st.EarliestRecoveryAt == nil {
		return 1
	}
	return max(1, int(math.Ceil(st.EarliestRecoveryAt.Sub(now).Seconds())))
}

type shedBody struct {
	Error             string `json:"error"`
	Level             string `json:"level"`
	PriorityThreshold int    `json:"priority_threshold"`
}

// handleAdmit answers a proxy's "may I serve priority N?": 204 if admitted,
// else deny_status (403, 429 or 503) with Retry-After. A priority in the
// partial band (levels.Partial) is admitted by the daemon's own uniform
// draw, one per request, as the client's Allow draws.
//
// In shadow mode everything is admitted: what enforcement would have shed,
// partial sheds included, carries X-Degraded-Would-Shed: 1 and counts in
// shadow_would_shed_total{level}.
func handleAdmit(c *controller.Controller, m *Metrics) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		for _, k := range []string{"priority", "deny_status"} {
			// A proxy that builds the query from a header would let its
			// client add a second value; which one counts is not for the
			// daemon to guess.
			if n := len(q[k]); n > 1 {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("%s must be given once (was given %d times)", k, n))
				return
			}
		}
		p, err := strconv.ParseInt(q.Get("priority"), 10, 64)
		if err != nil || p < 0 || p > math.MaxInt32 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("priority must be an integer 0..%d (was %q)", math.MaxInt32, q.Get("priority")))
			return
		}
		deny := http.StatusServiceUnavailable
		if s := q.Get("deny_status"); s != "" {
			switch s {
			case "403", "429", "503":
				deny, _ = strconv.Atoi(s)
			default:
				writeError(w, http.StatusBadRequest, fmt.Sprintf("deny_status must be 403, 429 or 503 (was %q)", s))
				return
			}
		}
		answerAdmit(w, c.State(), int(p), deny, m, drawUniform)
	}
}

// drawUniform is the draw of a request in the partial band: uniform in
// [0, 1), from math/rand/v2's per-thread generator.
func drawUniform() float64 { return rand.Float64() }

// answerAdmit answers GET /v1/admit for priority p at st, drawing from
// draw (uniform in [0, 1)) for a priority in the partial band.
func answerAdmit(w http.ResponseWriter, st *controller.State, p, deny int, m *Metrics, draw func() float64) {
	w.Header().Set("X-Degraded-Level", st.Level)
	if p >= st.PriorityThreshold || st.Partial.Admits(p, st.PriorityThreshold, draw()) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if st.Shadow {
		m.addOneShed(st.Level)
		w.Header().Set(wouldShedHeader, "1")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Retry-After", strconv.Itoa(retryAfter(st, time.Now())))
	writeJSON(w, deny, shedBody{Error: "shed", Level: st.Level, PriorityThreshold: st.PriorityThreshold})
}
