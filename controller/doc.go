// Package controller owns the published degradation level. Its health loop
// samples the signals on every tick, asks the level table what they
// recommend, applies the dwell, hysteresis and escalation rules, merges the
// operator's override, and publishes an immutable state document that any
// number of readers can follow without locks.
//
// It declares the small interfaces it consumes (a [Sampler], an
// [ErrorRate] source, a [Store] and an [Observer]) and knows nothing of
// HTTP, Prometheus or configuration files: cmd/degraded wires those in.
package controller
