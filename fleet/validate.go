package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxCount is the largest attempts or failures count a report or an
// aggregate may carry: a window of a trillion requests is already
// absurd, and a thousand instances of it still sum far below int64's
// limit, so no sum can wrap.
const MaxCount = 1e12

// MaxReasonLength is the longest fleet override reason accepted, in
// characters: the same limit as a local override's.
const MaxReasonLength = 500

// MaxReportBytes is the largest instance report the aggregator takes: a
// report is about 0.5 KiB, and even a table with a hundred custom signals
// stays far below. A larger one is left out of the sums (and of the
// fleet view), as its signals could make GET /v1/fleet answer megabytes
// per instance.
const MaxReportBytes = 64 << 10

// MaxLevelName is the longest level name a report may carry: the
// aggregate counts instances by level name in one etcd value, and two
// reports naming 1.4 MB levels took it past etcd's request limit, so that
// every aggregate write failed and the aggregator's session with it.
const MaxLevelName = 256

// maxActorLength bounds an override's actor (names are at most 32
// characters; the reserved ones are shorter).
const maxActorLength = 64

// checkReport decodes and checks one instance report as the aggregator
// reads it: now is the reader's clock, ttl the instance lease. A report
// that fails is left out of every sum.
func checkReport(value []byte, lease int64, now time.Time, ttl time.Duration) (Report, error) {
	var r Report
	switch {
	case lease == 0:
		return r, errors.New("the key has no lease (written by hand?), so it would outlive its instance")
	case len(value) > MaxReportBytes:
		return r, fmt.Errorf("the report is over %d bytes, more than an instance writes", MaxReportBytes)
	case json.Unmarshal(value, &r) != nil:
		return r, errors.New("the value is not a JSON report")
	}
	if err := checkCounts(r.WindowAttempts, r.WindowFailures); err != nil {
		return r, err
	}
	switch {
	case r.Level == "":
		return r, errors.New("the report names no level")
	case utf8.RuneCountInString(r.Level) > MaxLevelName:
		return r, fmt.Errorf("the report's level is %d characters, over %d", utf8.RuneCountInString(r.Level), MaxLevelName)
	case r.At.IsZero():
		return r, errors.New("the report has no at")
	case now.Sub(r.At) > ttl:
		return r, fmt.Errorf("the report's at %s is older than fleet.instance_ttl (%s)", r.At.UTC().Format(time.RFC3339), ttl)
	}
	return r, nil
}

// checkCounts checks a window's attempts and failures.
func checkCounts(attempts, failures int64) error {
	switch {
	case attempts < 0 || failures < 0:
		return fmt.Errorf("negative count (attempts %d, failures %d)", attempts, failures)
	case attempts > MaxCount || failures > MaxCount:
		return fmt.Errorf("count above 1e12 (attempts %d, failures %d)", attempts, failures)
	case failures > attempts:
		return fmt.Errorf("failures above attempts (%d > %d)", failures, attempts)
	}
	return nil
}

// checkAggregate decodes and checks an aggregate as an instance reads it:
// value, lease and modRevision are the key's. The aggregator writes it
// under its session lease, which also holds its election key, created at
// the term: before the write, so a term at or past the revision that
// wrote it cannot be an election's. (Whether the lease holds the election
// key of that term takes a read: Fleet.elected.)
func checkAggregate(value []byte, lease, modRevision int64) (Aggregate, error) {
	var a Aggregate
	if lease == 0 {
		return a, errors.New("the aggregate has no lease (written by hand?): an aggregator writes it under its election's lease")
	}
	if err := json.Unmarshal(value, &a); err != nil {
		return a, errors.New("the value is not a JSON aggregate")
	}
	if err := checkCounts(a.Attempts, a.Failures); err != nil {
		return a, err
	}
	switch {
	case a.Instances < 0:
		return a, fmt.Errorf("negative instances (%d)", a.Instances)
	case !levelsSum(a.Levels, a.Instances):
		return a, fmt.Errorf("its level counts are not %d instances' (one level each, none negative)", a.Instances)
	case a.Term <= 0:
		return a, fmt.Errorf("term %d is not an election key's create revision", a.Term)
	case a.Term >= modRevision:
		return a, fmt.Errorf("its term %d is past the revision that wrote it: no election key of that term can have written it", a.Term)
	case a.Leader == "":
		return a, errors.New("the aggregate names no leader")
	case a.At.IsZero():
		return a, errors.New("the aggregate has no at")
	}
	return a, nil
}

