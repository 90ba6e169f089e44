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
// threshold, every signal's threshold under the signal's Key (null where
// the signal never triggers it) and its disable list.
func levelRow(i int, l levels.Level) map[string]any {
	row := map[string]any{
		"name": l.Name, "index": i, "priority_threshold": l.PriorityThreshold,
		"disable": append([]string{}, l.Disable...),
	}
	for _, sig := range levels.AllSignals {
		row[sig.Key()] = nil
		if v, ok := l.Threshold(sig); ok {
			row[sig.Key()] = v
		}
	}
	return row
}

func handleLevels(c *controller.Controller) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		ls := c.Table().Levels()
		rows := make([]map[string]any, len(ls))
		for i, l := range ls {
			rows[i] = levelRow(i, l)
		}
		writeJSON(w, http.StatusOK, map[string]any{"levels": rows})
	}
}

func handleHistory(c *controller.Controller) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		limit := controller.HistoryLimit
		if s := r.URL.Query().Get("limit"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > controller.HistoryLimit {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("limit must be an integer 1..%d (was %q)", controller.HistoryLimit, s))
				return
			}
			limit = n
		}
		writeJSON(w, http.StatusOK, map[string][]controller.Transition{"transitions": c.History(limit)})
	}
}
