package client

import (
	"sync"
	"sync/atomic"
)

// shadowCounts are what Allow and Middleware admitted in shadow mode but
// would have shed, by level name, not yet taken by a flush. The counter
// of the current level is looked up when a view is built, so counting is
// one atomic add on the hot path.
type shadowCounts struct {
	mu      sync.Mutex // guards the maps; never taken by Allow
	byLevel map[string]*atomic.Int64
	// byFeature counts, since the client was made, the Feature calls
	// shadow mode answered true that enforcement would have answered
	// false. Never reset; see Client.WouldDisable.
	byFeature map[string]*atomic.Int64
}

// maxFeatureCounts bounds byFeature: names come from the level table or,
// under FailClosed, from the service's own Feature calls. A name beyond
// it is not counted.
const maxFeatureCounts = 1024

// maxLevelCounts bounds byLevel and a flush's would-shed map: a table has
// at most maxLevels names, and "unknown" is the fail mode's.
const maxLevelCounts = maxLevels + 1

// counter returns the counter of level, creating it. Level names come
// from the daemon's table, so the map stays small; a daemon that names
// more levels than a table has makes room by dropping the counters that
// hold nothing (what they count from here on is not reported).
func (s *shadowCounts) counter(level string) *atomic.Int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byLevel == nil {
		s.byLevel = map[string]*atomic.Int64{}
	}
	n := s.byLevel[level]
	if n == nil {
		if len(s.byLevel) >= maxLevelCounts {
			for name, c := range s.byLevel {
				if c.Load() == 0 {
					delete(s.byLevel, name)
				}
			}
		}
		n = new(atomic.Int64)
		if len(s.byLevel) < maxLevelCounts {
			s.byLevel[level] = n
		}
	}
	return n
}

// feature returns the would-disable counter of a feature, creating it (a
// counter nothing reads beyond maxFeatureCounts names).
func (s *shadowCounts) feature(name string) *atomic.Int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byFeature == nil {
		s.byFeature = map[string]*atomic.Int64{}
	}
	n := s.byFeature[name]
	if n == nil {
		n = new(atomic.Int64)
		if len(s.byFeature) < maxFeatureCounts {
			s.byFeature[name] = n
		}
	}
	return n
}

// WouldDisable returns, per feature, how many Feature calls shadow mode
// answered true that enforcement would have answered false, since the
// client was made (the count of a feature is a counter that only grows:
// export it as one). Nil when none was counted. The counts stay in the
// service: the outcome report has no field for them (docs/client.md). At
// most 1,024 features are counted.
func (c *Client) WouldDisable() map[string]int64 {
	s := &c.shadow
	s.mu.Lock()
	defer s.mu.Unlock()
	var out map[string]int64
	for name, n := range s.byFeature {
		if v := n.Load(); v > 0 {
			if out == nil {
				out = map[string]int64{}
			}
			out[name] = v
		}
	}
	return out
}

// take resets the counters and adds what they held to into (allocated
// if nil and anything was counted), returning it.
func (s *shadowCounts) take(into map[string]int64) map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for level, n := range s.byLevel {
		if v := n.Swap(0); v > 0 {
			if into == nil {
				into = map[string]int64{}
			}
			if _, ok := into[level]; ok || len(into) < maxLevelCounts {
				into[level] = min(into[level]+v, maxRetained)
			}
		}
	}
	return into
}

// inShadow reports whether the last state came from a daemon in shadow
// mode, which accepts "would_shed".
func (c *Client) inShadow() bool {
	st := c.view.Load().state
	return st != nil && st.Shadow
}
