package fleet

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestCheckReport(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	at := now.Add(-time.Second).Format(time.RFC3339Nano)
	report := func(attempts, failures string) string {
		return `{"level":"Normal","window_attempts":` + attempts + `,"window_failures":` + failures + `,"at":"` + at + `"}`
	}
	for _, c := range []struct {
		name  string
		value string
		lease int64
		want  string // "" = valid
	}{
		{"valid", report("1000", "100"), 7, ""},
		{"no lease", report("1000", "100"), 0, "has no lease"},
		{"not JSON", `{"level":`, 7, "not a JSON report"},
		{"negative failures", report("100", "-33"), 7, "negative count"},
		{"negative attempts", report("-1", "0"), 7, "negative count"},
		{"attempts above 1e12", report("9000000000000000000", "0"), 7, "count above 1e12"},
		{"failures above attempts", report("10", "1000"), 7, "failures above attempts"},
		{"no level", `{"window_attempts":1,"window_failures":0,"at":"` + at + `"}`, 7, "names no level"},
		{"no at", `{"level":"Normal","window_attempts":1,"window_failures":0}`, 7, "has no at"},
		{"over 64 KiB", `{"level":"Normal","window_attempts":1,"window_failures":0,"signals":{"custom":{"q":"` + strings.Repeat("x", MaxReportBytes) + `"}},"at":"` + at + `"}`, 7, "the report is over 65536 bytes"},
		{"a level name over 256 characters", `{"level":"` + strings.Repeat("é", 257) + `","window_attempts":1,"window_failures":0,"at":"` + at + `"}`, 7, "level is 257 characters, over 256"},
		{"a level name of 256 characters", `{"level":"` + strings.Repeat("é", 256) + `","window_attempts":1,"window_failures":0,"at":"` + at + `"}`, 7, ""},
		{"older than the ttl", `{"level":"Normal","at":"` + now.Add(-11*time.Second).Format(time.RFC3339) + `"}`, 7, "older than fleet.instance_ttl"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := checkReport([]byte(c.value), c.lease, now, 10*time.Second)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

// One lying report never wraps or poisons the sum: every count is
// bounded, so a thousand of the largest sum below int64's limit.
func TestSumOfTheLargestReportsDoesNotWrap(t *testing.T) {
	rs := make([]Report, 1000)
	for i := range rs {
		rs[i] = Report{Level: "Normal", WindowAttempts: MaxCount, WindowFailures: MaxCount}
	}
	a := sum(rs)
	if a.Attempts != 1000*MaxCount || a.Failures != a.Attempts || a.Instances != 1000 || a.Levels["Normal"] != 1000 {
		t.Errorf("sum = %+v, want 1e15 attempts and failures over 1000 Normal instances", a)
	}
}

func TestCheckOverride(t *testing.T) {
	valid := `"level":"Major","mode":"pin","ttl":"15m0s","instance":"a","actor":"alice","set_at":"2026-11-30T08:00:00Z","expires_at":"2026-11-30T08:15:00Z"`
	for _, c := range []struct {
		name, value, want string
	}{
		{"valid", `{` + valid + `,"reason":"INC-42"}`, ""},
		{"not JSON", `{"level":"Major"`, "not a JSON fleet override"},
		{"a reason of 1 MB", `{` + valid + `,"reason":"` + strings.Repeat("x", 1<<20) + `"}`, "reason must be 1 to 500 characters (was 1048576)"},
		{"no reason", `{` + valid + `,"reason":""}`, "reason must be 1 to 500"},
		{"no level", `{"level":"","mode":"pin","ttl":"1m","reason":"x","set_at":"2026-11-30T08:00:00Z","expires_at":"2026-11-30T08:01:00Z"}`, "names no level"},
		{"bad mode", `{"level":"Major","mode":"cap","ttl":"1m","reason":"x","set_at":"2026-11-30T08:00:00Z","expires_at":"2026-11-30T08:01:00Z"}`, "mode must be pin or floor"},
		{"bad ttl", `{"level":"Major","mode":"pin","ttl":"soon","reason":"x"}`, "ttl"},
		{"no ttl", `{"level":"Major","mode":"pin","reason":"x","set_at":"2026-11-30T08:00:00Z","expires_at":"2026-11-30T08:01:00Z"}`, "ttl must be positive"},
		{"no expires_at", `{"level":"Major","mode":"pin","ttl":"1m","reason":"x","set_at":"2026-11-30T08:00:00Z"}`, "set_at and expires_at"},
		{"expires before it is set", `{"level":"Major","mode":"pin","ttl":"1m","reason":"x","set_at":"2026-11-30T08:00:00Z","expires_at":"2026-11-30T07:00:00Z"}`, "before set_at"},
		{"a long actor", `{` + strings.Replace(valid, `"alice"`, `"`+strings.Repeat("a", 65)+`"`, 1) + `,"reason":"x"}`, "actor must be at most 64"},
		{"a terminal escape in the reason", `{` + valid + `,"reason":"INC-1 \u001b[2J\u001b]0;owned\u0007"}`, `reason must be one line of text (was "INC-1 \x1b[2J\x1b]0;owned\a")`},
		{"a newline in the reason", `{` + valid + `,"reason":"INC-1\nset by root"}`, "reason must be one line of text"},
		{"a terminal escape in the actor", `{` + strings.Replace(valid, `"alice"`, `"mallory\u001b[1A"`, 1) + `,"reason":"x"}`, `actor must be one line of text (was "mallory\x1b[1A")`},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, err := checkOverride([]byte(c.value))
			switch {
			case c.want == "" && (err != nil || o.Level != "Major" || o.TTL != 15*time.Minute || o.Actor != "alice"):
				t.Errorf("checkOverride = %+v, %v; want alice's Major for 15m", o, err)
			case c.want != "" && (err == nil || o != nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("checkOverride = %+v, %v; want it refused whole, saying %q", o, err, c.want)
			}
			if err != nil && len(err.Error()) > 200 {
				t.Errorf("the error quotes the value: %d bytes", len(err.Error()))
			}
		})
	}
}

func TestCheckAggregate(t *testing.T) {
	const valid = `{"attempts":10,"failures":1,"instances":2,"levels":{"Normal":2},"leader":"a","term":7,"at":"2026-11-30T08:00:00Z"}`
	for _, c := range []struct {
		name, value string
		lease, rev  int64
		want        string
	}{
		{"valid", valid, 0x1f, 8, ""},
		{"not JSON", `x`, 0x1f, 8, "not a JSON aggregate"},
		{"failures above attempts", `{"attempts":1,"failures":2,"instances":1,"leader":"a","term":7,"at":"2026-11-30T08:00:00Z"}`, 0x1f, 8, "failures above attempts"},
		{"no term", `{"attempts":1,"failures":0,"instances":1,"levels":{"Normal":1},"leader":"a","at":"2026-11-30T08:00:00Z"}`, 0x1f, 8, "term 0"},
		{"no leader", `{"attempts":1,"failures":0,"instances":1,"levels":{"Normal":1},"term":3,"at":"2026-11-30T08:00:00Z"}`, 0x1f, 8, "no leader"},
		{"no lease", valid, 0, 8, "the aggregate has no lease"},
		{"levels of more instances", `{"attempts":10,"failures":1,"instances":2,"levels":{"Normal":2,"Major":1},"leader":"a","term":7,"at":"2026-11-30T08:00:00Z"}`, 0x1f, 8, "level counts are not 2 instances'"},
		{"a negative level count", `{"attempts":10,"failures":1,"instances":2,"levels":{"Normal":3,"Major":-1},"leader":"a","term":7,"at":"2026-11-30T08:00:00Z"}`, 0x1f, 8, "none negative"},
		{"no levels for its instances", `{"attempts":10,"failures":1,"instances":2,"leader":"a","term":7,"at":"2026-11-30T08:00:00Z"}`, 0x1f, 8, "level counts are not 2"},
		{"no instances, no levels", `{"attempts":0,"failures":0,"instances":0,"levels":{},"leader":"a","term":7,"at":"2026-11-30T08:00:00Z"}`, 0x1f, 8, ""},
		{"a term written at its own revision", valid, 0x1f, 7, "its term 7 is past the revision that wrote it"},
		{"a term past the revision", valid, 0x1f, 5, "its term 7 is past the revision that wrote it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := checkAggregate([]byte(c.value), c.lease, c.rev)
			if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
				t.Errorf("checkAggregate: %v, want %q", err, c.want)
			}
		})
	}
}

