// Command degraded is the graceful-degradation controller daemon and its
// operator CLI: serve, validate, status, watch, override (local and
// --fleet), fleet status, report, replay and version.
//
// This package only parses flags, wires the packages together and runs
// them; main calls run so that the whole program is testable in-process.
// Exit codes: 0 ok, 1 runtime failure, 2 usage or invalid config.
package main
