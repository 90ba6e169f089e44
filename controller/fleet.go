package controller

// FleetInfo is what the controller shows of fleet mode in the state
// document. Connected is called when a document is built and must not
// block (an atomic load).
type FleetInfo struct {
	Name, Instance string
	Connected      func() bool
}

// FleetState is the state document's "fleet" object; absent when fleet
// mode is off.
type FleetState struct {
	Name      string         `json:"name"`
	Instance  string         `json:"instance"`
	Connected bool           `json:"connected"`
	Override  *FleetOverride `json:"override"`
}

// FleetErrorRate is the fleet's error window (error_rate_scope: fleet).
type FleetErrorRate interface {
	ErrorRate() FleetWindow
}

// FleetWindow is the fleet's error window as this instance last saw it:
// the aggregate's sums over the live instances' windows and how many
// instances they cover. Local, when set, says why the local window is used
// instead ("fleet unreachable", "fleet aggregate stale").
type FleetWindow struct {
	Attempts, Failures int64
	Instances          int
	Local              string
}
