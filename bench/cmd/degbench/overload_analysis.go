package main

import (
	"fmt"
	"math"
)

// The pure computations behind the overload report: each phase's counts
// over its judged window, goodput, the time the admission settled, level
// changes, priority inversion and the level that fits the capacity.

// settleTolerance: "settled" means the admitted rate stays within this
// fraction of its final value for the rest of the phase.
const settleTolerance = 0.10

// inversionPoints: an inversion is a higher class served more than this
// many percentage points less than a lower one.
const inversionPoints = 1.0

// OKPercent is the share of the offered requests answered 200.
func (b classBin) OKPercent() float64 { return pct(b.OK, b.Offered) }

// ShedPercent and FailedPercent are the shares shed and failed.
func (b classBin) ShedPercent() float64   { return pct(b.Shed, b.Offered) }
func (b classBin) FailedPercent() float64 { return pct(b.Failed, b.Offered) }

func pct(n, of int64) float64 {
	if of == 0 {
		return math.NaN()
	}
	return 100 * float64(n) / float64(of)
}

// phaseStat is one phase of one run, counted from judgeAfter into it.
type phaseStat struct {
	Start, End  float64 // the phase, seconds from the run's start
	From        float64 // the judged window's start (Start + judgeAfter)
	All         classBin
	Class       []classBin
	OfferedRate float64 // requests/s offered in the judged window
	GoodRate    float64 // successes within the SLO per second
	// GoodputPercent is GoodRate / min(OfferedRate, capacity).
	GoodputPercent float64
	// EarlyPercent and LatePercent are GoodputPercent over the judged
	// window's first earlySeconds and over the rest; NaN when the window
	// is not longer than twice earlySeconds.
	EarlyPercent, LatePercent float64
	// SettleSeconds is when, from the phase's start, the admitted rate
	// settled; -1 if it never did.
	SettleSeconds float64
}

// phaseStats computes every phase of a run; binSeconds is the bins' width.
func phaseStats(sc scenarioSpec, run systemRun, binSeconds float64) []phaseStat {
	var out []phaseStat
	start := 0.0
	for _, p := range sc.Phases {
		end := start + p.Seconds
		from := start + min(judgeAfter.Seconds(), p.Seconds/2)
		i, j, k := binIndex(start, binSeconds), binIndex(from, binSeconds), binIndex(end, binSeconds)
		s := phaseStat{Start: start, End: end, From: from, All: sumBins(run.Bins, j, k, -1)}
		for c := range overloadClasses {
			s.Class = append(s.Class, sumBins(run.Bins, j, k, c))
		}
		secs := float64(k-j) * binSeconds
		s.OfferedRate = float64(s.All.Offered) / secs
		s.GoodRate = float64(s.All.Good) / secs
		s.GoodputPercent = sc.goodputPercent(s.GoodRate, s.OfferedRate)
		s.EarlyPercent, s.LatePercent = math.NaN(), math.NaN()
		if end-from > 2*earlySeconds {
			m := binIndex(from+earlySeconds, binSeconds)
			s.EarlyPercent = goodputOver(sc, run.Bins, j, m, binSeconds)
			s.LatePercent = goodputOver(sc, run.Bins, m, k, binSeconds)
		}
		series := admittedSeries(run.Bins[i:min(k, len(run.Bins))], p.Rates, binSeconds)
		if at := settleIndex(series); at >= 0 {
			s.SettleSeconds = float64(at)
		} else {
			s.SettleSeconds = -1
		}
		out = append(out, s)
		start = end
	}
	return out
}

// earlySeconds splits a judged window in two (phaseStat.EarlyPercent):
// its first seconds carry what a step of the load costs the law, a queue
// draining and a band readmitted, the rest its steady state. In cpu3x the
// first four judged seconds served 121-148/s, the rest 173-181/s
// (bench/findings.md, F8's fourteenth round).
const earlySeconds = 4.0

// goodputOver is the goodput of bins from..to in percent (goodputPercent).
func goodputOver(sc scenarioSpec, bins [][]classBin, from, to int, binSeconds float64) float64 {
	all := sumBins(bins, from, to, -1)
	secs := float64(to-from) * binSeconds
	return sc.goodputPercent(float64(all.Good)/secs, float64(all.Offered)/secs)
}

func binIndex(t, binSeconds float64) int { return int(math.Round(t / binSeconds)) }

