// Package daemon is the wiring of one degraded daemon: from a loaded
// config it builds the error window, the samplers and signal sources (the
// Prometheus queries among them), the state store, the controller, the
// timeline recorder, the fleet member, the metrics and the HTTP API, runs
// them, and applies a reload to them. `degraded serve` and every test rig
// that needs a whole daemon use it (see daemontest), so the wiring exists
// once and tests exercise what production runs.
//
// It is not the place for flags, signals or exit codes (cmd/degraded), nor
// for any rule of the level (levels, controller).
package daemon
