package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// writeOverload writes section 11, `degbench overload`: the tables per
// scenario, the plots (SVG files beside the report, in img/) and the
// checks of DESIGN.md's overload targets.
func (r *report) writeOverload(b *strings.Builder) {
	o := r.overload
	if o == nil || len(o.Scenarios) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	capacity := float64(o.Workers) / (o.ServiceMs / 1000)
	p("\n## 11. Overload: a fixed-capacity service, side by side\n\n")
	p("`degbench overload` (bench/cmd/degbench/overload*.go). The service (its own process,\n")
	p("`degbench overload-service`): %d workers × %.0f ms = **%.0f requests/s**; a request that has\n", o.Workers, o.ServiceMs, capacity)
	p("not got a worker within %.0f ms is answered 500. A worker keeps its time by deadline: a request\n", o.QueueWaitMs)
	p("waiting when its worker came free starts then, not when its goroutine runs, so a late timer on\n")
	p("the loaded machine does not lower the capacity. The load: open-loop Poisson arrivals (the\n")
	p("generator never waits for answers; at most %d in flight per system, an arrival beyond that\n", o.InflightCap)
	p("counts as failed), %s, header `X-Priority`. Every system gets the same arrivals\n", classMix(o))
	p("(seed %d) on a fresh service and daemon. To keep the step near 17 minutes on 2 cores, systems\n", o.Seed)
	p("whose peak offered rates add up to little enough run at the same time (each scenario says which);\n")
	p("the CPU-bound variant runs one at a time. In front of the service:\n\n")
	p("- **none**: no shedding;\n")
	p("- **failsafe**: failsafe-go %s's adaptive limiter with its prioritizer, as its documentation\n", r.version("github.com/failsafe-go/failsafe-go"))
	p("  sets it up (`NewPrioritizer()` calibrated every second, `NewBuilder[any]().BuildPrioritized(p)`,\n")
	p("  defaults otherwise: limits 1..200 from 20, queueing 2-3x the limit); a permit per request at its\n")
	p("  class (p100, p60, p40, p10 are very high, high, medium, low); a wait in its queue counts against\n")
	p("  the service's %.0f ms;\n", o.QueueWaitMs)
	p("- **aegis** (CPU-bound variant only; it sheds by CPU, not by priority): aegis %s BBR,\n", r.version("github.com/go-kratos/aegis"))
	p("  `WithCPUThreshold(%d)`: aegis reads the host's CPU (the mean of its cores), so %d‰ is the\n", o.BBRThreshold, o.BBRThreshold)
	p("  service's core about saturated;\n")
	if o.Fixed != "" {
		f, err := parseFixed(o.Fixed)
		p("- **fixed** (only when asked: `-systems fixed -fixed %s`): a fixed admission, priorities >= %d\n", o.Fixed, f.Threshold)
		switch {
		case err != nil:
			p("  (the result's admission does not parse: %v).", err)
		case f.Fraction > 0:
			p("  and those in [%d, %d) at %g, the rest shed with 503.", f.From, f.Threshold, f.Fraction)
		default:
			p("  the rest shed with 503.")
		}
		p(" A reference, not a peer: its admission was chosen\n")
		p("  knowing the load and the capacity, which no system in front of a real service does; a sweep of\n")
		p("  fractions finds the most any fixed admission serves (bench/findings.md, F8);\n")
	}
	p("- **degraded-levels**, **degraded-graduated**: the real daemon and `client.Middleware(c,\n")
	p("  client.PriorityFromHeader(\"X-Priority\", 0))` with the client's defaults (reports every 1 s);\n")
	if o.RequestStart {
		p("  `client.WithRequestStart(%q)`: the middleware times each request from the generator's send\n", sentHeader)
		p("  time, as from the `X-Request-Start` a proxy in front sets, so the latency it reports includes\n")
		p("  the wait before its handler (on the saturated core of the CPU-bound variant, most of it);\n")
	}
	if o.AdmissionKey {
		p("  `admission: {mode: levels}` and `{mode: graduated}`.\n\n")
	} else {
		p("  **this daemon does not have the `admission` key yet**: both ran the same configuration (today's\n")
		p("  rule), so the two rows measure the same daemon twice.\n\n")
	}
	p("The daemon (latency scenarios), beside `listen` and a temporary `data_dir`:\n\n```yaml\n%s```\n\n", o.DaemonConfig)
	if slices.ContainsFunc(o.Scenarios, func(sc scenarioResult) bool { return sc.Crash > 0 }) {
		p("In crash3x (not one of DESIGN.md's scenarios: what a crash costs the admission), degraded's\n")
		p("daemon is SIGKILLed halfway through the 3x step and started again at once on the same address\n")
		p("and `data_dir`, as a supervisor restarts it; the service's client reconnects on its own, and\n")
		p("the level stream is followed across the restart. The other systems run the same step.\n\n")
	}
	if o.CPUDaemonConfig != "" {
		p("The CPU-bound variant: each request burns %.1f ms of CPU (a loop calibrated on the service's core) on\n", o.BurnMs)
		p("one of %d workers; the service is pinned to core %s with `taskset`, the generator and the daemon to core\n", o.CPUWorkers, o.ServiceCPU)
		p("%s, so its nominal capacity is one core / %.1f ms = %.0f requests/s. A calibration is the luck of a few\n", o.LoadCPU, o.BurnMs, 1000/o.BurnMs)
		p("timed runs, and the core also runs the HTTP stack, so before the systems run a fresh service with no\n")
		p("gate calibrates its burn and is driven closed-loop (%d requests in flight, twice its workers); every\n", 2*o.CPUWorkers)
		p("system's service then burns the same rounds, and goodput is judged against what that service completed\n")
		p("when it is below the nominal.\n")
		if strings.HasPrefix(o.CPUSignal, "cgroup") {
			p("The service runs in a cgroup v2 of its own (%s) and the daemon reads CPU\n", strings.TrimPrefix(o.CPUSignal, "cgroup "))
			p("from it (`source: cgroup`): pinned to one core, the daemon counts one CPU, so the default\n")
			p("table's CPU percents are percents of the service's core (with the latency scenarios' latency\n")
			p("thresholds beside them):\n\n")
		} else {
			p("No cgroup could be made, so the daemon reads the host's CPU (`source: host`): the mean of\n")
			p("the cores, so the thresholds are the default table's halved (the service's core is half the\n")
			p("host), and the other core's load adds to them:\n\n")
		}
		p("```yaml\n%s```\n\n", o.CPUDaemonConfig)
	}
	p("Per class and phase: offered, answered 200 (ok), shed (503 from the gate), failed (500, no answer,\n")
	p("or the in-flight cap), the p50/p99 latency of successes; **goodput** is successes within %d× the\n", sloFactor)
	if o.CPUDaemonConfig != "" {
		p("service time (%.0f ms; in the CPU-bound variant %d workers × %.1f ms, so %.0f ms) per second\n", sloFactor*o.ServiceMs, o.CPUWorkers, o.BurnMs, sloFactor*float64(o.CPUWorkers)*o.BurnMs)
		p("against min(offered, capacity). Every phase is counted from\n")
	} else {
		p("service time (%.0f ms) per second against min(offered, capacity). Every phase is counted from\n", sloFactor*o.ServiceMs)
	}
	p("%.0f s after its start. **Settled** is when, from the phase's start, the admitted rate (each class's\n", judgeAfter.Seconds())
	p("nominal rate × the share of its arrivals the gate admitted, per second) stays within 10%% of its\n")
	p("final value (the mean of the phase's last quarter) for the rest of the phase. An **inversion** is a\n")
	p("higher class served more than 1 point less than a lower one. **Fits** is the least severe level\n")
	p("whose admission (priority ≥ its threshold) at the phase's nominal rates is within the capacity.\n")

	r.overloadChecks = judgeOverload(o)
	if err := os.MkdirAll(r.imgDir, 0o755); err != nil {
		p("\n(could not write the plots: %v)\n", err)
	}
	maxIdx := 0
	for _, l := range o.Levels {
		maxIdx = max(maxIdx, l.Index)
	}
	for si, sc := range o.Scenarios {
		r.writeOverloadScenario(b, si, sc, maxIdx)
	}
	r.writeOverloadChecks(b)
	p("\nThe step took %.0f s in all (`%s`).\n", o.Seconds, r.overloadCommand())
}

