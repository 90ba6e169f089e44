package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// unknownLevel is the level label of would-shed counts reported for a
// level name the table lacks.
const unknownLevel = "unknown"

// wouldShedHeader marks a request shadow mode admitted that enforcement
// would have shed.
const wouldShedHeader = "X-Degraded-Would-Shed"

// checkWouldShed checks a report's "would_shed" counts: each 0..maxCount.
// It returns the sentence naming what is wrong, or "".
func checkWouldShed(counts map[string]int64) string {
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		if c := counts[name]; c < 0 || c > maxCount {
			return fmt.Sprintf("would_shed.%s must be an integer 0..%d (was %d)", name, maxCount, c)
		}
	}
	return ""
}

// shedLabelsLocked exports shadow_would_shed_total at 0 for every level
// but Normal and for unknown, and drops the series and counts of levels
// no longer configured, as level_info follows a reload. m.mu must be held.
func (m *Metrics) shedLabelsLocked() {
	keep := map[string]int64{unknownLevel: m.shed[unknownLevel]}
	for _, n := range m.shedLevelsLocked() {
		keep[n] = m.shed[n]
	}
	for n := range m.shed {
		if _, ok := keep[n]; !ok {
			m.wouldShed.DeleteLabelValues(n)
		}
	}
	for n := range keep {
		m.wouldShed.WithLabelValues(n)
	}
	m.shed = keep
	m.shedJSON = nil
}

// shedLevelsLocked are the level names shed counts are kept for: every
// configured level but Normal (which sheds nothing).
func (m *Metrics) shedLevelsLocked() []string {
	if len(m.levelNames) == 0 {
		return nil
	}
	return m.levelNames[1:]
}

// addWouldShed counts requests that shadow mode admitted but enforcement
// would have shed, by level name; a name the table lacks (Normal
// included) counts as unknown.
func (m *Metrics) addWouldShed(counts map[string]int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, c := range counts {
		m.addShedLocked(name, c)
	}
}

// addOneShed counts one request GET /v1/admit admitted in shadow mode at
// level that enforcement would have shed.
func (m *Metrics) addOneShed(level string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.addShedLocked(level, 1)
}

func (m *Metrics) addShedLocked(name string, c int64) {
	if c == 0 {
		return
	}
	if !slices.Contains(m.shedLevelsLocked(), name) {
		name = unknownLevel
	}
	m.shed[name] += c
	m.shedJSON = nil
	m.wouldShed.WithLabelValues(name).Add(float64(c))
}

// wouldShedJSON is the would-shed counts since the start, by level
// (every level but Normal, and unknown), encoded as JSON and kept until
// they change: every GET /v1/level carries it, and outside shadow mode it never
// changes.
func (m *Metrics) wouldShedJSON() []byte {
	if m == nil {
		return []byte("{}")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shedJSON == nil {
		m.shedJSON, _ = json.Marshal(m.shed) // a map of strings to integers always encodes
	}
	return m.shedJSON
}
