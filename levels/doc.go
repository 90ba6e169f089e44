// Package levels is the domain root of degraded: the ordered table of
// degradation levels, the set of signals (one list, in signal.go), the
// snapshot of signals an evaluation reads ([Sample]), and the level
// machine ([Machine]), the one place every rule that decides the published
// state lives: escalation and streaks ([Next], [Event]), the jittered
// dwell, hysteresis and the blind-signal hold of "unknown is not healthy",
// the override layers (auto -> fleet -> local, [Layered]), reload
// remapping, restore, and in graduated mode the admission law (law.go),
// which sizes each step and the partial admission of the band below the
// level from the services' reports. [Line] is one recorded input of the
// machine: the timeline.
//
// It holds no clock, no goroutines, no randomness and no I/O, and imports
// only the standard library; every other package depends inward on it. The
// controller and `degraded replay` drive the same machine with the same
// inputs. Sequences, the history and publishing are not here: they belong
// to the controller.
package levels
