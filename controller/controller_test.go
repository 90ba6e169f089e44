package controller

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/degraded/degraded/levels"
)

// defaultTable is the DESIGN.md default table.
func defaultTable(t testing.TB) *levels.Table {
	t.Helper()
	rows := []struct {
		name           string
		prio           int
		errs, cpu, mem float64
	}{
		{"Minor", 10, 1, 60, 60},
		{"Moderate", 30, 5, 70, 70},
		{"Major", 50, 10, 80, 80},
		{"Severe", 70, 25, 90, 90},
		{"Emergency", 100, 50, 95, 95},
	}
	var ls []levels.Level
	for _, r := range rows {
		ls = append(ls, levels.Level{Name: r.name, PriorityThreshold: r.prio, Thresholds: levels.Thresholds{levels.ErrorRate: r.errs, levels.CPU: r.cpu, levels.Memory: r.mem}})
	}
	ls[0].Disable = []string{"recommendations"}
	ls[2].Disable = []string{"search"}
	tab, err := levels.NewTable(ls)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// fakeSampler returns whatever the test set; -1 is warming up, and a
// value below -1 a sampling failure.
type fakeSampler struct {
	mu sync.Mutex
	v  float64
}

func (f *fakeSampler) set(v float64) { f.mu.Lock(); f.v = v; f.mu.Unlock() }

func (f *fakeSampler) Sample(context.Context, time.Time) (float64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.v == -1:
		return 0, levels.ErrWarmingUp
	case f.v < -1:
		return 0, errors.New("read /sys/fs/cgroup/cpu.stat: too many open files")
	}
	return f.v, nil
}

type fakeErrors struct {
	mu       sync.Mutex
	attempts int64
	failures int64
}

func (f *fakeErrors) set(a, fl int64) { f.mu.Lock(); f.attempts, f.failures = a, fl; f.mu.Unlock() }

func (f *fakeErrors) Totals(time.Time) (int64, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts, f.failures
}

// rig is a controller wired to fakes.
type rig struct {
	c     *Controller
	cpu   *fakeSampler
	errs  *fakeErrors
	start time.Time
	stop  func() error // ends Run and returns what it returned; nil before run
}

// newRig builds a controller on fakes and runs it until the test ends
// (see run). Without a HealthCheckInterval it ticks only when the test
// asks (Check): the first health check runs at the start, as Run's always
// does.
func newRig(t *testing.T, o Options) *rig {
	t.Helper()
	r := newStopped(t, o)
	r.run(t)
	return r
}

// newStopped builds the rig's controller without running it.
func newStopped(t *testing.T, o Options) *rig {
	t.Helper()
	r := &rig{cpu: &fakeSampler{}, errs: &fakeErrors{}, start: time.Now()}
	if o.Table == nil {
		o.Table = defaultTable(t)
	}
	if o.Rules.Hysteresis == 0 {
		o.Rules.Hysteresis = 0.1
	}
	if o.HealthCheckInterval == 0 {
		o.HealthCheckInterval = never
	}
	o.CPU, o.Errors = r.cpu, r.errs
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	return r
}

// startNew builds a controller from o (ticking only when asked, unless o
// sets an interval) and runs it until the test ends.
func startNew(t *testing.T, o Options) *Controller {
	t.Helper()
	if o.HealthCheckInterval == 0 {
		o.HealthCheckInterval = never
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	runController(t, c)
	return c
}

// never is a health check interval no test reaches: the test drives the
// health checks.
const never = 1000 * time.Hour

// run runs the rig's controller until r.stop or the end of the test, and
// waits for its first health check.
func (r *rig) run(t *testing.T) {
	t.Helper()
	r.stop = runController(t, r.c)
}

// stopFirst stops r's controller before a test starts another on its
// store: two controllers saving into one directory at once race on its
// files, which the daemon's lock never allows.
func stopFirst(t *testing.T, r *rig) {
	t.Helper()
	if err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("stopping the first controller: %v, want context.Canceled", err)
	}
}

// runController runs c until the returned stop is called or the test
// ends, and waits for its first health check. stop returns Run's error.
func runController(t *testing.T, c *Controller) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var err error
	var once sync.Once
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() {
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v, want context.Canceled", err)
		}
	})
	for {
		sampled := c.Sampled()
		if c.Ready() {
			return stop
		}
		select {
		case <-sampled:
		case err := <-done:
			done <- err
			t.Fatalf("Run returned %v before its first health check", err)
		}
	}
}

// step is one moment of a scenario: at a time since the start, set the
// signals, do an operator action or a health check, then expect a level.
type step struct {
	at     time.Duration
	cpu    float64 // -1: unavailable
	act    func(*Controller) error
	want   string
	source string // "" means don't check
	reason string // substring; "" means don't check
}

