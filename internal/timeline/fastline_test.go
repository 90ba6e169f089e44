package timeline

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/degraded/degraded/levels"
	"github.com/google/go-cmp/cmp"
)

// seen is what a Series takes of a line.
type seen struct {
	V                                                      int
	At                                                     string
	Trigger, Published, Recommended, Source, Digest, Actor string
	Signals                                                map[levels.Signal]levels.LineSignal
	Partial                                                *levels.Partial
	Override, Fleet                                        *levels.LineOverride
}

func seenOf(l levels.Line) seen {
	return seen{l.V, l.At.String(), l.Trigger, l.Published, l.Recommended, l.Source, l.ConfigDigest, l.Actor, l.Signals, l.Partial, l.Override, l.FleetOverride}
}

// TestDecodeLineReadsWhatJSONReads: the scanner reads every line of the
// incident, and lines with escapes, unknown keys, nulls and exponents, as
// encoding/json does; what it cannot read is left to encoding/json, which
// refuses what is not JSON.
func TestDecodeLineReadsWhatJSONReads(t *testing.T) {
	var lines []string
	for _, l := range incident() {
		l.Reports = []levels.LineReport{{Success: 9, Failure: 1, LatencyCounts: make([]int64, 14), Admission: &levels.LineAdmission{Sequence: 4, Offered: map[int]int64{10: 3}}}}
		l.Window = levels.LineWindow{Attempts: 10, LatencyCounts: []int64{1, 2, 3}}
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	lines = append(lines,
		`{"v":1,"at":"2026-12-01T10:00:00.5+01:00","trigger":"tick","signals":{"cpu":{"value":-1.5e-7,"state":"available","avg60":null},"queue_depth":{"value":null,"state":"failed","avg60":12}},"published":"Ma\"jor \u00e9","source":"auto","override":null,"fleet_override":null,"partial":{"from":30,"fraction":0.25},"future":{"a":[1,{"b":null},true,false,"x\\y"]},"jitter_r":0}`,
		` { "v" : 1 , "trigger" : "event" , "at" : "2026-12-01T10:00:01Z" , "signals" : { } , "published" : "Normal" } `,
		`{"v":1,"at":"2026-12-01T10:00:02Z","trigger":"tick","actor":"b\u006fb","config_digest":"ab"}`,
	)
	var d lineDecoder
	d.names = map[string]levels.Signal{}
	for _, s := range lines {
		var fast, full levels.Line
		if !d.decode([]byte(s), &fast) {
			t.Errorf("decode refused %s", s)
			continue
		}
		if err := json.Unmarshal([]byte(s), &full); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(seenOf(full), seenOf(fast)); diff != "" {
			t.Errorf("%s\n(-encoding/json +decode):\n%s", s, diff)
		}
	}
	for _, bad := range []string{
		`{"v":1,"at":"2026-12-01T10:00:00Z","trigger":"tick","signals":{"cpu":{"value":1`,
		`{"v":1,"at":"2026-12-01T10:00:00Z","trigger":"tick"} and more`,
		`{"v":1,"at":"yesterday","trigger":"tick"}`,
		`{"v":2,"at":"2026-12-01T10:00:00Z","trigger":"tick"}`,
		`{"v":1,"at":"2026-12-01T10:00:00Z","trigger":"tick","signals":{"cpu":{"value":1..2}}}`,
		strings.Repeat("{", 100),
	} {
		var l levels.Line
		if d.decode([]byte(bad), &l) {
			t.Errorf("decode took %q: %+v", bad, l)
		}
	}
}

// FuzzDecodeLine: whatever line the recorder's own scanner takes,
// encoding/json takes too and reads alike, but for the type of a field
// the scanner skips; neither panics on any line.
func FuzzDecodeLine(f *testing.F) {
	for _, l := range incident() {
		b, err := json.Marshal(l)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"v":1,"at":"2026-12-01T10:00:00.5+01:00","trigger":"tick","signals":{"cpu":{"value":-1.5e-7,"state":"available","avg60":null}},"published":"Ma\"jor \u00e9","partial":{"from":30,"fraction":0.25},"future":{"a":[1,{"b":null},true,false,"x\\y"]}}`))
	f.Add([]byte(`{"v":1,"at":"2026-12-01T10:00:02Z","trigger":"tick","actor":"b\u006fb","reports":[{"success":1,"admission":{"offered":{"10":3}}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d lineDecoder
		d.names = map[string]levels.Signal{}
		var fast, full levels.Line
		if !d.decode(b, &fast) {
			return
		}
		// encoding/json reads what it can past a type error, so the fields
		// the scanner reads are compared all the same.
		if err := json.Unmarshal(b, &full); err != nil && !skippedFieldType(err) {
			t.Fatalf("decode took a line encoding/json refuses (%v): %q", err, b)
		}
		if diff := cmp.Diff(seenOf(full), seenOf(fast)); diff != "" {
			t.Fatalf("%q\n(-encoding/json +decode):\n%s", b, diff)
		}
	})
}

// skippedFieldType reports whether err is encoding/json's type error in a
// field the scanner skips (lineKeys are the ones it reads).
func skippedFieldType(err error) bool {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Field == "" {
		return false
	}
	top, _, _ := strings.Cut(te.Field, ".")
	return !slices.ContainsFunc(lineKeys, func(k string) bool { return strings.EqualFold(k, top) })
}
