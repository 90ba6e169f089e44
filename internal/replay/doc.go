// Package replay runs a candidate configuration over a recorded timeline
// (internal/timeline's files) and reports what it would have done: its
// transitions with reasons, the time at each level, its flaps, and beside
// them what the recording published. It runs the controller's own rules,
// levels.Next and levels.Event, over the recorded samples, and replays
// the recorded overrides as the controller layers them. WriteHTML draws
// both sides in one offline page with the dashboard's chart code
// (api/dashboard), from each side's timeline.Series.
//
// It is not a simulator of signals: the samples are the recorded ones.
// Only what the rules and the error window's counts decide can differ
// (levels, hysteresis, dwell, escalate_after, escalation_delay,
// min_throughput, blind_hold, latency.quantile, enable_auto_adjustment).
package replay
