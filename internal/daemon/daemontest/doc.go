// Package daemontest runs a whole daemon (internal/daemon, the same
// wiring as `degraded serve`) inside a test: built from a YAML config,
// served on a loopback httptest server, running its health loop, and
// stopped when the test ends.
//
// It is for tests of this repository; it is not an API.
package daemontest
