// Package roundtrip runs the client (module github.com/degraded/degraded/client)
// against the real daemon (api and controller) in fake time, and checks that
// the client's mirrored state document cannot drift from the daemon's. The
// client's own tests use a hand-written fake daemon, so that its module needs
// nothing else; these tests prove the fake and the daemon speak the same
// protocol. It holds tests only.
package roundtrip