func (r *rig) steps(t *testing.T, steps []step) {
	t.Helper()
	for i, s := range steps {
		if d := time.Until(r.start.Add(s.at)); d > 0 {
			time.Sleep(d)
		}
		r.cpu.set(s.cpu)
		if s.act != nil {
			if err := s.act(r.c); err != nil {
				t.Fatalf("step %d (%v): %v", i, s.at, err)
			}
		} else {
			r.c.Check(context.Background())
		}
		st := r.c.State()
		if st.Level != s.want {
			t.Fatalf("step %d (%v, cpu %v): level %s, want %s (reason %q)", i, s.at, s.cpu, st.Level, s.want, st.Reason)
		}
		if s.source != "" && st.Source != s.source {
			t.Fatalf("step %d (%v): source %s, want %s", i, s.at, st.Source, s.source)
		}
		if s.reason != "" && !strings.Contains(st.Reason, s.reason) {
			t.Fatalf("step %d (%v): reason %q, want it to contain %q", i, s.at, st.Reason, s.reason)
		}
	}
}

func pin(level string, ttl time.Duration) func(*Controller) error {
	return func(c *Controller) error {
		_, err := c.SetOverride(OverrideRequest{Level: level, Mode: ModePin, TTL: ttl, Reason: "INC-42"})
		return err
	}
}

func floor(level string, ttl time.Duration) func(*Controller) error {
	return func(c *Controller) error {
		_, err := c.SetOverride(OverrideRequest{Level: level, Mode: ModeFloor, TTL: ttl, Reason: "INC-43"})
		return err
	}
}

func clear(c *Controller) error {
	_, err := c.ClearOverride("alice")
	return err
}