func classMix(o *overloadResult) string {
	var parts []string
	for i, c := range o.Classes {
		parts = append(parts, fmt.Sprintf("%.0f%% priority %d", 100*o.Shares[i], c))
	}
	return strings.Join(parts, ", ")
}

// version is a module's version from machine.txt, or "".
func (r *report) version(module string) string {
	for _, kv := range r.machine {
		if kv[0] == module {
			return kv[1]
		}
	}
	return ""
}

func (r *report) overloadCommand() string {
	for line := range strings.SplitSeq(r.commands, "\n") {
		if strings.Contains(line, "degbench overload") {
			return line
		}
	}
	return "degbench overload"
}

func (r *report) writeOverloadScenario(b *strings.Builder, si int, sc scenarioResult, maxIdx int) {
	o := r.overload
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	names := levelNames(o.Levels)
	p("\n### 11.%d %s: %s\n\n", si+1, sc.Name, sc.Title)
	var phases []string
	for _, ph := range sc.Phases {
		phases = append(phases, fmt.Sprintf("%s for %.0f s (%.0f/s)", ph.Name, ph.Seconds, ph.Offered()))
	}
	if m := sc.Measured; m != nil {
		p("Capacity %.0f requests/s nominal; measured in this run, before the systems: %.1f/s completed closed-loop\n", sc.Capacity, m.Rate)
		p("with no gate (%d requests in flight, %.1f s), which goodput is judged against. ", m.Conns, m.Seconds)
	} else {
		p("Capacity %.0f requests/s. ", sc.Capacity)
	}
	p("Phases: %s. %s.\n\n", strings.Join(phases, ", "), groupsText(sc.Groups))
	img := "overload-" + sc.Name + ".svg"
	if f, err := os.Create(filepath.Join(r.imgDir, img)); err == nil {
		werr := writeOverloadSVG(f, sc, o.BinSeconds, maxIdx)
		if cerr := f.Close(); werr == nil && cerr == nil {
			p("![%s: admitted share per class, and degraded's level, over time](%s)\n\n", sc.Name, filepath.ToSlash(filepath.Join(filepath.Base(r.imgDir), img)))
		}
	}
	p("| system | phase | offered/s | p100 ok | p60 ok | p40 ok | p10 ok | goodput | top p99 | settled | level changes | highest level (fits) | inversion |\n")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	var detail strings.Builder
	d := func(format string, a ...any) { fmt.Fprintf(&detail, format, a...) }
	d("| system | phase | class | offered | ok | shed | failed (cap) | p50 | p99 |\n|---|---|---|---:|---:|---:|---:|---:|---:|\n")
	var seqs []string
	for _, run := range sc.Runs {
		stats := phaseStats(sc.scenarioSpec, run, o.BinSeconds)
		for pi, ph := range sc.Phases {
			st := stats[pi]
			settled := "never"
			if st.SettleSeconds >= 0 {
				settled = fmt.Sprintf("%.0f s", st.SettleSeconds)
			}
			changes, level := "", ""
			if len(run.Levels) > 0 {
				changes = fmt.Sprint(len(levelChanges(run.Levels, st.Start, st.End)))
				level = names(maxLevel(run.Levels, st.Start, st.End))
				if ph.Offered() > sc.judgedCapacity() && len(o.Levels) > 0 {
					level += " (" + names(fitLevel(o.Levels, ph.Rates, sc.judgedCapacity())) + ")"
				}
			}
			name := ph.Name
			if ph.Judged {
				name = "**" + name + "**"
			}
			p("| %s | %s | %.0f | %s | %s | %s | %s | %.0f/s = %.0f%% | %s | %s | %s | %s | %s |\n", run.System, name, st.OfferedRate,
				pcts(st.Class[0].OKPercent()), pcts(st.Class[1].OKPercent()), pcts(st.Class[2].OKPercent()), pcts(st.Class[3].OKPercent()),
				st.GoodRate, st.GoodputPercent, msText(run.P99Ms, pi, 0), settled, changes, level, cmpOr(inversion(st.Class), "none"))
			for c, cl := range overloadClasses {
				cb := st.Class[c]
				d("| %s | %s | p%d | %d | %d (%s) | %d (%s) | %d (%d) | %s | %s |\n", run.System, ph.Name, cl.Priority, cb.Offered,
					cb.OK, pcts(cb.OKPercent()), cb.Shed, pcts(cb.ShedPercent()), cb.Failed, cb.CapHit, msText(run.P50Ms, pi, c), msText(run.P99Ms, pi, c))
			}
		}
		if len(run.Levels) > 0 {
			seqs = append(seqs, fmt.Sprintf("- %s: %s", run.System, levelSequence(run.Levels, 0, sc.Seconds())))
		}
	}
	if len(seqs) > 0 {
		p("\nLevels published (seconds from the start of the scenario):\n\n%s\n", strings.Join(seqs, "\n"))
	}
	p("\n<details><summary>Per class: offered, ok, shed, failed, latency of successes</summary>\n\n%s\n", detail.String())
	p("CPU used during each run (seconds): ")
	var cpus []string
	for _, run := range sc.Runs {
		cpus = append(cpus, fmt.Sprintf("%s: generator %.1f, service %.1f, daemon %.1f, the whole host %.1f over %.0f s",
			run.System, run.GeneratorCPU, run.ServiceCPU, run.DaemonCPU, run.HostCPU, run.Seconds))
	}
	p("%s. The generator is one process for the systems that ran at once; the host's figure includes\n", strings.Join(cpus, "; "))
	p("them and whatever else ran on the machine.\n\n</details>\n")
}

