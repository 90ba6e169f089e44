package api

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// routes is the one place every endpoint is registered.
func (s *server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(s.browserSafety)
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", allowed(r, req.URL.Path))
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
	})

	r.Get("/", handleDashboard())
	r.Get("/healthz", handleHealthz())
	r.Get("/readyz", handleReadyz(s.Controller))
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.Gatherer, promhttp.HandlerOpts{}))

	r.Get("/v1/level", s.handleLevel())
	r.Get("/v1/level/stream", s.handleStream())
	r.Get("/v1/admit", handleAdmit(s.Controller, s.Metrics))
	r.Get("/v1/levels", handleLevels(s.Controller))
	r.Get("/v1/history", handleHistory(s.Controller))
	r.Get("/v1/samples", handleSamples(s.Controller))
	r.With(s.requireToken(reportToken, routeOutcomes)).Post("/v1/outcomes", handleOutcomes(s.Outcomes, s.Metrics, s.Reported))
	if s.Pusher != nil {
		r.With(s.requireToken(reportToken, routeSignals)).Put("/v1/signals/{name}", handlePutSignal(s.Pusher, s.Reported))
	}

	r.Get("/v1/override", handleGetOverride(s.Controller))
	r.With(s.requireToken(adminToken, routeOverride)).Put("/v1/override", handleSetOverride(s.Controller))
	r.With(s.requireToken(adminToken, routeOverride)).Delete("/v1/override", handleClearOverride(s.Controller))
	if s.Timeline != nil {
		r.With(s.requireToken(adminToken, routeTimeline)).Get("/v1/timeline", handleTimeline(s.Timeline, s.Logger))
	}
	if s.Fleet == nil {
		r.HandleFunc("/v1/fleet", handleFleetOff())
		r.HandleFunc("/v1/fleet/*", handleFleetOff())
	} else {
		r.Get("/v1/fleet", handleGetFleet(s.Fleet))
		r.Get("/v1/fleet/history", handleFleetHistory(s.Fleet))
		r.With(s.requireToken(adminToken, routeFleetOverride)).Put("/v1/fleet/override", handleSetFleetOverride(s.Controller, s.Fleet))
		r.With(s.requireToken(adminToken, routeFleetOverride)).Delete("/v1/fleet/override", handleClearFleetOverride(s.Fleet))
	}
	if s.Reload != nil {
		r.With(s.requireToken(adminToken, routeReload)).Post("/-/reload", handleReload(s.Reload, s.Controller.Held, s.Logger))
	}
	return r
}

// allowed lists the methods routed for path, for a 405's Allow header
// (chi drops it when the handler is replaced).
func allowed(r chi.Routes, path string) string {
	var ms []string
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete} {
		if r.Match(chi.NewRouteContext(), m, path) {
			ms = append(ms, m)
		}
	}
	return strings.Join(ms, ", ")
}
