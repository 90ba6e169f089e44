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
	mu      sync.Mutex // guards the map; never taken by Allow
	byLevel map[string]*atomic.Int64
}

// counter returns the counter of level, creating it. Level names come
// from the daemon's table, so the map stays small.
func (s *shadowCounts) counter(level string) *atomic.Int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byLevel == nil {
		s.byLevel = map[string]*atomic.Int64{}
	}
	n := s.byLevel[level]
	if n == nil {
		n = new(atomic.Int64)
		s.byLevel[level] = n
	}
	return n
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
			into[level] = min(into[level]+v, maxRetained)
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
