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

// ErrFleetAuth is wrapped, beside ErrFleetUnavailable, when etcd refused
// the daemon's credentials: the 503 says so.
var ErrFleetAuth = errors.New("etcd refused the credentials")

// ErrFleetTLS is wrapped, beside ErrFleetUnavailable, when the TLS
// handshake with etcd failed: the 503 says so.
var ErrFleetTLS = errors.New("TLS handshake with etcd failed")

// ErrFleetTooLarge is wrapped, beside ErrFleetUnavailable, when etcd's
// answer was over the fleet's size limit (keys written by hand under its
// prefix): the 503 says so.
var ErrFleetTooLarge = errors.New("etcd's answer is over the size limit")

// FleetService is fleet mode as the API uses it; internal/daemon
// implements it over the fleet package and the controller.
type FleetService interface {
	// SetOverride commits a fleet override to etcd and applies it here;
	// it returns once both are done. r is already validated.
	SetOverride(ctx context.Context, r controller.OverrideRequest) error
	// ClearOverride deletes the fleet override in etcd, with an audit
	// entry naming actor, and applies that here.
	ClearOverride(ctx context.Context, actor string) error
	// Document is the GET /v1/fleet document, listing at most limit
	// instances; it never fails (etcd down: the last view seen).
	Document(ctx context.Context, limit int) FleetDocument
	// History returns the newest limit audit entries, newest first.
	History(ctx context.Context, limit int) ([]FleetAuditEntry, error)
}

// FleetDocument is the body of GET /v1/fleet and of the fleet override
// PUT and DELETE. Levels and the window counts are the aggregate's.
type FleetDocument struct {
	Name      string                    `json:"name"`
	Instance  string                    `json:"instance"`
	Connected bool                      `json:"connected"`
	Override  *controller.FleetOverride `json:"override"`
	// OverrideRefused is the fleet override etcd holds that this
	// instance refused, and why; null when it follows etcd's.
	OverrideRefused *FleetRefusal    `json:"override_refused"`
	Aggregator      *FleetAggregator `json:"aggregator"`
	Instances       []FleetInstance  `json:"instances"`
	// InstancesTotal is how many instance reports etcd holds, listed or
	// not (the list stops at ?limit).
	InstancesTotal   int64          `json:"instances_total"`
	Levels           map[string]int `json:"levels"`
	ErrorRatePercent *float64       `json:"error_rate_percent"`
	WindowAttempts   int64          `json:"window_attempts"`
	WindowFailures   int64          `json:"window_failures"`
}

// FleetAggregator is the instance that wrote the aggregate, its term and
// when; Stale when this instance received it more than instance_ttl +
// one tick ago (the fleet error rate is then the local one).
type FleetAggregator struct {
	Instance string    `json:"instance"`
	Term     int64     `json:"term"`
	At       time.Time `json:"at"`
	Stale    bool      `json:"stale"`
}

// FleetRefusal is a fleet override this instance refused: the revision
// etcd wrote it at, the level it named, who set it and why it was
// refused. The instance follows no fleet override meanwhile.
type FleetRefusal struct {
	Revision int64     `json:"revision"`
	Level    string    `json:"level"`
	Actor    string    `json:"actor"`
	Error    string    `json:"error"`
	At       time.Time `json:"at"`
}

// FleetInstance is one instance in the fleet view.
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
	Actor     string     `json:"actor"`
	At        time.Time  `json:"at"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// FleetHistoryLimit is the most audit entries GET /v1/fleet/history
// returns (etcd keeps as many); FleetViewLimit the most instances GET
// /v1/fleet lists.
const (
	FleetHistoryLimit = 1000
	FleetViewLimit    = 1000
)

// handleFleetOff serves every /v1/fleet* route when fleet mode is off: 404.
func handleFleetOff() http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "fleet mode is off")
	}
}

func handleGetFleet(f FleetService) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		limit, ok := queryLimit(w, r, 100, FleetViewLimit)
		if !ok {
			return
		}
		writeJSON(w, http.StatusOK, f.Document(r.Context(), limit))
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
		writeFleetResult(w, r, f, f.SetOverride(r.Context(), req), "the fleet override was not changed")
	}
}

func handleClearFleetOverride(f FleetService) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeFleetResult(w, r, f, f.ClearOverride(r.Context(), actorOf(r)), "the fleet override was not changed")
	}
}

// fleetDown is the 503 sentence for an error of etcd's, naming refused
// credentials and TLS failures as such; ok is false for other errors.
func fleetDown(err error, what string) (sentence string, ok bool) {
	switch {
	case errors.Is(err, ErrFleetAuth):
		return "etcd refused this daemon's credentials (fleet.etcd.username, fleet.etcd.password_file): " + what, true
	case errors.Is(err, ErrFleetTLS):
		return "the TLS handshake with etcd failed (fleet.etcd.tls): " + what, true
	case errors.Is(err, ErrFleetTooLarge):
		return "etcd's answer was over the size limit (keys written by hand under the fleet's prefix?): " + what, true
	case errors.Is(err, ErrFleetUnavailable):
		return "etcd cannot be reached: " + what, true
	}
	return "", false
}

// writeFleetResult answers a fleet override change: 200 with the fleet
// document once etcd committed it and this instance applied it, 503 when
// etcd could not be used (nothing changed), 500 when this instance could
// not save it.
func writeFleetResult(w http.ResponseWriter, r *http.Request, f FleetService, err error, what string) {
	if sentence, down := fleetDown(err, what); down {
		writeError(w, http.StatusServiceUnavailable, sentence)
		return
	}
	switch {
	case errors.Is(err, controller.ErrNotSaved):
		writeError(w, http.StatusInternalServerError, "the fleet override is committed but this instance could not save it to its state file (see the daemon's log)")
	case err != nil:
		writeError(w, http.StatusInternalServerError, "fleet override not applied (see the daemon's log)")
	default:
		writeJSON(w, http.StatusOK, f.Document(r.Context(), 100))
	}
}

func handleFleetHistory(f FleetService) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		limit, ok := queryLimit(w, r, 100, FleetHistoryLimit)
		if !ok {
			return
		}
		entries, err := f.History(r.Context(), limit)
		if sentence, down := fleetDown(err, "the fleet history is kept there"); down {
			writeError(w, http.StatusServiceUnavailable, sentence)
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
	// Instances is the instance count of the last aggregate.
	Instances  int
	Conflict   bool
	Aggregator bool
	// OverridesRefused counts the fleet overrides this instance refused.
	OverridesRefused uint64
}

// RegisterFleetMetrics registers degraded_fleet_connected,
// degraded_fleet_instances, degraded_fleet_instance_conflict,
// degraded_fleet_aggregator and degraded_fleet_override_refused_total on
// reg, read from status at each scrape; nil status reads 0 (fleet mode
// off).
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
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "degraded", Name: "fleet_instances", Help: "Instances summed in the last fleet aggregate (their reports are valid and their leases live)."},
			read(func(s FleetStatus) float64 { return float64(s.Instances) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "degraded", Name: "fleet_instance_conflict", Help: "1 while another process reports under this instance's name."},
			read(func(s FleetStatus) float64 { return boolValue(s.Conflict) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "degraded", Name: "fleet_aggregator", Help: "1 while this instance is the fleet's elected aggregator."},
			read(func(s FleetStatus) float64 { return boolValue(s.Aggregator) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "degraded", Name: "fleet_override_refused_total", Help: "Fleet overrides read from etcd that this instance refused (an unknown level, a bad reason or ttl, not JSON)."},
			read(func(s FleetStatus) float64 { return float64(s.OverridesRefused) })),
	)
}
