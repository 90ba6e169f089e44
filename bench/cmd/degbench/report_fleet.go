package main

import (
	"fmt"
	"strings"
)

// fleetTargetMs is DESIGN.md's target: a fleet override reaches 50
// daemons within 100 ms (p99).
const fleetTargetMs = 100

// writeFleet writes section 9: a fleet override through etcd to every
// daemon of a fleet.
func (r *report) writeFleet(b *strings.Builder) {
	f := r.fleet
	if f == nil || len(f.LastMs) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("\n## 9. Fleet: one override to %d daemons through etcd\n\n", f.Daemons)
	p("`degbench fleet` (bench/cmd/degbench/fleet.go). Debian's etcd-server %s (one member, loopback,\n", f.EtcdVersion)
	p("a temporary data directory) and %d daemon processes of the real binary, fleet mode on,\n", f.Daemons)
	p("`health_check_interval: %v` (one instance report a tick), signals off, `dial_timeout: 2s`; all\n", f.Interval)
	p("were in the fleet view %.1f s after the first was started. One SSE subscriber per daemon in\n", f.StartSecs)
	p("the benchmark's process. Each override is a pin (alternately Major and Minor, a reason of its\n")
	p("own) sent to one daemon's `PUT /v1/fleet/override`, after a random fraction of a tick; the clock\n")
	p("starts as the PUT's first byte goes out and stops, per daemon, when its `event: level` naming\n")
	p("that override has been read. %d measured overrides after 2 warm-ups: p99 over %d overrides is\n", len(f.LastMs), len(f.LastMs))
	p("their maximum.\n\n")
	p("| daemons | to the last daemon p50 | p99 | over all daemons p50 | p99 | PUT answered p50 | target |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	p99 := quantile(f.LastMs, .99)
	p("| %d | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.1f ms | p99 to the last ≤ %d ms |\n", f.Daemons, quantile(f.LastMs, .5), p99,
		quantile(f.AllMs, .5), quantile(f.AllMs, .99), quantile(f.PutMs, .5), fleetTargetMs)
	p("\nThe cost to etcd, counted over %.0f s with nothing but the instance reports (etcd's own\n", f.MeasureSecs)
	p("`etcd_mvcc_put_total` and `etcd_mvcc_txn_total` deltas from its /metrics; CPU is utime+stime\n")
	p("from /proc/PID/stat):\n\n")
	p("| puts per instance per tick | txns per instance per tick | etcd CPU, quiet | etcd CPU, during the overrides | etcd RSS | daemon RSS (median) |\n|---:|---:|---:|---:|---:|---:|\n")
	p("| %.2f | %.2f | %.1f %% of a core | %.1f %% of a core | %.1f MiB | %.1f MiB |\n", f.PutsPerInstanceTick, f.TxnsPerInstanceTick,
		f.EtcdCPUPercent, f.EtcdCPUOverridesPercent, f.EtcdRSS/(1<<20), f.DaemonRSSMedian/(1<<20))
	why := ""
	if p99 > fleetTargetMs {
		why = ": see finding F7"
	}
	r.verdicts = append(r.verdicts, verdict{
		fmt.Sprintf("fleet: an override reaches %d daemons, p99 ≤ %d ms", f.Daemons, fleetTargetMs),
		fmt.Sprintf("p99 %.1f ms to the last of %d daemons over %d overrides (p50 %.1f ms)", p99, f.Daemons, len(f.LastMs), quantile(f.LastMs, .5)),
		yes(p99 <= fleetTargetMs) + why,
	})
}