// levelsSum reports whether levels counts n instances, one level each:
// no count negative, and their sum n (as sum makes them).
func levelsSum(levels map[string]int, n int) bool {
	total := 0
	for _, c := range levels {
		if c < 0 || c > n-total {
			return false
		}
		total += c
	}
	return total == n
}

// checkOverride decodes and checks a fleet override read from etcd, as
// far as it can be checked without the level table (the controller
// checks the level): a value that fails is refused whole. A value that
// decodes but fails a check is refused with a *RefusedOverride naming its
// level and actor.
func checkOverride(value []byte) (*Override, error) {
	var o Override
	if err := json.Unmarshal(value, &o); err != nil {
		return nil, fmt.Errorf("not a JSON fleet override: %w", err)
	}
	if err := o.check(); err != nil {
		return nil, &RefusedOverride{Level: truncate(o.Level), Actor: truncate(o.Actor), Err: err}
	}
	return &o, nil
}

// RefusedOverride is the error of a fleet override that decoded but failed
// a check (OverrideUpdate.Refused): it names the level and the actor the
// value gave, cut to 40 characters, so that the refusal says whose
// override it was and what it asked for.
type RefusedOverride struct {
	Level, Actor string
	Err          error
}

// Error is the failed check's sentence.
func (e *RefusedOverride) Error() string { return e.Err.Error() }

// Unwrap returns the failed check's error.
func (e *RefusedOverride) Unwrap() error { return e.Err }

// check is what a fleet override needs to be applied at all.
func (o *Override) check() error {
	switch n := utf8.RuneCountInString(o.Reason); {
	case o.Level == "":
		return errors.New("the fleet override names no level")
	case o.Mode != "pin" && o.Mode != "floor":
		return fmt.Errorf("mode must be pin or floor (was %q)", truncate(o.Mode))
	case o.TTL <= 0:
		return fmt.Errorf("ttl must be positive (was %s)", o.TTL)
	case n == 0 || n > MaxReasonLength:
		return fmt.Errorf("reason must be 1 to %d characters (was %d)", MaxReasonLength, n)
	case strings.ContainsFunc(o.Reason, unicode.IsControl):
		// As a local override's (levels): status, history and watch
		// print it, and a value written into etcd by hand held ESC [2J.
		return fmt.Errorf("reason must be one line of text (was %q)", truncate(o.Reason))
	case utf8.RuneCountInString(o.Actor) > maxActorLength:
		return fmt.Errorf("actor must be at most %d characters", maxActorLength)
	case strings.ContainsFunc(o.Actor, unicode.IsControl):
		return fmt.Errorf("actor must be one line of text (was %q)", truncate(o.Actor))
	case o.SetAt.IsZero() || o.ExpiresAt.IsZero():
		return errors.New("set_at and expires_at must both be set")
	case o.ExpiresAt.Before(o.SetAt):
		return errors.New("expires_at is before set_at")
	}
	return nil
}

// truncate shortens a value quoted in an error to 40 characters.
func truncate(s string) string {
	if utf8.RuneCountInString(s) <= 40 {
		return s
	}
	return string([]rune(s)[:40]) + "..."
}

// sum aggregates one round of valid reports.
func sum(reports []Report) Aggregate {
	a := Aggregate{Levels: map[string]int{}, Instances: len(reports)}
	for _, r := range reports {
		a.Attempts += r.WindowAttempts
		a.Failures += r.WindowFailures
		a.Levels[r.Level]++
	}
	return a
}
