package api

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/degraded/degraded/levels"
	"github.com/go-chi/chi/v5"
)

// Pusher takes pushed values of custom signals (PUT /v1/signals/{name}).
// Set returns an error wrapping levels.ErrUnknownSignal (404) or
// levels.ErrQueried (409), or one naming a bad value (400).
type Pusher interface {
	Set(name string, v float64, now time.Time) error
}

// signalBody is the body of PUT /v1/signals/{name}.
type signalBody struct {
	Value *float64 `json:"value"`
}

// handlePutSignal stores a pushed value and, like an outcome report, lets
// it escalate at once.
func handlePutSignal(p Pusher, reported func(levels.Report)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := chi.URLParam(r, "name")
		var b signalBody
		if err := decode(w, r, &b); err != nil {
			writeError(w, err.status, err.msg)
			return
		}
		if b.Value == nil {
			writeError(w, http.StatusBadRequest, `body must have "value", a finite number`)
			return
		}
		err := p.Set(name, *b.Value, time.Now())
		switch {
		case errors.Is(err, levels.ErrUnknownSignal):
			writeError(w, http.StatusNotFound, fmt.Sprintf("no custom signal %q is configured (signals.custom)", name))
			return
		case errors.Is(err, levels.ErrQueried):
			writeError(w, http.StatusConflict, fmt.Sprintf("signal %q is fed by a Prometheus query, not pushed", name))
			return
		case err != nil:
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		if reported != nil {
			reported(levels.Report{At: time.Now()})
		}
		w.WriteHeader(http.StatusNoContent)
	}
}
