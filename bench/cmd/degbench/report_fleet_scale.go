package main

import (
	"fmt"
	"strings"
)

// DESIGN.md's fleet-at-scale targets.
const (
	fleetScaleEventsPerMember = 3   // watch events per tick, at most this times N
	fleetScaleEtcdCores       = 0.5 // etcd's CPU at 1,000 members
	fleetScaleOverrideMs      = 500 // a fleet override to all members, p99
	fleetScaleFailoverTTLs    = 2   // a new aggregate within this many instance_ttl
)

// writeFleetScale writes section 12: the real fleet package at 100 to
// 1,000 members against one etcd, and the projection from the slope.
func (r *report) writeFleetScale(b *strings.Builder) {
	f := r.fleetScale
	if f == nil || len(f.Points) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	top := f.Points[len(f.Points)-1]
	p("\n## 12. Fleet at scale: %d members on one etcd\n\n", top.Members)
	p("`degbench fleet-scale` (bench/cmd/degbench/fleet_scale.go, fleet_sim.go). Debian's etcd-server %s\n", f.EtcdVersion)
	p("(one member, loopback, a temporary data directory, a fresh one per size) and N members of the\n")
	p("real `fleet` package in the benchmark's process, each with its own etcd client and connection,\n")
	p("reporting every %v at a random phase (a daemon-sized report, %v `instance_ttl`), following the\n", f.Tick, f.InstanceTTL)
	p("fleet override with `Next`, and campaigning to aggregate. The counts are etcd's own\n")
	p("(`etcd_debugging_mvcc_events_total`: watch events sent; `etcd_mvcc_put_total`,\n")
	p("`etcd_mvcc_txn_total`, `etcd_mvcc_range_total`), read from its /metrics over a quiet span once\n")
	p("every member was counted in an aggregate; CPU is utime+stime from /proc/PID/stat over the same\n")
	p("span. An override is a pin set through one member after a random fraction of a tick; the clock\n")
	p("runs from the call to each member's `Next` returning it. The aggregator is then cut off from\n")
	p("etcd (its connections closed, new ones refused: its lease left to run out, as a crash leaves\n")
	p("it), and the clock runs until another member holds an aggregate of a higher term.\n\n")
	p("| members | watch events / tick | per member | puts / tick | etcd CPU | etcd RSS | members' CPU | override p50 | p99 | to the last p99 | commit p50 | new aggregate after | load avg |\n")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, pt := range f.Points {
		p("| %d | %.0f | %.2f | %.0f | %.3f cores | %.0f MiB | %.2f cores | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %.1f s (term %d → %d) | %.1f → %.1f |\n",
			pt.Members, pt.EventsPerTick, pt.EventsPerTick/float64(pt.Members), pt.PutsPerTick, pt.EtcdCores, pt.EtcdRSS/(1<<20),
			pt.MembersCores, quantile(pt.AllMs, .5), quantile(pt.AllMs, .99), quantile(pt.LastMs, .99), quantile(pt.CommitMs, .5),
			pt.FailoverSecs, pt.OldTerm, pt.NewTerm, pt.LoadAvg[0], pt.LoadAvg[1])
	}
	pr := f.Projected
	p("\nProjected to %d members from the line through these points (least squares over N): %.0f watch\n", f.ProjectedMembers, pr.EventsPerTick)
	p("events a tick (%.2f per member), %.0f puts a tick, and %.2f cores of etcd at a %v tick. Per tick\n",
		pr.EventsPerTick/float64(f.ProjectedMembers), pr.PutsPerTick, pr.EtcdCores, f.Tick)
	p("etcd does one report put per member and sends one aggregate event per member; the lease\n")
	p("keepalives (one per member every `instance_ttl` / 3) and the watchers (three per member) cost\n")
	p("per member whatever the tick, so a longer tick divides only the first part (docs/operations.md,\n")
	p("\"Running a fleet\", sizes a fleet from these numbers). The old design (every instance watching\n")
	p("every report) sent N² events a tick: %.0f at %d members.\n", float64(top.Members)*float64(top.Members), top.Members)

	events := top.EventsPerTick <= fleetScaleEventsPerMember*float64(top.Members)
	r.verdicts = append(r.verdicts,
		verdict{fmt.Sprintf("fleet at scale: etcd watch events per tick ≤ %d × N (%d members)", fleetScaleEventsPerMember, top.Members),
			fmt.Sprintf("%.0f (%.2f × N)", top.EventsPerTick, top.EventsPerTick/float64(top.Members)), yes(events)},
		verdict{fmt.Sprintf("fleet at scale: etcd CPU ≤ %.1f core (%d members, %v tick)", fleetScaleEtcdCores, top.Members, f.Tick),
			fmt.Sprintf("%.3f cores", top.EtcdCores), yes(top.EtcdCores <= fleetScaleEtcdCores)},
		verdict{fmt.Sprintf("fleet at scale: an override reaches all %d members, p99 ≤ %d ms", top.Members, fleetScaleOverrideMs),
			fmt.Sprintf("p99 %.0f ms over %d deliveries (%.0f ms to the last of each, p99)", quantile(top.AllMs, .99), len(top.AllMs), quantile(top.LastMs, .99)),
			yes(quantile(top.AllMs, .99) <= fleetScaleOverrideMs)},
		verdict{fmt.Sprintf("fleet at scale: the aggregator killed, a new aggregate within %d × instance_ttl (%v)", fleetScaleFailoverTTLs, fleetScaleFailoverTTLs*f.InstanceTTL),
			fmt.Sprintf("%.1f s", top.FailoverSecs), yes(top.FailoverSecs <= fleetScaleFailoverTTLs*f.InstanceTTL.Seconds())},
	)
}
