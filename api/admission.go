package api

import (
	"fmt"
	"math"
	"regexp"
	"strconv"

	"github.com/degraded/degraded/levels"
)

// Bounds of an outcome report's "admission" object (docs/api.md).
const (
	maxOfferedKeys = 64
	minSeconds     = 0.001
	maxSeconds     = 3600
	maxSequence    = 1<<53 - 1
)

// reporterID is the form of "admission.reporter": a client's random id.
var reporterID = regexp.MustCompile(`^[0-9a-f]{1,32}$`)

// admissionBody is an outcome report's "admission" object: a client's
// account of its admission decisions since its previous report, judged
// against the state with Sequence.
type admissionBody struct {
	Sequence    *uint64          `json:"sequence"`
	Admitted    int64            `json:"admitted"`
	ShedPartial int64            `json:"shed_partial"`
	ShedBelow   int64            `json:"shed_below"`
	Seconds     *float64         `json:"seconds"`
	Arrival     *float64         `json:"arrival_seconds"`
	Reporter    string           `json:"reporter"`
	Offered     map[string]int64 `json:"offered"`
}

// admission checks the object and returns it as the controller takes it,
// or the sentence naming what is wrong.
func (b *admissionBody) admission() (*levels.Admission, string) {
	switch {
	case b.Sequence == nil:
		return nil, "admission.sequence is required"
	case *b.Sequence > maxSequence:
		return nil, fmt.Sprintf("admission.sequence must be an integer 0..%d (was %d)", uint64(maxSequence), *b.Sequence)
	case b.Seconds == nil:
		return nil, "admission.seconds is required"
	case !(*b.Seconds >= minSeconds && *b.Seconds <= maxSeconds):
		// A span of 5e-324 s read counts as rates of +Inf, and the law's
		// fraction as NaN, which no state document can carry.
		return nil, fmt.Sprintf("admission.seconds must be in [%g, %d] (was %g)", minSeconds, maxSeconds, *b.Seconds)
	case b.Arrival != nil && !(*b.Arrival >= minSeconds && *b.Arrival <= maxSeconds &&
		*b.Arrival >= *b.Seconds/levels.MaxArrivalFactor && *b.Arrival <= *b.Seconds*levels.MaxArrivalFactor):
		return nil, fmt.Sprintf("admission.arrival_seconds must be in [%g, %d] and within a factor %d of seconds (was %g, seconds %g)",
			minSeconds, maxSeconds, levels.MaxArrivalFactor, *b.Arrival, *b.Seconds)
	case b.Reporter != "" && !reporterID.MatchString(b.Reporter):
		return nil, fmt.Sprintf("admission.reporter must match %s (was %q)", reporterID, b.Reporter)
	case len(b.Offered) > maxOfferedKeys:
		return nil, fmt.Sprintf("admission.offered must have at most %d priorities (was %d)", maxOfferedKeys, len(b.Offered))
	}
	for _, c := range []struct {
		name string
		v    int64
	}{{"admitted", b.Admitted}, {"shed_partial", b.ShedPartial}, {"shed_below", b.ShedBelow}} {
		if c.v < 0 || c.v > maxCount {
			return nil, fmt.Sprintf("admission.%s must be an integer 0..%d (was %d)", c.name, maxCount, c.v)
		}
	}
	a := &levels.Admission{Sequence: *b.Sequence, Admitted: b.Admitted, ShedPartial: b.ShedPartial, ShedBelow: b.ShedBelow,
		Seconds: *b.Seconds, Reporter: b.Reporter}
	if b.Arrival != nil {
		a.Arrival = *b.Arrival
	}
	if b.Offered != nil {
		a.Offered = make(map[int]int64, len(b.Offered))
	}
	var offered int64
	for k, n := range b.Offered {
		p, err := strconv.ParseUint(k, 10, 31)
		if err != nil || strconv.FormatUint(p, 10) != k {
			return nil, fmt.Sprintf("admission.offered keys must be priorities 0..%d in decimal (was %q)", math.MaxInt32, k)
		}
		if n < 0 || n > maxCount {
			return nil, fmt.Sprintf("admission.offered[%q] must be an integer 0..%d (was %d)", k, maxCount, n)
		}
		a.Offered[int(p)] = n
		offered += n
	}
	if decided := b.Admitted + b.ShedPartial + b.ShedBelow; offered > decided {
		// offered counts the same decisions by priority: more of them
		// than were decided is not an account of a client's load.
		return nil, fmt.Sprintf("admission.offered sums to %d, more than admitted + shed_partial + shed_below (%d)", offered, decided)
	}
	return a, ""
}