func TestTransitions(t *testing.T) {
	const m = time.Minute
	tests := []struct {
		name  string
		opts  Options
		steps []step
	}{
		{
			name: "escalates straight to the recommended level",
			opts: Options{Rules: levels.Rules{MinimumLevelDuration: m}},
			steps: []step{
				{at: 0, cpu: 10, want: "Normal"},
				{at: 30 * time.Second, cpu: 85, want: "Major", source: "auto", reason: "cpu 85.00% > 80% (Major)"},
			},
		},
		{
			name: "threshold must be strictly exceeded",
			steps: []step{
				{at: 0, cpu: 60, want: "Normal"},
				{at: time.Second, cpu: 60.01, want: "Minor"},
			},
		},
		{
			name: "recovers one level per dwell",
			opts: Options{Rules: levels.Rules{MinimumLevelDuration: m}},
			steps: []step{
				{at: 0, cpu: 85, want: "Major"},
				{at: 30 * time.Second, cpu: 5, want: "Major"},
				{at: 60 * time.Second, cpu: 5, want: "Moderate", reason: "recovered: all signals below Major thresholds less 10% hysteresis"},
				{at: 90 * time.Second, cpu: 5, want: "Moderate"},
				{at: 120 * time.Second, cpu: 5, want: "Minor"},
				{at: 180 * time.Second, cpu: 5, want: "Normal"},
				{at: 240 * time.Second, cpu: 5, want: "Normal"},
			},
		},
		{
			name: "hysteresis holds the level until signals fall below the scaled threshold",
			opts: Options{Rules: levels.Rules{MinimumLevelDuration: m}},
			steps: []step{
				{at: 0, cpu: 75, want: "Moderate"},
				{at: 2 * m, cpu: 65, want: "Moderate"}, // 65 > 70*0.9
				{at: 3 * m, cpu: 63.5, want: "Moderate"},
				{at: 4 * m, cpu: 62, want: "Minor"}, // 62 < 63, but > 54: Minor holds
				{at: 6 * m, cpu: 55, want: "Minor"},
				{at: 7 * m, cpu: 53, want: "Normal"},
			},
		},
		{
			name: "escalation during a recovery dwell is immediate",
			opts: Options{Rules: levels.Rules{MinimumLevelDuration: m}},
			steps: []step{
				{at: 0, cpu: 85, want: "Major"},
				{at: 60 * time.Second, cpu: 5, want: "Moderate"},
				{at: 70 * time.Second, cpu: 92, want: "Severe"},
				{at: 120 * time.Second, cpu: 5, want: "Severe"},
				{at: 130 * time.Second, cpu: 5, want: "Major"},
			},
		},
		{
			name: "escalate_after needs consecutive ticks and takes the lowest ask",
			opts: Options{Rules: levels.Rules{EscalateAfter: 3}},
			steps: []step{
				{at: 0, cpu: 85, want: "Normal"},
				{at: 1 * time.Second, cpu: 10, want: "Normal"}, // streak broken
				{at: 2 * time.Second, cpu: 96, want: "Normal"},
				{at: 3 * time.Second, cpu: 75, want: "Normal"},
				{at: 4 * time.Second, cpu: 85, want: "Moderate"},
			},
		},
		{
			name: "escalation_delay holds the current level first",
			opts: Options{Rules: levels.Rules{EscalationDelay: m, MinimumLevelDuration: m}},
			steps: []step{
				{at: 0, cpu: 61, want: "Normal"}, // Normal held since start: 0 < 1m
				{at: 60 * time.Second, cpu: 61, want: "Minor"},
				{at: 90 * time.Second, cpu: 85, want: "Minor"},
				{at: 120 * time.Second, cpu: 85, want: "Major"},
			},
		},
		{
			name: "unavailable signal triggers nothing",
			steps: []step{
				{at: 0, cpu: -1, want: "Normal"},
			},
		},
		{
			name: "manual only publishes the recommendation but never moves",
			opts: Options{Rules: levels.Rules{ManualOnly: true}},
			steps: []step{
				{at: 0, cpu: 99, want: "Normal"},
				{at: time.Second, cpu: 99, act: pin("Major", 10*time.Minute), want: "Major", source: "override"},
				{at: 2 * time.Second, cpu: 99, act: clear, want: "Major"},
				{at: 10 * m, cpu: 1, want: "Major"},
			},
		},
		{
			name: "pin takes effect at once and clearing resumes stepwise from it",
			opts: Options{Rules: levels.Rules{MinimumLevelDuration: m}},
			steps: []step{
				{at: 0, cpu: 10, want: "Normal"},
				{at: 10 * time.Second, cpu: 10, act: pin("Severe", 15*m), want: "Severe", source: "override", reason: "INC-42"},
				{at: 20 * time.Second, cpu: 10, want: "Severe", source: "override"},
				{at: 50 * time.Second, cpu: 10, act: clear, want: "Severe", source: "auto"},
				// dwell counts from the pin at 10s, not from the clear
				{at: 70 * time.Second, cpu: 10, want: "Major"},
				{at: 100 * time.Second, cpu: 10, want: "Major"},
				{at: 130 * time.Second, cpu: 10, want: "Moderate"},
			},
		},
		{
			name: "pin Normal ignores the signals",
			steps: []step{
				{at: 0, cpu: 10, act: pin("Normal", time.Hour), want: "Normal", source: "override"},
				{at: time.Second, cpu: 99, want: "Normal", source: "override"},
				{at: 2 * time.Second, cpu: 99, act: clear, want: "Normal"},
				{at: 3 * time.Second, cpu: 99, want: "Emergency", source: "auto"},
			},
		},
		{
			name: "override expires on the next tick, mid-dwell",
			opts: Options{Rules: levels.Rules{MinimumLevelDuration: m}},
			steps: []step{
				{at: 0, cpu: 10, act: pin("Major", 90*time.Second), want: "Major"},
				{at: 89 * time.Second, cpu: 10, want: "Major", source: "override"},
				// Expiry resumes automatic control from Major, pinned since 0:
				// its dwell is long done, so the same tick steps down.
				{at: 91 * time.Second, cpu: 10, want: "Moderate", source: "auto"},
				{at: 150 * time.Second, cpu: 10, want: "Moderate"},
				{at: 151 * time.Second, cpu: 10, want: "Minor"},
			},
		},
		{
			name: "floor below the automatic level changes nothing until auto falls under it",
			opts: Options{Rules: levels.Rules{MinimumLevelDuration: m}},
			steps: []step{
				{at: 0, cpu: 85, want: "Major"},
				{at: time.Second, cpu: 85, act: floor("Minor", 10*m), want: "Major", source: "auto"},
				{at: 61 * time.Second, cpu: 5, want: "Moderate", source: "auto"},
				{at: 121 * time.Second, cpu: 5, want: "Minor", source: "override"},
				{at: 181 * time.Second, cpu: 5, want: "Minor", source: "override"},
				{at: 182 * time.Second, cpu: 5, act: clear, want: "Minor", source: "auto"},
				{at: 183 * time.Second, cpu: 5, want: "Normal"}, // auto reached Normal at 181 under the floor
			},
		},
		{
			name: "floor above the automatic level lifts it; auto escalates past it",
			steps: []step{
				{at: 0, cpu: 10, act: floor("Moderate", 10*m), want: "Moderate", source: "override"},
				{at: time.Second, cpu: 91, want: "Severe", source: "auto"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, tt.opts)
				r.steps(t, tt.steps)
			})
		})
	}
}

// statusOf returns the published state of the named signal.
func statusOf(st *State, name string) string {
	return st.Signals.State(levels.Signal(name)).String()
}

// hasValue reports whether the published signal has a value.
func hasValue(st *State, sig levels.Signal) bool {
	_, ok := st.Signals.Value(sig)
	return ok
}
