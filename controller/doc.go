// Package controller owns the published degradation level: one goroutine,
// Run's, owns a [levels.Machine] and serves every input in order (health
// checks, coalesced outcome reports and pushed values, overrides, fleet
// updates, reloads), publishes an immutable state document that any number
// of readers follow without locks, numbers the history, saves the state
// (state.json, with reserved sequence blocks it never publishes past), and
// records every input in the timeline.
//
// It declares the small interfaces it consumes (a [Sampler], a [Source],
// an [ErrorRate] window, a [Store], a [Recorder], an [Observer] and the
// fleet's error rate) and knows nothing of HTTP, Prometheus, etcd or
// configuration files: internal/daemon wires those in. The rules are not
// here either: they are the machine's.
package controller
