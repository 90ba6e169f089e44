package signals

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
)

// This file reads pressure stall information (PSI). The kernel publishes it
// for the whole host in /proc/pressure/{cpu,memory,io} and for each cgroup v2
// directory in {cpu,memory,io}.pressure, both in the same format:
//
//	some avg10=0.12 avg60=0.34 avg300=0.56 total=123456
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
//
// prometheus/procfs reads only /proc/pressure and keeps its parser
// unexported, hence the small parser below, fuzzed by FuzzPressure.

// maxPressureFileSize bounds what is read from one pressure file. The kernel
// writes about 110 bytes; anything larger is not a pressure file.
const maxPressureFileSize = 4 << 10

// hostPressureDir is where the kernel publishes host-wide PSI.
const hostPressureDir = "/proc/pressure"

// PressureResource names one of the three resources the kernel reports
// pressure for. Its value is the file's base name: /proc/pressure/<resource>
// and <cgroup>/<resource>.pressure.
type PressureResource string

// The resources a [Pressure] sampler reads, in the order it reads them.
const (
	PressureCPU    PressureResource = "cpu"
	PressureMemory PressureResource = "memory"
	PressureIO     PressureResource = "io"
)

var pressureResources = [...]PressureResource{PressureCPU, PressureMemory, PressureIO}

// PSI is one resource's "some" pressure: the share of wall-clock time, in
// percent within [0, 100], in which at least one task was stalled waiting
// for the resource, averaged over the last 10 and 60 seconds. Escalation
// reads Avg10; recovery also needs Avg60 below its threshold, so that a short
// lull during a long stall is not taken for a recovery.
type PSI struct {
	Avg10, Avg60 float64
}

// PressureReading is one [Pressure.Sample]: the "some" pressure of each
// resource. A resource whose file could not be read or parsed is zero in its
// field and has an entry in Errs; the others are still filled in.
type PressureReading struct {
	CPU, Memory, IO PSI

	// Errs maps each resource that failed to the error naming its file. It
	// is nil when all three were read.
	Errs map[PressureResource]error
}

// Get returns the pressure of res and the error that kept it from being
// read, if any. An unknown res returns an error.
func (r PressureReading) Get(res PressureResource) (PSI, error) {
	if err := r.Errs[res]; err != nil {
		return PSI{}, err
	}
	switch res {
	case PressureCPU:
		return r.CPU, nil
	case PressureMemory:
		return r.Memory, nil
	case PressureIO:
		return r.IO, nil
	default:
		return PSI{}, fmt.Errorf("signals: unknown pressure resource %q", res)
	}
}

// Pressure samples the "some" pressure stall information (PSI) of CPU,
// memory and I/O from either /proc/pressure (the whole host) or one cgroup
// v2 directory. The kernel does the averaging, so there is no warm-up: every
// Sample re-reads the three files. It keeps no state and is safe for
// concurrent use. Create one with [NewPressure]; the zero value is not
// usable.
//
// Both kinds of file are read by one small in-tree parser, fuzzed by
// FuzzPressure: prometheus/procfs reads only /proc/pressure and keeps its
// parser unexported.
type Pressure struct {
	source Source
	dir    string // holds the files; hostPressureDir or the cgroup directory
}

// NewPressure returns the pressure sampler for source: "host" reads
// /proc/pressure/{cpu,memory,io}, "cgroup" reads
// <cgroupDir>/{cpu,memory,io}.pressure, and "off" returns a nil *Pressure
// with a nil error. Any other source is an error. It does not touch the
// filesystem; call [CheckPressure] to learn whether the files exist.
func NewPressure(source, cgroupDir string) (*Pressure, error) {
	switch Source(source) {
	case SourceHost:
		return &Pressure{source: SourceHost, dir: hostPressureDir}, nil
	case SourceCgroup:
		return &Pressure{source: SourceCgroup, dir: cgroupDir}, nil
	case SourceOff:
		return nil, nil
	default:
		return nil, unknownSource("pressure", source)
	}
}

// path returns the file holding res's pressure.
func (p *Pressure) path(res PressureResource) string {
	if p.source == SourceCgroup {
		return filepath.Join(p.dir, string(res)+".pressure")
	}
	return filepath.Join(p.dir, string(res))
}

// Sample reads the three pressure files. One resource failing does not hide
// the others: the reading carries every resource that was read, and
// PressureReading.Errs holds, per failed resource, an error naming its file.
// The returned error is nil when all three were read, the errors of Errs
// joined otherwise, or ctx.Err() unchanged (with a zero reading) when ctx is
// done before or between the reads.
func (p *Pressure) Sample(ctx context.Context) (PressureReading, error) {
	var r PressureReading
	var errs []error
	for _, res := range pressureResources {
		if err := ctx.Err(); err != nil {
			return PressureReading{}, err
		}
		stats, err := readPressureFile(p.path(res))
		if err != nil {
			err = fmt.Errorf("sample %s pressure: %w", res, err)
			if r.Errs == nil {
				r.Errs = make(map[PressureResource]error, len(pressureResources))
			}
			r.Errs[res] = err
			errs = append(errs, err)
			continue
		}
		psi := PSI{Avg10: stats.Some.Avg10, Avg60: stats.Some.Avg60}
		switch res {
		case PressureCPU:
			r.CPU = psi
		case PressureMemory:
			r.Memory = psi
		case PressureIO:
			r.IO = psi
		}
	}
	return r, errors.Join(errs...)
}

