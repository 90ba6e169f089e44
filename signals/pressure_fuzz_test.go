package signals

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePressure(t *testing.T) {
	const name = "/proc/pressure/cpu"
	tests := []struct {
		name   string
		in     string
		want   pressureStats
		wantIn []string // the input is rejected with an error mentioning each
	}{
		{
			name: "host cpu on Linux 5.13+: full line of zeros",
			in:   "some avg10=3.10 avg60=33.02 avg300=59.34 total=783881443\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
			want: pressureStats{
				Some: pressureLine{Avg10: 3.10, Avg60: 33.02, Avg300: 59.34, Total: 783881443},
				Full: &pressureLine{},
			},
		},
		{
			name: "cpu before Linux 5.13: no full line",
			in:   "some avg10=0.12 avg60=0.34 avg300=0.56 total=123456\n",
			want: pressureStats{Some: pressureLine{Avg10: 0.12, Avg60: 0.34, Avg300: 0.56, Total: 123456}},
		},
		{
			name: "no trailing newline",
			in:   "some avg10=1.00 avg60=2.00 avg300=3.00 total=4",
			want: pressureStats{Some: pressureLine{Avg10: 1, Avg60: 2, Avg300: 3, Total: 4}},
		},
		{
			name: "full before some, blank lines and CRLF",
			in:   "\r\nfull avg10=1.00 avg60=1.00 avg300=1.00 total=7\r\n\nsome avg10=2.00 avg60=2.00 avg300=2.00 total=9\r\n",
			want: pressureStats{
				Some: pressureLine{Avg10: 2, Avg60: 2, Avg300: 2, Total: 9},
				Full: &pressureLine{Avg10: 1, Avg60: 1, Avg300: 1, Total: 7},
			},
		},
		{
			name: "a line with another first word is ignored",
			in:   "some avg10=5.00 avg60=6.00 avg300=7.00 total=8\nnever avg10=900 whatever\n",
			want: pressureStats{Some: pressureLine{Avg10: 5, Avg60: 6, Avg300: 7, Total: 8}},
		},
		{
			name: "an unknown key is ignored",
			in:   "some avg10=5.00 avg60=6.00 avg300=7.00 avg3600=99999 total=8\n",
			want: pressureStats{Some: pressureLine{Avg10: 5, Avg60: 6, Avg300: 7, Total: 8}},
		},
		{
			name: "bounds 0 and 100 are accepted, -0 reads as 0",
			in:   "some avg10=100 avg60=0 avg300=-0 total=18446744073709551615\n",
			want: pressureStats{Some: pressureLine{Avg10: 100, Total: 18446744073709551615}},
		},
		{name: "empty file", in: "", wantIn: []string{`no "some" line`}},
		{name: "only a full line", in: "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", wantIn: []string{`no "some" line`}},
		{name: "not a pressure file", in: "usage_usec 5\nuser_usec 2\n", wantIn: []string{`no "some" line`}},
		{name: "avg10 not a number", in: "some avg10=lots avg60=0 avg300=0 total=0\n", wantIn: []string{"line 1 (some)", `avg10 is "lots", not a number`}},
		{name: "avg60 empty", in: "some avg10=0 avg60= avg300=0 total=0\n", wantIn: []string{`avg60 is "", not a number`}},
		{name: "avg300 NaN", in: "some avg10=0 avg60=0 avg300=NaN total=0\n", wantIn: []string{`avg300 is "NaN", not a number`}},
		{name: "avg10 infinite", in: "some avg10=+Inf avg60=0 avg300=0 total=0\n", wantIn: []string{`avg10 is "+Inf", not a number`}},
		{name: "avg10 negative", in: "some avg10=-0.5 avg60=0 avg300=0 total=0\n", wantIn: []string{`avg10 is "-0.5", below 0`}},
		{name: "avg60 above 100", in: "some avg10=0 avg60=100.01 avg300=0 total=0\n", wantIn: []string{`avg60 is "100.01", above 100`}},
		{
			name:   "full avg above 100",
			in:     "some avg10=0 avg60=0 avg300=0 total=0\nfull avg10=250 avg60=0 avg300=0 total=0\n",
			wantIn: []string{"line 2 (full)", `avg10 is "250", above 100`},
		},
		{name: "total negative", in: "some avg10=0 avg60=0 avg300=0 total=-1\n", wantIn: []string{`total is "-1", not an unsigned integer`}},
		{name: "total a fraction", in: "some avg10=0 avg60=0 avg300=0 total=1.5\n", wantIn: []string{`total is "1.5"`}},
		{name: "total overflows uint64", in: "some avg10=0 avg60=0 avg300=0 total=18446744073709551616\n", wantIn: []string{`total is "18446744073709551616"`}},
		{name: "avg10 twice", in: "some avg10=1 avg60=0 avg300=0 avg10=2 total=0\n", wantIn: []string{"avg10 appears twice"}},
		{name: "total twice", in: "some avg10=1 avg60=0 avg300=0 total=0 total=0\n", wantIn: []string{"total appears twice"}},
		{name: "avg300 missing", in: "some avg10=1 avg60=0 total=0\n", wantIn: []string{"line 1 (some)", "no avg300"}},
		{name: "total missing from full", in: "some avg10=1 avg60=0 avg300=0 total=0\nfull avg10=1 avg60=0 avg300=0\n", wantIn: []string{"line 2 (full)", "no total"}},
		{name: "some line without fields", in: "some\n", wantIn: []string{"no avg10"}},
		{name: "field without =", in: "some avg10 0.5 avg60=0 avg300=0 total=0\n", wantIn: []string{`"avg10" is not key=value`}},
		{
			name:   "two some lines",
			in:     "some avg10=0 avg60=0 avg300=0 total=0\nsome avg10=0 avg60=0 avg300=0 total=0\n",
			wantIn: []string{`line 2: a second "some" line`},
		},
		{
			name:   "two full lines",
			in:     "some avg10=0 avg60=0 avg300=0 total=0\nfull avg10=0 avg60=0 avg300=0 total=0\nfull avg10=0 avg60=0 avg300=0 total=0\n",
			wantIn: []string{`line 3: a second "full" line`},
		},
		{
			name:   "larger than 4 KiB",
			in:     "some avg10=0 avg60=0 avg300=0 total=0\n" + strings.Repeat("x", maxPressureFileSize),
			wantIn: []string{"larger than 4096 bytes"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parsePressure(name, []byte(tt.in))
			if tt.wantIn == nil {
				if err != nil {
					t.Fatalf("parsePressure() error %v; want %+v", err, tt.want)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("parsePressure() mismatch (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatalf("parsePressure() = %+v, nil; want an error mentioning %q", got, tt.wantIn)
			}
			for _, s := range append([]string{"parse " + name}, tt.wantIn...) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("parsePressure() error %q does not mention %q", err, s)
				}
			}
		})
	}
}

