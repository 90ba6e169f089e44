package levels

import "time"

// Partial is the graduated admission of the band just below the published
// level's priority threshold (the state document's "partial"): a request of
// priority p with From <= p < threshold is admitted when a uniform draw in
// [0, 1) is below Fraction. 0 < Fraction < 1; no partial admission is nil,
// never a zero Fraction.
type Partial struct {
	// From is the previous level's priority threshold (0 below the first
	// level): the bottom of the band.
	From int `json:"from"`
	// Fraction is the share of the band admitted, in (0, 1).
	Fraction float64 `json:"fraction"`
}

// Admits reports whether a request of priority p is admitted at the
// threshold with this partial admission, given a uniform draw in [0, 1).
// A nil Partial admits exactly p >= threshold.
func (pa *Partial) Admits(p, threshold int, draw float64) bool {
	if p >= threshold {
		return true
	}
	return pa != nil && p >= pa.From && draw < pa.Fraction
}

// Admission is one client's account of its admission decisions since its
// previous report: the optional "admission" object of an outcome report.
// The counts were judged against the state document with Sequence.
type Admission struct {
	// Sequence is the state's sequence the counts were judged against.
	Sequence uint64
	// Admitted, ShedPartial and ShedBelow count the requests admitted,
	// shed by the partial draw in the band, and shed below the band (or
	// below the threshold when no partial admission was published).
	Admitted, ShedPartial, ShedBelow int64
	// Seconds is the span the counts cover, in [0.001, 3600].
	Seconds float64
	// Arrival is the span, in seconds, over which the requests counted
	// reached the proxy in front of the client, read from their start
	// stamps (the client's WithRequestStart), when the client found it
	// differs from Seconds: a queue before the client grew (shorter) or
	// drained (longer), and the load offered is its requests over
	// Arrival. 0 when the client did not say; else within a factor
	// MaxArrivalFactor of Seconds, and in [0.001, 3600].
	Arrival float64
	// Reporter is the client's random id: the reports of several clients
	// of one daemon are told apart by it.
	Reporter string
	// Offered counts the requests offered (admitted and shed) by exact
	// priority; nil when the client did not count them.
	Offered map[int]int64
}

// Report is what an outcome report or a pushed value brings the
// controller between health checks: an event. A pushed value is the zero
// Report (the pushed sources are read again); an outcome report carries its
// counts, which the error window has already recorded.
type Report struct {
	// At is when the report arrived.
	At time.Time
	// Success and Failure are the report's outcome counts.
	Success, Failure int64
	// Latency holds the report's latency counts (LatencyBuckets of the
	// error window); nil without them.
	Latency []int64
	// Admission is the report's admission object; nil without one.
	Admission *Admission
}

// maxMergedReports bounds the reports one evaluation takes after merging:
// one per reporter the law remembers, and one without an admission
// object.
const maxMergedReports = maxReporters + 1

// maxOfferedPriorities bounds the priorities of a merged admission
// object, as the API bounds a report's (docs/api.md).
const maxOfferedPriorities = 64

// MergeReports merges the reports that arrived between two evaluations:
// those of one reporter judged against one sequence become one (counts
// and spans added), and so do all those without an admission object.
// Admission objects of different reporters or sequences are never added
// together: beyond maxMergedReports, a report's outcomes are merged into
// the last one and its admission object is dropped. (Merged into the last
// one whole, a flood of reports from random reporters made one reporter
// offering 15,360 priorities over 288,100 seconds, which the law kept for
// ten days and read at every evaluation.) So a flood of reports is one
// bounded input of the machine and one bounded timeline line. rs is not
// modified.
func MergeReports(rs []Report) []Report {
	type key struct {
		reporter string
		sequence uint64
		counted  bool
	}
	var out []Report
	index := map[key]int{}
	for _, r := range rs {
		k := key{}
		if a := r.Admission; a != nil {
			k = key{a.Reporter, a.Sequence, true}
		}
		i, ok := index[k]
		if !ok && len(out) == maxMergedReports {
			i, ok = len(out)-1, true
			r.Admission = nil // its outcomes count; its account of the load is dropped
		}
		if !ok {
			index[k] = len(out)
			out = append(out, copyReport(r))
			continue
		}
		out[i] = mergeReport(out[i], r)
	}
	return out
}

// copyReport copies r's slices and maps, so that merging into it leaves
// the original alone.
func copyReport(r Report) Report {
	if r.Latency != nil {
		r.Latency = append([]int64(nil), r.Latency...)
	}
	if a := r.Admission; a != nil {
		c := *a
		if a.Offered != nil {
			c.Offered = make(map[int]int64, len(a.Offered))
			for p, n := range a.Offered {
				c.Offered[p] = n
			}
		}
		r.Admission = &c
	}
	return r
}

// mergeReport adds b to a (a copy of its own) and returns it: the later
// arrival time, summed counts, and for admission objects summed spans.
func mergeReport(a, b Report) Report {
	if b.At.After(a.At) {
		a.At = b.At
	}
	a.Success += b.Success
	a.Failure += b.Failure
	if len(b.Latency) > 0 {
		if a.Latency == nil {
			a.Latency = make([]int64, NumLatencyBuckets)
		}
		for i := range min(len(b.Latency), len(a.Latency)) {
			a.Latency[i] += b.Latency[i]
		}
	}
	switch x, y := a.Admission, b.Admission; {
	case y == nil:
	case x == nil:
		a.Admission = copyReport(Report{Admission: y}).Admission
	default:
		x.Admitted += y.Admitted
		x.ShedPartial += y.ShedPartial
		x.ShedBelow += y.ShedBelow
		if x.Arrival > 0 || y.Arrival > 0 {
			x.Arrival = x.arrival() + y.arrival()
		}
		x.Seconds += y.Seconds
		x.Sequence = max(x.Sequence, y.Sequence)
		if x.Offered == nil && y.Offered != nil {
			x.Offered = map[int]int64{}
		}
		for p, n := range y.Offered {
			if _, ok := x.Offered[p]; ok || len(x.Offered) < maxOfferedPriorities {
				x.Offered[p] += n
			}
		}
	}
	return a
}

// MaxArrivalFactor bounds Admission.Arrival: within this factor of
// Seconds either way.
const MaxArrivalFactor = 8

// arrival is the span the offered requests arrived over: Arrival when
// the client gave it (held to the API's bounds: a recording replayed is
// not checked as a report is), else Seconds.
func (a *Admission) arrival() float64 {
	if a.Arrival > 0 {
		return min(max(a.Arrival, a.Seconds/MaxArrivalFactor, 1e-3), a.Seconds*MaxArrivalFactor)
	}
	return a.Seconds
}