// CheckPressure reports whether the pressure files of source exist and
// parse: nil for "off" and when all three are readable, else the error of the
// first file that is not, naming it. A missing file (a kernel without PSI,
// booted with psi=0, or a directory that is not cgroup v2) wraps
// fs.ErrNotExist. serve exits 2 on it; validate only warns, since configs are
// often checked on another machine. An unknown source is an error.
func CheckPressure(source, cgroupDir string) error {
	p, err := NewPressure(source, cgroupDir)
	if err != nil || p == nil {
		return err
	}
	return p.check()
}

// check returns the error of the first pressure file that cannot be read
// and parsed.
func (p *Pressure) check() error {
	for _, res := range pressureResources {
		path := p.path(res)
		_, err := readPressureFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s pressure: %s does not exist (a kernel without PSI, or psi=0 on its command line%s): %w",
				res, path, p.missingHint(), fs.ErrNotExist)
		}
		if err != nil {
			return fmt.Errorf("%s pressure: %w", res, err)
		}
	}
	return nil
}

// missingHint adds the cause of a missing file particular to the source.
func (p *Pressure) missingHint() string {
	if p.source == SourceCgroup {
		return ", or not a cgroup v2 directory"
	}
	return ""
}

// pressureLine is one line of a pressure file: the averages in percent and
// the total stall time in microseconds.
type pressureLine struct {
	Avg10, Avg60, Avg300 float64
	Total                uint64
}

// pressureStats is a parsed pressure file. Full is nil when the file has no
// "full" line (cpu before Linux 5.13).
type pressureStats struct {
	Some pressureLine
	Full *pressureLine
}

// readPressureFile reads and parses the pressure file at path, reading at
// most maxPressureFileSize bytes.
func readPressureFile(path string) (pressureStats, error) {
	f, err := os.Open(path)
	if err != nil {
		return pressureStats{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPressureFileSize+1))
	if err != nil {
		return pressureStats{}, err
	}
	return parsePressure(path, b)
}

// parsePressure parses the content b of the pressure file name, which is
// used only in errors.
//
// It needs one "some" line and accepts at most one "full" line, each with
// avg10, avg60 and avg300 within [0, 100] and an unsigned total, each key
// once. Like prometheus/procfs, it ignores lines with another first word and
// keys it does not know, so that a kernel adding a line or a key does not
// turn the signal off; every field must still be key=value. Input larger than
// maxPressureFileSize is rejected.
func parsePressure(name string, b []byte) (pressureStats, error) {
	if len(b) > maxPressureFileSize {
		return pressureStats{}, fmt.Errorf("parse %s: larger than %d bytes, not a pressure file", name, maxPressureFileSize)
	}
	var (
		s        pressureStats
		haveSome bool
		full     pressureLine
		haveFull bool
		lineNo   int
	)
	for line := range bytes.Lines(b) {
		lineNo++
		fields := bytes.Fields(line)
		if len(fields) == 0 {
			continue
		}
		var dst *pressureLine
		switch string(fields[0]) {
		case "some":
			if haveSome {
				return pressureStats{}, fmt.Errorf("parse %s: line %d: a second \"some\" line", name, lineNo)
			}
			haveSome, dst = true, &s.Some
		case "full":
			if haveFull {
				return pressureStats{}, fmt.Errorf("parse %s: line %d: a second \"full\" line", name, lineNo)
			}
			haveFull, dst = true, &full
		default:
			continue
		}
		if err := parsePressureLine(dst, fields[1:]); err != nil {
			return pressureStats{}, fmt.Errorf("parse %s: line %d (%s): %w", name, lineNo, fields[0], err)
		}
	}
	if !haveSome {
		return pressureStats{}, fmt.Errorf("parse %s: no \"some\" line", name)
	}
	if haveFull {
		s.Full = &full
	}
	return s, nil
}

// The keys of a pressure line, as bits of a set.
const (
	keyAvg10 = 1 << iota
	keyAvg60
	keyAvg300
	keyTotal
)

// parsePressureLine fills dst from the key=value fields after "some" or
// "full".
func parsePressureLine(dst *pressureLine, fields [][]byte) error {
	seen := 0
	for _, field := range fields {
		k, v, ok := bytes.Cut(field, []byte("="))
		if !ok {
			return fmt.Errorf("%q is not key=value", field)
		}
		var bit int
		var avg *float64
		switch string(k) {
		case "avg10":
			bit, avg = keyAvg10, &dst.Avg10
		case "avg60":
			bit, avg = keyAvg60, &dst.Avg60
		case "avg300":
			bit, avg = keyAvg300, &dst.Avg300
		case "total":
			bit = keyTotal
		default:
			continue
		}
		if seen&bit != 0 {
			return fmt.Errorf("%s appears twice", k)
		}
		seen |= bit
		if avg == nil {
			n, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil {
				return fmt.Errorf("total is %q, not an unsigned integer of microseconds", v)
			}
			dst.Total = n
			continue
		}
		f, err := parseAvg(k, v)
		if err != nil {
			return err
		}
		*avg = f
	}
	for _, key := range []struct {
		bit  int
		name string
	}{{keyAvg10, "avg10"}, {keyAvg60, "avg60"}, {keyAvg300, "avg300"}, {keyTotal, "total"}} {
		if seen&key.bit == 0 {
			return fmt.Errorf("no %s", key.name)
		}
	}
	return nil
}

// parseAvg parses the value v of the average k as a percentage in [0, 100].
func parseAvg(k, v []byte) (float64, error) {
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s is %q, not a number", k, v)
	}
	if f < 0 {
		return 0, fmt.Errorf("%s is %q, below 0", k, v)
	}
	if f > 100 {
		return 0, fmt.Errorf("%s is %q, above 100", k, v)
	}
	if f == 0 {
		f = 0 // "-0" reads as 0
	}
	return f, nil
}
