package signals

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// The cgroup v2 interface files the cgroup samplers read.
const (
	fileCPUStat       = "cpu.stat"
	fileCPUMax        = "cpu.max"
	fileMemoryCurrent = "memory.current"
	fileMemoryMax     = "memory.max"
	fileMemoryStat    = "memory.stat"
)

// readKeyedUint returns the value of key in a flat-keyed cgroup file such as
// cpu.stat or memory.stat ("key value" per line).
func readKeyedUint(path, key string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || k != key {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse %s: %s is %q, not an unsigned integer", path, key, v)
		}
		return n, nil
	}
	return 0, fmt.Errorf("parse %s: no %s line", path, key)
}

// readUint returns the single unsigned integer in a file such as
// memory.current.
func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %q is not an unsigned integer", path, s)
	}
	return n, nil
}

// readMemoryMax returns the limit in memory.max, with unlimited set for "max"
// and for a missing file (the root cgroup has none).
func readMemoryMax(path string) (limit uint64, unlimited bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, true, nil
	}
	if err != nil {
		return 0, false, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, true, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("parse %s: %q is neither \"max\" nor an unsigned integer", path, s)
	}
	if n == 0 {
		return 0, false, fmt.Errorf("parse %s: limit is 0 bytes, cannot compute a percentage", path)
	}
	return n, false, nil
}

// readCPUMax returns the CPU quota in cpu.max ("$QUOTA $PERIOD") as a number
// of CPUs, with unlimited set for a quota of "max" and for a missing file (the
// root cgroup has none).
func readCPUMax(path string) (cpus float64, unlimited bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, true, nil
	}
	if err != nil {
		return 0, false, err
	}
	s := strings.TrimSpace(string(b))
	fields := strings.Fields(s)
	if len(fields) == 0 || len(fields) > 2 {
		return 0, false, fmt.Errorf("parse %s: %q is not \"$QUOTA $PERIOD\"", path, s)
	}
	if fields[0] == "max" {
		return 0, true, nil
	}
	if len(fields) != 2 {
		return 0, false, fmt.Errorf("parse %s: %q has a quota but no period", path, s)
	}
	quota, qerr := strconv.ParseUint(fields[0], 10, 64)
	period, perr := strconv.ParseUint(fields[1], 10, 64)
	if qerr != nil || perr != nil || quota == 0 || period == 0 {
		return 0, false, fmt.Errorf("parse %s: %q is not a positive quota and period in microseconds", path, s)
	}
	return float64(quota) / float64(period), false, nil
}
