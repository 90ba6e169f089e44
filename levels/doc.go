// Package levels is the domain root of degraded: the ordered table of
// degradation levels, the snapshot of signals a health check produces, and
// the pure function that says which level a snapshot asks for.
//
// It holds no clock, no goroutines and no I/O, and imports only the standard
// library; every other package depends inward on it. It is not the place for
// dwell times, hysteresis state or overrides: those belong to the controller,
// which calls [Table.Recommend] on every tick.
package levels
