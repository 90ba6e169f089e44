// Package fleet is fleet mode on etcd: the fleet override every instance
// of a service follows, the instance reports each instance keeps under its
// own lease, and the fleet view built from them (levels, the fleet error
// rate).
//
// A [Fleet] owns one etcd client. [Fleet.Run] connects, reads everything,
// watches from the revision it read, keeps this instance's report alive
// and reconnects with backoff when etcd cannot be reached. It does not
// decide levels: the controller applies the [OverrideUpdate]s it
// delivers, and the daemon hands it each tick's [Report].
//
// Keys, under <prefix><name>/:
//
//	override          the fleet override (JSON), under a lease of its ttl
//	audit_seq         the audit counter
//	audit/%020d       the audit entries, the last 1000 kept
//	instances/<name>  each instance's report, under its keepalive lease
package fleet
