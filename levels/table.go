package levels

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// NormalName is the name of level 0, which every table starts with.
const NormalName = "Normal"

// MaxLevels is the largest number of configured levels a table accepts
// (Normal not counted).
const MaxLevels = 64

// ErrUnknownLevel is returned when a level name is not in the table.
var ErrUnknownLevel = errors.New("unknown level")

// Level is one row of the table.
type Level struct {
	// Name is unique in the table, ignoring case; level 0 is always
	// "Normal".
	Name string
	// PriorityThreshold is the lowest priority admitted at this level.
	PriorityThreshold int
	// Thresholds are the values a signal must strictly exceed to ask for
	// this level; a signal without one never triggers it.
	Thresholds Thresholds
	// Disable lists the features turned off from this level upwards.
	Disable []string
}

// Admits reports whether a request of the given priority is served at this
// level: priority >= PriorityThreshold.
func (l Level) Admits(priority int) bool {
	return priority >= l.PriorityThreshold
}

// Threshold returns the level's threshold for sig, and whether it has one.
func (l Level) Threshold(sig Signal) (float64, bool) {
	v, ok := l.Thresholds[sig]
	return v, ok
}

// Table is an immutable, ordered list of levels: index 0 is Normal, higher
// indexes are more severe. The zero value is not usable; build one with
// [NewTable]. A Table is safe for concurrent use.
type Table struct {
	levels   []Level
	disabled [][]string // disabled[i]: union of Disable over levels 1..i
	signals  []Signal   // the built-in signals, then the custom ones
	quantile float64    // the latency quantile, for reasons
}

// TableOptions is what a table knows beside its levels. The zero value
// has no custom signals and labels latency as p99.
type TableOptions struct {
	// Custom names the custom signals (pushed or queried), in order. Each
	// must pass CustomNameProblem, and only they (besides the built-ins)
	// may have thresholds.
	Custom []Signal
	// LatencyQuantile is the quantile the latency signal measures, for
	// reasons ("latency p99 ..."); 0 means 0.99.
	LatencyQuantile float64
}

// NewTable returns the table of Normal followed by configured, in order.
// It checks only what the table itself needs to work (1..MaxLevels levels,
// unique non-empty names other than Normal); the config package reports
// every other problem with key paths before this is called.
func NewTable(configured []Level) (*Table, error) {
	return NewTableWith(configured, TableOptions{})
}

// NewTableWith is NewTable with custom signals and the latency quantile.
func NewTableWith(configured []Level, o TableOptions) (*Table, error) {
	if len(configured) == 0 || len(configured) > MaxLevels {
		return nil, fmt.Errorf("levels: need 1..%d levels, got %d", MaxLevels, len(configured))
	}
	t := &Table{
		levels:   make([]Level, 0, len(configured)+1),
		disabled: make([][]string, 0, len(configured)+1),
	}
	t.signals = append(append([]Signal(nil), AllSignals...), o.Custom...)
	t.quantile = o.LatencyQuantile
	if t.quantile == 0 {
		t.quantile = 0.99
	}
	known := map[Signal]bool{}
	for _, s := range AllSignals {
		known[s] = true
	}
	for _, s := range o.Custom {
		if p := CustomNameProblem(string(s)); p != "" || known[s] {
			return nil, fmt.Errorf("custom signal %q: %s", s, cmp.Or(p, "is repeated"))
		}
		known[s] = true
	}
	t.levels = append(t.levels, Level{Name: NormalName})
	t.disabled = append(t.disabled, []string{})
	seen := map[string]bool{strings.ToLower(NormalName): true}
	var union []string
	have := map[string]bool{}
	for i, l := range configured {
		key := strings.ToLower(l.Name)
		if l.Name == "" || seen[key] {
			return nil, fmt.Errorf("levels[%d]: name %q is empty, reserved or repeated (names are compared case-insensitively)", i, l.Name)
		}
		seen[key] = true
		for _, f := range l.Disable {
			if !have[f] {
				have[f] = true
				union = append(union, f)
			}
		}
		l.Disable = append([]string(nil), l.Disable...)
		l.Thresholds = maps.Clone(l.Thresholds)
		for sig := range l.Thresholds {
			if !known[sig] {
				return nil, fmt.Errorf("levels[%d]: a threshold for %q, which is not a configured signal", i, sig)
			}
		}
		t.levels = append(t.levels, l)
		t.disabled = append(t.disabled, append([]string{}, union...))
	}
	return t, nil
}

// Signals returns the table's signals: the built-in ones, then the custom
// ones in config order. The slice is shared and must not be modified.
func (t *Table) Signals() []Signal { return t.signals }

// Custom reports whether sig is one of the table's custom signals.
func (t *Table) Custom(sig Signal) bool {
	return !sig.Builtin() && slices.Contains(t.signals, sig)
}

// LatencyQuantile returns the quantile the latency signal measures.
func (t *Table) LatencyQuantile() float64 { return t.quantile }

// Len returns the number of levels, Normal included.
func (t *Table) Len() int { return len(t.levels) }

// Level returns level i, clamped to the table: a negative index gives
// Normal, one past the end gives the most severe level.
func (t *Table) Level(i int) Level {
	return t.levels[t.Clamp(i)]
}

// Clamp returns i limited to 0..Len()-1. A state saved under a larger table
// keeps the most severe level of a smaller one rather than dropping to Normal.
func (t *Table) Clamp(i int) int {
	return max(0, min(i, len(t.levels)-1))
}

// Levels returns every level, Normal first. The slice is a copy; the
// levels' Thresholds and Disable are shared and must not be modified.
func (t *Table) Levels() []Level {
	return append([]Level(nil), t.levels...)
}

// Index returns the index of the named level, or ErrUnknownLevel. Names
// are matched case-insensitively: they are unique that way.
func (t *Table) Index(name string) (int, error) {
	for i, l := range t.levels {
		if strings.EqualFold(l.Name, name) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w %q", ErrUnknownLevel, name)
}

// DisabledFeatures returns the features disabled at level i: the union of
// the Disable lists of levels 1..i, in first-seen order. The result is
// shared and must not be modified.
func (t *Table) DisabledFeatures(i int) []string {
	return t.disabled[t.Clamp(i)]
}

// PriorityCritical is a priority admitted at every level.
const PriorityCritical = math.MaxInt32
