package fleet

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// InstanceView is one live instance as the fleet view shows it.
type InstanceView struct {
	Instance string          `json:"instance"`
	Level    string          `json:"level"`
	Index    int             `json:"index"`
	Source   string          `json:"source"`
	Signals  json.RawMessage `json:"signals"`
	SeenAt   time.Time       `json:"seen_at"`
	// At is when the instance wrote its report, by its own clock.
	At time.Time `json:"-"`
}

// View is the fleet as this instance sees it: the live instances (their
// leases have not expired), sorted by name, the count at each level, and
// the summed error windows.
type View struct {
	Connected      bool
	Instances      []InstanceView
	Levels         map[string]int
	WindowAttempts int64
	WindowFailures int64
}

// View returns the fleet as last read and watched. While disconnected it
// is the last view seen.
func (f *Fleet) View() View {
	f.mu.Lock()
	v := View{Connected: f.connected.Load(), Levels: map[string]int{}, Instances: make([]InstanceView, 0, len(f.instances))}
	for name, in := range f.instances {
		v.Instances = append(v.Instances, InstanceView{Instance: name, Level: in.Level, Index: in.Index, Source: in.Source,
			Signals: in.Signals, SeenAt: in.seen.UTC(), At: in.At})
		v.Levels[in.Level]++
		v.WindowAttempts += in.WindowAttempts
		v.WindowFailures += in.WindowFailures
	}
	f.mu.Unlock()
	slices.SortFunc(v.Instances, func(a, b InstanceView) int { return strings.Compare(a.Instance, b.Instance) })
	return v
}

// Instances is how many live instances the fleet view holds: the length
// of View().Instances, without building the view.
func (f *Fleet) Instances() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.instances)
}

// ErrorRate is the fleet's error window: the sums over the live instances'
// reported windows (this one's included) and how many instances reported.
// ok is false while etcd cannot be reached: the caller falls back to its
// local rate.
func (f *Fleet) ErrorRate() (attempts, failures int64, instances int, ok bool) {
	if !f.connected.Load() {
		return 0, 0, 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, in := range f.instances {
		attempts += in.WindowAttempts
		failures += in.WindowFailures
	}
	return attempts, failures, len(f.instances), true
}
