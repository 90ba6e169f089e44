package timeline

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// day is one timeline file: its name, the start of its UTC day and size.
type day struct {
	name  string
	start time.Time
	size  int64
}

// days lists the timeline files in dir, oldest first. Other files are
// ignored.
func days(dir string) ([]day, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []day
	for _, e := range entries {
		date, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		start, err := time.Parse(time.DateOnly, date)
		if err != nil {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // deleted meanwhile
		}
		out = append(out, day{name: e.Name(), start: start, size: info.Size()})
	}
	slices.SortFunc(out, func(a, b day) int { return a.start.Compare(b.start) })
	return out, nil
}

// prune deletes, oldest first, the files whose day ended more than
// retention before now and then those that keep the total over maxBytes.
// The file named current is never deleted. Zero limits are no limits. It
// returns the total size of the files left: 0 when dir does not exist, -1
// when it cannot be listed.
func prune(dir, current string, now time.Time, retention time.Duration, maxBytes int64) (int64, error) {
	ds, err := days(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return -1, err
	}
	var total int64
	for _, d := range ds {
		total += d.size
	}
	var errs []error
	for _, d := range ds {
		if d.name == current {
			continue
		}
		old := retention > 0 && now.Sub(d.start.Add(24*time.Hour)) > retention
		big := maxBytes > 0 && total > maxBytes
		if !old && !big {
			continue
		}
		if err := os.Remove(filepath.Join(dir, d.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		total -= d.size
	}
	return total, errors.Join(errs...)
}
