package api

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/errwindow"
	"github.com/degraded/degraded/levels"
)

// maxCount bounds each count of an outcome report.
const maxCount = 1_000_000_000

// numLatencyCounts is how many counts "latency_counts" holds: one per
// bound of levels.LatencyBounds.
const numLatencyCounts = errwindow.NumLatencyBuckets

// latencyRecorder is an Outcomes that also keeps the reports' latency
// counts (*errwindow.Window); without it, reports are accepted and their
// latencies ignored.
type latencyRecorder interface {
	RecordLatency(now time.Time, success, failure int64, latency [numLatencyCounts]int64)
}

type outcomesBody struct {
	Success       *int64  `json:"success"`
	Failure       *int64  `json:"failure"`
	LatencyCounts []int64 `json:"latency_counts"`
	// WouldShed counts, by level name, requests a client in shadow mode
	// admitted that enforcement would have shed.
	WouldShed map[string]int64 `json:"would_shed"`
	// Admission is the client's account of its admission decisions
	// (admission.go); nil from a client that does not send it.
	Admission *admissionBody `json:"admission"`
}

// latency checks "latency_counts" against the outcomes it describes:
// exactly numLatencyCounts counts, each 0..maxCount, summing to at most
// success+failure. It returns the counts, or the sentence naming what is
// wrong.
func (b *outcomesBody) latency(success, failure int64) (counts [numLatencyCounts]int64, msg string) {
	if len(b.LatencyCounts) != numLatencyCounts {
		return counts, fmt.Sprintf("latency_counts must have %d counts (was %d)", numLatencyCounts, len(b.LatencyCounts))
	}
	var sum int64
	for i, c := range b.LatencyCounts {
		if c < 0 || c > maxCount {
			return counts, fmt.Sprintf("latency_counts[%d] must be an integer 0..%d (was %d)", i, maxCount, c)
		}
		counts[i] = c
		sum += c
	}
	if sum > success+failure {
		return counts, fmt.Sprintf("latency_counts sum %d exceeds success+failure %d", sum, success+failure)
	}
	return counts, ""
}

func handleOutcomes(o Outcomes, m *Metrics, reported func(levels.Report)) http.HandlerFunc {
	lr, keepsLatency := o.(latencyRecorder)
	return func(w http.ResponseWriter, r *http.Request) {
		var b outcomesBody
		if err := decode(w, r, &b); err != nil {
			writeError(w, err.status, err.msg)
			return
		}
		if b.Success == nil && b.Failure == nil && b.WouldShed == nil && b.Admission == nil {
			writeError(w, http.StatusBadRequest, `body must have "success" and/or "failure"`)
			return
		}
		s, f := deref(b.Success), deref(b.Failure)
		for _, c := range []struct {
			name string
			v    int64
		}{{"success", s}, {"failure", f}} {
			if c.v < 0 || c.v > maxCount {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("%s must be an integer 0..%d (was %d)", c.name, maxCount, c.v))
				return
			}
		}
		if msg := checkWouldShed(b.WouldShed); msg != "" {
			writeError(w, http.StatusBadRequest, msg)
			return
		}
		var adm *levels.Admission
		if b.Admission != nil {
			var msg string
			if adm, msg = b.Admission.admission(); msg != "" {
				writeError(w, http.StatusBadRequest, msg)
				return
			}
		}
		withLatency := b.LatencyCounts != nil
		var latency [numLatencyCounts]int64
		if withLatency {
			var msg string
			if latency, msg = b.latency(s, f); msg != "" {
				writeError(w, http.StatusBadRequest, msg)
				return
			}
		}
		now := time.Now()
		if withLatency && keepsLatency {
			lr.RecordLatency(now, s, f, latency)
		} else {
			o.Record(now, s, f)
		}
		m.outcomes(s, f)
		m.addWouldShed(b.WouldShed)
		if reported != nil && (f > 0 || withLatency && s+f > 0 || adm != nil) {
			// A burst of failures or slow requests may escalate at once, and
			// the admission law reads every account of admission.
			rep := levels.Report{At: now, Success: s, Failure: f, Admission: adm}
			if withLatency {
				rep.Latency = latency[:]
			}
			reported(rep)
		}
		writeAccepted(w, s+f)
	}
}

// writeAccepted answers an outcome report with how many outcomes it
// counted: {"accepted":n}, written directly, since every report gets it.
func writeAccepted(w http.ResponseWriter, n int64) {
	b := make([]byte, 0, 32)
	b = append(b, `{"accepted":`...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write(b) // the client went away; nothing to do
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

type overrideBody struct {
	Level  string `json:"level"`
	Mode   string `json:"mode"`
	TTL    string `json:"ttl"`
	Reason string `json:"reason"`
}

// decodeOverride reads the body of PUT /v1/override and PUT
// /v1/fleet/override (mode defaults to pin) or answers 400/413/415 itself.
func decodeOverride(w http.ResponseWriter, r *http.Request) (controller.OverrideRequest, bool) {
	var b overrideBody
	if err := decode(w, r, &b); err != nil {
		writeError(w, err.status, err.msg)
		return controller.OverrideRequest{}, false
	}
	if b.Mode == "" {
		b.Mode = string(controller.ModePin)
	}
	ttl, err := time.ParseDuration(b.TTL)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("ttl must be a duration such as 15m (was %q)", b.TTL))
		return controller.OverrideRequest{}, false
	}
	return controller.OverrideRequest{Level: b.Level, Mode: controller.Mode(b.Mode), TTL: ttl, Reason: b.Reason, Actor: actorOf(r)}, true
}

func handleGetOverride(c *controller.Controller) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]*controller.Override{"override": c.State().Override})
	}
}

func handleSetOverride(c *controller.Controller) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req, ok := decodeOverride(w, r)
		if !ok {
			return
		}
		st, err := c.SetOverride(req)
		if errors.Is(err, controller.ErrInvalidOverride) {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		writeOverrideResult(w, st, err)
	}
}

func handleClearOverride(c *controller.Controller) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		st, err := c.ClearOverride(actorOf(r))
		writeOverrideResult(w, st, err)
	}
}

// writeOverrideResult answers an override change: 200 with the state, or
// 503 when the state file could not be written, in which case nothing
// changed: an override is in force only once it is durable.
func writeOverrideResult(w http.ResponseWriter, st *controller.State, err error) {
	switch {
	case errors.Is(err, controller.ErrNotSaved):
		writeError(w, http.StatusServiceUnavailable, "the state file could not be written, so the change was not applied; retry once the disk is fixed (see the daemon's log)")
	case err != nil:
		writeError(w, http.StatusInternalServerError, "override not applied")
	default:
		writeJSON(w, http.StatusOK, st)
	}
}

// handleReload re-reads the configuration; an invalid one is refused with
// every problem and the old one stays in force. A reload whose change of
// the state is held (held: the state file cannot be saved, so nothing new
// is published until a save succeeds) says so beside its "reloaded": an
// operator reading the old level back would otherwise take the reload for
// one that did nothing.
func handleReload(reload func(actor string) error, held func() bool, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := reload(actorOf(r)); err != nil {
			log.Error("reload refused", "err", err)
			writeError(w, http.StatusBadRequest, "config not reloaded: "+err.Error())
			return
		}
		body := map[string]string{"status": "reloaded"}
		if held() {
			body["held"] = heldNote
		}
		writeJSON(w, http.StatusOK, body)
	}
}

// heldNote is what a reload answers while the state is held.
const heldNote = "the state file cannot be saved: the published state, and any change this reload makes to it, are held until a save succeeds"
