package api

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/levels"
)

func handleHealthz() http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}
}

// handleReadyz is ready once the state is loaded and the first health
// check has run.
func handleReadyz(c *controller.Controller) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if !c.Ready() {
			writeError(w, http.StatusServiceUnavailable, "first health check has not run yet")
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	}
}

// levelRow is one level of GET /v1/levels: its name, index, priority
// threshold, every built-in signal's threshold under the signal's Key
// (null where the signal never triggers it), the custom signals'
// thresholds under "custom" (null likewise) and its disable list.
func levelRow(t *levels.Table, i int, l levels.Level) map[string]any {
	custom := map[string]any{}
	row := map[string]any{
		"name": l.Name, "index": i, "priority_threshold": l.PriorityThreshold,
		"disable": append([]string{}, l.Disable...), "custom": custom,
	}
	for _, sig := range t.Signals() {
		var v any
		if th, ok := l.Threshold(sig); ok {
			v = th
		}
		if t.Custom(sig) {
			custom[sig.Key()] = v
		} else {
			row[sig.Key()] = v
		}
	}
	return row
}

func handleLevels(c *controller.Controller) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		t := c.Table()
		ls := t.Levels()
		rows := make([]map[string]any, len(ls))
		for i, l := range ls {
			rows[i] = levelRow(t, i, l)
		}
		writeJSON(w, http.StatusOK, map[string]any{"levels": rows})
	}
}

func handleHistory(c *controller.Controller) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		limit, ok := queryLimit(w, r, controller.HistoryLimit, controller.HistoryLimit)
		if !ok {
			return
		}
		writeJSON(w, http.StatusOK, map[string][]controller.Transition{"transitions": c.History(limit)})
	}
}

// queryLimit reads ?limit=N, an integer 1..most, and is def without one.
// A limit out of range or not an integer is answered 400 here, and ok is
// false.
func queryLimit(w http.ResponseWriter, r *http.Request, def, most int) (limit int, ok bool) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > most {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("limit must be an integer 1..%d (was %q)", most, s))
		return 0, false
	}
	return n, true
}
