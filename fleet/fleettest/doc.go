// Package fleettest makes what tests of fleet mode need beside etcd
// itself: a certificate authority and the certificates a TLS etcd and its
// clients use, and a member's dialer that can cut it off from etcd as a
// crash or a partition would. It is for tests and benchmarks only; nothing
// in the daemon imports it.
package fleettest
