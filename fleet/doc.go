// Package fleet is fleet mode on etcd: the fleet override every instance
// of a service follows, the instance reports each instance keeps under its
// own lease, the elected aggregator that sums them once per tick, and the
// fleet view read on demand.
//
// A [Fleet] talks to one etcd member at a time through a client of its
// own. [Fleet.Run] connects, reads the override and the aggregate,
// watches those two keys only (the work etcd does per tick is O(N) in the
// fleet's size), keeps this instance's report alive, campaigns to be the
// aggregator, and moves to the next member when one fails or hangs; once
// every member failed it reconnects with backoff. It does not decide
// levels: the controller applies the [OverrideUpdate]s that
// [Fleet.Next] delivers, and the daemon hands it each tick's [Report].
// Values read from etcd are checked where they are read: a report,
// aggregate or override that fails is left out or refused, never
// half-used.
//
// Keys, under <prefix><name>/:
//
//	override          the fleet override (JSON), under a lease of its ttl
//	audit_seq         the audit counter
//	audit/%020d       the audit entries, the last 1000 kept
//	instances/<name>  each instance's report, under its lease
//	leader/<lease>    the election (concurrency.Election), under each lease
//	aggregate         the aggregator's sums, under its lease
//
// It is not a general etcd client, and it does not validate levels:
// the controller knows the table.
package fleet
