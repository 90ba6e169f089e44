package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// FleetState is the state document's "fleet" object: present only when
// the daemon runs in fleet mode (DESIGN "Fleet mode").
type FleetState struct {
	// Name is the fleet and Instance this daemon's name in it.
	Name     string `json:"name"`
	Instance string `json:"instance"`
	// Connected reports whether the daemon reaches etcd now.
	Connected bool `json:"connected"`
	// Override is the fleet override in force; nil when none.
	Override *FleetOverride `json:"override"`
}

// FleetOverride is a fleet-wide pin or floor, set with
// PUT /v1/fleet/override on any instance.
type FleetOverride struct {
	Override
	// ModRevision is the etcd revision that wrote it.
	ModRevision int64 `json:"mod_revision"`
}

// Fleet is the fleet view (GET /v1/fleet): this instance, the fleet
// override, the aggregator, the live instances and the aggregate's sums
// of their error windows.
type Fleet struct {
	Name      string         `json:"name"`
	Instance  string         `json:"instance"`
	Connected bool           `json:"connected"`
	Override  *FleetOverride `json:"override"`
	// OverrideRefused is the fleet override etcd holds that this
	// instance refused (an unknown level, a bad reason); nil when none.
	OverrideRefused *FleetRefusal `json:"override_refused"`
	// Aggregator is the instance that sums the fleet's reports; nil
	// before one has published.
	Aggregator *FleetAggregator `json:"aggregator"`
	Instances  []FleetInstance  `json:"instances"`
	// InstancesTotal is how many instance reports etcd holds; Instances
	// lists at most ?limit of them.
	InstancesTotal   int64          `json:"instances_total"`
	Levels           map[string]int `json:"levels"`
	ErrorRatePercent *float64       `json:"error_rate_percent"`
	WindowAttempts   int64          `json:"window_attempts"`
	WindowFailures   int64          `json:"window_failures"`
}

// FleetAggregator is the fleet's elected aggregator: its instance name,
// its term (which only grows) and when it last published. Stale means the
// daemon uses its local error rate.
type FleetAggregator struct {
	Instance string    `json:"instance"`
	Term     int64     `json:"term"`
	At       time.Time `json:"at"`
	Stale    bool      `json:"stale"`
}

// FleetRefusal is a fleet override the daemon refused, and why.
type FleetRefusal struct {
	Revision int64     `json:"revision"`
	Level    string    `json:"level"`
	Actor    string    `json:"actor"`
	Error    string    `json:"error"`
	At       time.Time `json:"at"`
}

// FleetInstance is one live instance of the fleet view. Signals is its
// last health check's signals object, as the state document carries it.
type FleetInstance struct {
	Instance string          `json:"instance"`
	Level    string          `json:"level"`
	Index    int             `json:"index"`
	Source   string          `json:"source"`
	Signals  json.RawMessage `json:"signals"`
	SeenAt   time.Time       `json:"seen_at"`
}

// Fleet returns the fleet view (GET /v1/fleet). A daemon not in fleet
// mode answers an *APIError with StatusCode 404.
func (c *Client) Fleet(ctx context.Context) (Fleet, error) {
	var f Fleet
	err := c.call(ctx, http.MethodGet, "/v1/fleet", nil, &f)
	return f, err
}

// SetFleetOverride pins or floors the level of every instance of the
// fleet (PUT /v1/fleet/override; needs the admin token). It returns once
// etcd committed it and the instance asked applied it; a 503 *APIError
// means etcd could not be reached and nothing changed.
func (c *Client) SetFleetOverride(ctx context.Context, r OverrideRequest) (Fleet, error) {
	var f Fleet
	err := c.call(ctx, http.MethodPut, "/v1/fleet/override", r.body(), &f)
	return f, err
}

// ClearFleetOverride ends the fleet override on every instance (DELETE
// /v1/fleet/override; needs the admin token).
func (c *Client) ClearFleetOverride(ctx context.Context) (Fleet, error) {
	var f Fleet
	err := c.call(ctx, http.MethodDelete, "/v1/fleet/override", nil, &f)
	return f, err
}
