package client

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
