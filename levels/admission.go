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
	// Seconds is the span the counts cover, in (0, 3600].
	Seconds float64
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