// FuzzEtcdValues: whatever bytes an etcd key holds, under whatever lease
// and revision, the checks never panic, and what they accept is what the
// sums and the controller rely on: counts within [0, 1e12], failures at
// most attempts; an aggregate with a lease, a term below the revision
// that wrote it, a leader, level counts that add up to its instances; a
// report fresh by the reader's clock; an override with a level, a mode,
// a reason of 1 to 500 characters and an end after its start.
func FuzzEtcdValues(f *testing.F) {
	f.Add([]byte(`{"attempts":10,"failures":1,"instances":2,"levels":{"Normal":2},"leader":"a","term":7,"at":"2026-11-30T08:00:00Z"}`), int64(0x1f), int64(8))
	f.Add([]byte(`{"level":"Normal","window_attempts":1000,"window_failures":100,"at":"2026-11-30T07:59:59Z"}`), int64(7), int64(9))
	f.Add([]byte(`{"level":"Major","mode":"pin","ttl":"15m0s","reason":"INC-1","actor":"alice","set_at":"2026-11-30T08:00:00Z","expires_at":"2026-11-30T08:15:00Z"}`), int64(0), int64(3))
	f.Add([]byte(`{"attempts":-1,"failures":9223372036854775807,"levels":{"x":-5},"term":99}`), int64(1), int64(2))
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, value []byte, lease, rev int64) {
		if a, err := checkAggregate(value, lease, rev); err == nil {
			total := 0
			for _, c := range a.Levels {
				total += c
			}
			if lease == 0 || a.Term <= 0 || a.Term >= rev || a.Leader == "" || a.At.IsZero() || a.Instances < 0 || total != a.Instances ||
				checkCounts(a.Attempts, a.Failures) != nil {
				t.Fatalf("accepted the aggregate %+v (lease %d, revision %d) from %q", a, lease, rev, value)
			}
		}
		if r, err := checkReport(value, lease, now, 10*time.Second); err == nil {
			if lease == 0 || len(value) > MaxReportBytes || r.Level == "" || utf8.RuneCountInString(r.Level) > MaxLevelName || r.At.IsZero() || now.Sub(r.At) > 10*time.Second || r.WindowAttempts < 0 || r.WindowAttempts > MaxCount ||
				r.WindowFailures < 0 || r.WindowFailures > r.WindowAttempts {
				t.Fatalf("accepted the report %+v (lease %d) from %q", r, lease, value)
			}
		}
		if o, err := checkOverride(value); err == nil {
			if n := utf8.RuneCountInString(o.Reason); o.Level == "" || o.Mode != "pin" && o.Mode != "floor" || n == 0 || n > MaxReasonLength ||
				o.TTL <= 0 || o.ExpiresAt.Before(o.SetAt) {
				t.Fatalf("accepted the override %+v from %q", o, value)
			}
		}
	})
}
