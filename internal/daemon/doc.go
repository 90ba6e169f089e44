// Package daemon is the wiring of one degraded daemon: from a loaded
// config it builds the error window, the samplers, the state store, the
// controller, the metrics and the HTTP API, and runs them. `degraded serve`
// and every test rig that needs a whole daemon use it (see daemontest), so
// the wiring exists once and tests exercise what production runs.
//
// It is not the place for flags, signals or exit codes (cmd/degraded), nor
// for any rule of the level (levels, controller).
package daemon
