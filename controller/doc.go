// Package controller owns the published degradation level. Its health loop
// reads the signals on every tick, runs the pure rules of levels.Next (and
// levels.Event when a report crosses a threshold), layers the fleet and the
// local overrides on the automatic level, and publishes an immutable state
// document that any number of readers can follow without locks. It saves
// that state (state.json, with reserved sequence blocks) and records a
// timeline line per evaluation.
//
// It declares the small interfaces it consumes (a [Sampler], a [Source],
// an [ErrorRate] window, a [Store], a [Recorder], an [Observer] and the
// fleet's error rate) and knows nothing of HTTP, Prometheus, etcd or
// configuration files: internal/daemon wires those in.
package controller