// FuzzPressure checks that parsePressure never panics, that whatever it
// accepts has every average within [0, 100], and that formatting an accepted
// file back and parsing it again gives the same values.
func FuzzPressure(f *testing.F) {
	for _, tree := range []string{"psi-host", "psi-host-old-kernel", "psi-cgroup"} {
		files, err := filepath.Glob(filepath.Join("testdata", tree, "*"))
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	for _, s := range []string{
		"",
		"some\n",
		"some avg10=100.00 avg60=-0 avg300=1e2 total=18446744073709551615",
		"some avg10=0x1p-2 avg60=1_0 avg300=NaN total=0\n",
		"full avg10=0 avg60=0 avg300=0 total=0\nsome avg10=0 avg60=0 avg300=0 total=0 extra=1\nirq x\n",
		"some avg10=1 avg10=1 avg60=0 avg300=0 total=0\n",
	} {
		f.Add([]byte(s))
	}
	const name = "fuzz.pressure"
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := parsePressure(name, in)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "parse "+name+": ") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if len(in) > maxPressureFileSize {
			t.Fatalf("accepted %d bytes, over the %d-byte bound", len(in), maxPressureFileSize)
		}
		lines := []pressureLine{got.Some}
		if got.Full != nil {
			lines = append(lines, *got.Full)
		}
		for _, l := range lines {
			for _, v := range []float64{l.Avg10, l.Avg60, l.Avg300} {
				if math.IsNaN(v) || v < 0 || v > 100 || math.Signbit(v) {
					t.Fatalf("accepted %q with average %v outside [0, 100]", in, v)
				}
			}
		}
		again, err := parsePressure(name, []byte(formatPressure(got)))
		if err != nil {
			t.Fatalf("re-parsing %q (from %q): %v", formatPressure(got), in, err)
		}
		if diff := cmp.Diff(got, again); diff != "" {
			t.Fatalf("format then parse changed %q (-first +second):\n%s", in, diff)
		}
	})
}

// formatPressure writes s in the kernel's format, with averages printed
// exactly rather than to two decimals.
func formatPressure(s pressureStats) string {
	line := func(kind string, l pressureLine) string {
		g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
		return fmt.Sprintf("%s avg10=%s avg60=%s avg300=%s total=%d\n", kind, g(l.Avg10), g(l.Avg60), g(l.Avg300), l.Total)
	}
	out := line("some", s.Some)
	if s.Full != nil {
		out += line("full", *s.Full)
	}
	return out
}