// groupsText says which systems ran at the same time.
func groupsText(groups [][]string) string {
	if len(groups) == 0 {
		return "Run order not recorded"
	}
	var parts []string
	for _, g := range groups {
		parts = append(parts, strings.Join(g, " + "))
	}
	if slices.ContainsFunc(groups, func(g []string) bool { return len(g) > 1 }) {
		return "Ran at the same time: " + strings.Join(parts, ", then ")
	}
	return "One system at a time: " + strings.Join(parts, ", ")
}

func pcts(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", v)
}

func msText(v [][]float64, phase, class int) string {
	if phase >= len(v) || class >= len(v[phase]) || v[phase][class] == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f ms", v[phase][class])
}

// writeOverloadChecks writes the checks as a matrix (a row per check and
// phase, a column per system) and adds the summary verdicts for degraded
// graduated, the default mode.
func (r *report) writeOverloadChecks(b *strings.Builder) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	checks := r.overloadChecks
	var systems []string
	for _, s := range allSystems {
		if slices.ContainsFunc(checks, func(c overloadCheck) bool { return c.System == s }) {
			systems = append(systems, s)
		}
	}
	p("\n### 11.%d The targets, checked\n\n", len(r.overload.Scenarios)+1)
	p("DESIGN.md's overload targets, per judged phase (from %.0f s after its start) and system: ✅ met, ❌ not.\n", judgeAfter.Seconds())
	p("The targets are degraded's; the other systems are judged the same way for comparison.\n\n")
	p("| check | scenario | phase | %s |\n|---|---|---|%s\n", strings.Join(systems, " | "), strings.Repeat("---|", len(systems)))
	type key struct{ check, scenario, phase string }
	var keys []key
	cells := map[key]map[string]overloadCheck{}
	for _, c := range checks {
		k := key{c.Check, c.Scenario, c.Phase}
		if cells[k] == nil {
			cells[k] = map[string]overloadCheck{}
			keys = append(keys, k)
		}
		cells[k][c.System] = c
	}
	slices.SortStableFunc(keys, func(a, b key) int { return slices.Index(checkOrder, a.check) - slices.Index(checkOrder, b.check) })
	for _, k := range keys {
		var row []string
		for _, s := range systems {
			c, ok := cells[k][s]
			switch {
			case !ok:
				row = append(row, "")
			case c.Pass:
				row = append(row, "✅ "+c.Measured)
			default:
				row = append(row, "❌ "+c.Measured)
			}
		}
		p("| %s | %s | %s | %s |\n", k.check, k.scenario, k.phase, strings.Join(row, " | "))
	}
	for _, check := range checkOrder {
		var all, failed []string
		for _, c := range checks {
			if c.Check != check || c.System != sysGraduated {
				continue
			}
			s := fmt.Sprintf("%s %s: %s", c.Scenario, c.Phase, c.Measured)
			all = append(all, s)
			if !c.Pass {
				failed = append(failed, s)
			}
		}
		if len(all) == 0 {
			continue
		}
		measured := fmt.Sprintf("%d of %d phases met", len(all)-len(failed), len(all))
		if len(failed) > 0 {
			measured += "; not: " + strings.Join(failed, "; ")
		}
		r.verdicts = append(r.verdicts, verdict{"overload (degraded graduated): " + check, measured, yes(len(failed) == 0)})
	}
}
