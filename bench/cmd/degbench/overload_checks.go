package main

import (
	"fmt"
	"math"
	"strings"
)

// DESIGN.md's overload targets as pass/fail checks, per judged phase and
// system (judged from judgeAfter into each phase).

// Checks, as the report names them.
const (
	checkTop       = "top class succeeds ≥ 99.5%"
	checkGoodput   = "goodput ≥ 90% of min(offered, capacity)"
	checkInversion = "no priority inversion"
	checkFlaps     = "after settling, ≤ 1 level change a minute (under load: only recovery steps)"
	checkFit       = "level never past the one that fits the capacity"
	checkPeer      = "degraded graduated ≥ failsafe-go (top class, goodput)"
)

var checkOrder = []string{checkTop, checkGoodput, checkInversion, checkFlaps, checkFit, checkPeer}

// overloadCheck is one check of one system in one phase.
type overloadCheck struct {
	Check    string
	Scenario string
	Phase    string
	System   string
	Measured string
	Pass     bool
}

// runView is one run with what the checks read from it.
type runView struct {
	run   systemRun
	stats []phaseStat
}

// judgeOverload evaluates every check of every judged phase of every run.
func judgeOverload(res *overloadResult) []overloadCheck {
	var out []overloadCheck
	names := levelNames(res.Levels)
	for _, sc := range res.Scenarios {
		views := map[string]runView{}
		for _, run := range sc.Runs {
			views[run.System] = runView{run, phaseStats(sc.scenarioSpec, run, res.BinSeconds)}
		}
		for pi, ph := range sc.Phases {
			if !ph.Judged {
				continue
			}
			overload := ph.Offered() > sc.judgedCapacity()
			add := func(check, system, measured string, pass bool) {
				out = append(out, overloadCheck{check, sc.Name, ph.Name, system, measured, pass})
			}
			for _, run := range sc.Runs {
				st := views[run.System].stats[pi]
				if ph.TopClass {
					v := st.Class[0].OKPercent()
					add(checkTop, run.System, fmt.Sprintf("%.2f%%", v), v >= 99.5)
				}
				add(checkGoodput, run.System, percentAgainst(st.GoodputPercent, 90), st.GoodputPercent >= 90)
				inv := inversion(st.Class)
				add(checkInversion, run.System, cmpOr(inv, "none"), inv == "")
				if len(run.Levels) == 0 {
					continue
				}
				changes := levelChanges(run.Levels, st.Start, st.End)
				if st.SettleSeconds < 0 {
					add(checkFlaps, run.System, "never settled; "+plural(len(changes), "level change"), false)
				} else {
					from := st.Start + st.SettleSeconds
					after := levelChanges(run.Levels, from, st.End)
					measured := fmt.Sprintf("settled at %.0f s, then %s", st.SettleSeconds, plural(len(after), "change"))
					pass := atMostOnePerMinute(after)
					// Under load the level comes down from an overload one
					// level a dwell, as DESIGN's recovery rule asks; "not
					// cycle" is a rule of a steady overload.
					if !pass && !overload && recoveryOnly(run.Levels, from, st.End, dwellSeconds) {
						measured += fmt.Sprintf(", each a recovery step, one level ≥ %d s after the last", dwellSeconds)
						pass = true
					}
					add(checkFlaps, run.System, measured, pass)
				}
				if overload && len(res.Levels) > 0 {
					fit := fitLevel(res.Levels, ph.Rates, sc.judgedCapacity())
					m := maxLevel(run.Levels, st.Start, st.End)
					add(checkFit, run.System, fmt.Sprintf("highest %s, fits %s", names(m), names(fit)), m <= fit)
				}
			}
			g, okG := views[sysGraduated]
			f, okF := views[sysFailsafe]
			if overload && okG && okF {
				gs, fs := g.stats[pi], f.stats[pi]
				gt, ft := gs.Class[0].OKPercent(), fs.Class[0].OKPercent()
				add(checkPeer, sysGraduated, fmt.Sprintf("top %.2f%% vs %.2f%%, goodput %.0f%% vs %.0f%%", gt, ft, gs.GoodputPercent, fs.GoodputPercent),
					round1(gt) >= round1(ft) && math.Round(gs.GoodputPercent) >= math.Round(fs.GoodputPercent))
			}
		}
	}
	return out
}

// plural is "1 change", "2 changes".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

func cmpOr(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// levelNames returns a function naming a level index by the table.
func levelNames(table []levelRow) func(int) string {
	return func(i int) string {
		for _, l := range table {
			if l.Index == i {
				return l.Name
			}
		}
		return fmt.Sprintf("level %d", i)
	}
}

// levelSequence is a run's published levels in [from, to) as
// "Normal → Emergency 0.8s → Severe 11.9s", with the level in force at
// from first.
func levelSequence(points []levelPoint, from, to float64) string {
	var parts []string
	cur := ""
	for i, p := range points {
		inForce := p.At < from && (i == len(points)-1 || points[i+1].At >= from)
		switch {
		case inForce:
			cur = p.Level
			parts = append(parts, p.Level)
		case p.At >= from && p.At < to && p.Level != cur:
			cur = p.Level
			parts = append(parts, fmt.Sprintf("%s %.1fs", p.Level, p.At-from))
		}
	}
	return strings.Join(parts, " → ")
}

// percentAgainst writes v as a whole percentage, or to a tenth where the
// whole number would read as meeting target while v misses it (89.5%, not
// 90%).
func percentAgainst(v, target float64) string {
	if v < target && math.Round(v) >= target {
		return fmt.Sprintf("%.1f%%", math.Floor(v*10)/10)
	}
	return fmt.Sprintf("%.0f%%", v)
}
