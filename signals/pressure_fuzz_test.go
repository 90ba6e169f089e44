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
