// Package levels is the domain root of degraded: the ordered table of
// degradation levels, the set of signals (one list, in signal.go), the
// snapshot of signals a health check produces ([Sample]), and the pure
// rules: [Table.Recommend] says which level a snapshot asks for, and
// [Next] moves the automatic level one tick, with escalation, streaks,
// the jittered dwell, hysteresis and the blind-signal hold of "unknown is
// not healthy"; [Event] is the upward-only evaluation of a report between
// ticks. [Line] is one recorded evaluation of the timeline.
//
// It holds no clock, no goroutines and no I/O, and imports only the standard
// library; every other package depends inward on it. The controller and
// `degraded replay` run the same [Next] and [Event]. Overrides, history, sequences and
// publishing are not here: they belong to the controller.
package levels
