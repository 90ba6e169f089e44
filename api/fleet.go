package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/degraded/degraded/controller"
	"github.com/prometheus/client_golang/prometheus"
)

// ErrFleetUnavailable is wrapped by a FleetService error when etcd could
// not be reached within the dial timeout: the API answers 503.
var ErrFleetUnavailable = errors.New("etcd cannot be reached")

// FleetService is fleet mode as the API uses it; internal/daemon
// implements it over the fleet package and the controller.
type FleetService interface {
	// SetOverride commits a fleet override to etcd and applies it here;
	// it returns once both are done. r is already validated.
	SetOverride(ctx context.Context, r controller.OverrideRequest) error
	// ClearOverride deletes the fleet override in etcd and applies that here.
	ClearOverride(ctx context.Context) error
	// Document is the GET /v1/fleet document.
	Document() FleetDocument
	// History returns the newest limit audit entries, newest first.
	History(ctx context.Context, limit int) ([]FleetAuditEntry, error)
}

// FleetDocument is the body of GET /v1/fleet and of the fleet override
// PUT and DELETE.
type FleetDocument struct {
	Name             string                    `json:"name"`
	Instance         string                    `json:"instance"`
	Connected        bool                      `json:"connected"`
	Override         *controller.FleetOverride `json:"override"`
	Instances        []FleetInstance           `json:"instances"`
	Levels           map[string]int            `json:"levels"`
	ErrorRatePercent *float64                  `json:"error_rate_percent"`
	WindowAttempts   int64                     `json:"window_attempts"`
	WindowFailures   int64                     `json:"window_failures"`
}

// FleetInstance is one live instance in the fleet view.
type FleetInstance struct {
	Instance string    `json:"instance"`
	Level    string    `json:"level"`
	Index    int       `json:"index"`
	Source   string    `json:"source"`
	Signals  any       `json:"signals"`
	SeenAt   time.Time `json:"seen_at"`
}

// FleetAuditEntry is one fleet override change, from etcd's audit keys.
type FleetAuditEntry struct {
	Seq       int64      `json:"seq"`
	Action    string     `json:"action"`
	Level     string     `json:"level,omitempty"`
	Mode      string     `json:"mode,omitempty"`
	TTL       string     `json:"ttl,omitempty"`
	Reason    string     `json:"reason"`
	Instance  string     `json:"instance"`
	At        time.Time  `json:"at"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// FleetHistoryLimit is the most audit entries GET /v1/fleet/history
// returns (etcd keeps as many).
const FleetHistoryLimit = 1000

// handleFleetOff serves every /v1/fleet* route when fleet mode is off: 404.
func handleFleetOff() http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "fleet mode is off")
	}
}

func handleGetFleet(f FleetService) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, f.Document())
	}
}

func handleSetFleetOverride(c *controller.Controller, f FleetService) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req, ok := decodeOverride(w, r)
		if !ok {
			return
		}
		req, err := c.CheckOverride(req)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		writeFleetResult(w, f, f.SetOverride(r.Context(), req))
	}
}

func handleClearFleetOverride(f FleetService) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeFleetResult(w, f, f.ClearOverride(r.Context()))
	}
}

// writeFleetResult answers a fleet override change: 200 with the fleet
// document once etcd committed it and this instance applied it, 503 when
// etcd could not be reached (nothing changed), 500 when this instance
// could not save it.
func writeFleetResult(w http.ResponseWriter, f FleetService, err error) {
	switch {
	case errors.Is(err, ErrFleetUnavailable):
		writeError(w, http.StatusServiceUnavailable, "etcd cannot be reached: the fleet override was not changed")
	case errors.Is(err, controller.ErrNotSaved):
		writeError(w, http.StatusInternalServerError, "the fleet override is committed but this instance could not save it to its state file (see the daemon's log)")
	case err != nil:
		writeError(w, http.StatusInternalServerError, "fleet override not applied")
	default:
		writeJSON(w, http.StatusOK, f.Document())
	}
}

func handleFleetHistory(f FleetService) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		limit, ok := queryLimit(w, r, 100, FleetHistoryLimit)
		if !ok {
			return
		}
		entries, err := f.History(r.Context(), limit)
		if errors.Is(err, ErrFleetUnavailable) {
			writeError(w, http.StatusServiceUnavailable, "etcd cannot be reached: the fleet history is kept there")
			return
		}
		if err != nil {
			writeError(w, http.StatusInternalServerError, "fleet history unavailable")
			return
		}
		if entries == nil {
			entries = []FleetAuditEntry{}
		}
		writeJSON(w, http.StatusOK, map[string][]FleetAuditEntry{"entries": entries})
	}
}

// FleetStatus is what the fleet metrics read: all zero when fleet mode is
// off.
type FleetStatus struct {
	Connected bool
	Instances int
	Conflict  bool
}

// RegisterFleetMetrics registers degraded_fleet_connected,
// degraded_fleet_instances and degraded_fleet_instance_conflict on reg,
// read from status at each scrape; nil status reads 0 (fleet mode off).
func RegisterFleetMetrics(reg prometheus.Registerer, status func() FleetStatus) {
	read := func(pick func(FleetStatus) float64) func() float64 {
		return func() float64 {
			if status == nil {
				return 0
			}
			return pick(status())
		}
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "degraded", Name: "fleet_connected", Help: "1 while etcd answers (fleet mode); 0 when it cannot be reached or fleet mode is off."},
			read(func(s FleetStatus) float64 { return boolValue(s.Connected) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "degraded", Name: "fleet_instances", Help: "Live instances in the fleet view (their report leases have not expired)."},
			read(func(s FleetStatus) float64 { return float64(s.Instances) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "degraded", Name: "fleet_instance_conflict", Help: "1 when another process reports under this instance's name."},
			read(func(s FleetStatus) float64 { return boolValue(s.Conflict) })),
	)
}
