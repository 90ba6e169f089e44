package api

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/degraded/degraded/controller"
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

type levelRow struct {
	Name              string   `json:"name"`
	Index             int      `json:"index"`
	PriorityThreshold int      `json:"priority_threshold"`
	ErrorRatePercent  *float64 `json:"error_rate_percent"`
	CPUPercent        *float64 `json:"cpu_percent"`
	MemoryPercent     *float64 `json:"memory_percent"`
	Disable           []string `json:"disable"`
}

func handleLevels(c *controller.Controller) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		ls := c.Table().Levels()
		rows := make([]levelRow, len(ls))
		for i, l := range ls {
			rows[i] = levelRow{
				Name: l.Name, Index: i, PriorityThreshold: l.PriorityThreshold,
				ErrorRatePercent: l.ErrorRatePercent, CPUPercent: l.CPUPercent, MemoryPercent: l.MemoryPercent,
				Disable: append([]string{}, l.Disable...),
			}
		}
		writeJSON(w, http.StatusOK, map[string][]levelRow{"levels": rows})
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