// admittedSeries is the admitted rate per second over bins: for each
// class, its nominal offered rate times the share of its arrivals in that
// second that the gate admitted (served or failed by the service; never
// sent, at the in-flight cap, counts for neither). Weighting the nominal
// rates by admitted shares keeps the arrivals' own Poisson noise out of a
// series that is meant to show the gate.
func admittedSeries(bins [][]classBin, rates []float64, binSeconds float64) []float64 {
	per := max(1, int(math.Round(1/binSeconds)))
	var out []float64
	for i := 0; i+per <= len(bins); i += per {
		var r float64
		for c, rate := range rates {
			b := sumBins(bins, i, i+per, c)
			if sent := b.Offered - b.CapHit; sent > 0 {
				r += rate * float64(sent-b.Shed) / float64(sent)
			}
		}
		out = append(out, r)
	}
	return out
}

// settleIndex is the first second from which every second of series
// stays within settleTolerance of the final value (the mean of the last
// quarter, at least one second); -1 if none, or if that second is inside
// the last quarter: a series that is within the tolerance only for a
// moment at the end of the phase has not settled.
func settleIndex(series []float64) int {
	if len(series) == 0 {
		return -1
	}
	n := max(1, len(series)/4)
	var final float64
	for _, v := range series[len(series)-n:] {
		final += v
	}
	final /= float64(n)
	at := -1
	for i := len(series) - 1; i >= 0; i-- {
		if math.Abs(series[i]-final) > settleTolerance*final {
			break
		}
		at = i
	}
	if at > 0 && at >= len(series)-n {
		return -1
	}
	return at
}

// inversion names the first pair of classes where a higher one was
// served (answered 200) more than inversionPoints less than a lower one;
// "" if none.
func inversion(classes []classBin) string {
	for hi := range classes {
		for lo := hi + 1; lo < len(classes); lo++ {
			a, b := classes[hi].OKPercent(), classes[lo].OKPercent()
			if a < b-inversionPoints {
				return fmt.Sprintf("p%d %.1f%% < p%d %.1f%%", overloadClasses[hi].Priority, a, overloadClasses[lo].Priority, b)
			}
		}
	}
	return ""
}

// levelChanges returns the times, in [from, to), at which the published
// level changed (a change of partial alone is not one).
func levelChanges(points []levelPoint, from, to float64) []float64 {
	var out []float64
	for i := 1; i < len(points); i++ {
		if points[i].Index != points[i-1].Index && points[i].At >= from && points[i].At < to {
			out = append(out, points[i].At)
		}
	}
	return out
}

// maxLevel is the most severe level published in [from, to), the one in
// force at from included; -1 without points.
func maxLevel(points []levelPoint, from, to float64) int {
	m := -1
	for i, p := range points {
		inForce := p.At < from && (i == len(points)-1 || points[i+1].At >= from)
		if inForce || (p.At >= from && p.At < to) {
			m = max(m, p.Index)
		}
	}
	return m
}

// recoveryOnly says every level change in [from, to) is a recovery step
// as DESIGN's rule has it: one level down, at least dwell seconds after
// the level change before it (which may be before from).
func recoveryOnly(points []levelPoint, from, to, dwell float64) bool {
	last := math.Inf(-1)
	for i := 1; i < len(points); i++ {
		p, prev := points[i], points[i-1]
		if p.Index == prev.Index || p.At >= to {
			continue
		}
		if p.At >= from && (p.Index != prev.Index-1 || p.At-last < dwell) {
			return false
		}
		last = p.At
	}
	return true
}

// atMostOnePerMinute says no two of the sorted times are less than a
// minute apart: at most one change in any minute.
func atMostOnePerMinute(times []float64) bool {
	for i := 1; i < len(times); i++ {
		if times[i]-times[i-1] < 60 {
			return false
		}
	}
	return true
}

// fitLevel is the least severe level of the table whose admission
// (priority >= its threshold) fits the capacity at the given rates per
// class; the most severe level if none does.
func fitLevel(table []levelRow, rates []float64, capacity float64) int {
	for _, l := range table {
		var admitted float64
		for c, r := range rates {
			if overloadClasses[c].Priority >= l.PriorityThreshold {
				admitted += r
			}
		}
		if admitted <= capacity {
			return l.Index
		}
	}
	if len(table) == 0 {
		return -1
	}
	return table[len(table)-1].Index
}
