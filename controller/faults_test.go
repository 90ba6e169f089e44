package controller

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/degraded/degraded/levels"
	"github.com/google/go-cmp/cmp"
)

type failingSampler struct{}

func (failingSampler) Sample(context.Context, time.Time) (float64, error) {
	return 0, errors.New("read cgroup cpu.stat: no such file or directory")
}

// recorder is an Observer that keeps what it was told.
type recorder struct {
	mu     sync.Mutex
	failed [][]string
	moves  []string
	last   *State
}

func (r *recorder) Published(s *State) { r.mu.Lock(); r.last = s; r.mu.Unlock() }
func (r *recorder) Transition(from, to, source string) {
	r.mu.Lock()
	r.moves = append(r.moves, from+">"+to+":"+source)
	r.mu.Unlock()
}
func (r *recorder) SaveFailed(bool) {}
func (r *recorder) HealthCheck(_ time.Duration, failed []string) {
	r.mu.Lock()
	r.failed = append(r.failed, failed)
	r.mu.Unlock()
}

// TestFailedSampleIsUnavailableNotZero: a sampler error makes the signal
// null and is reported, and never reads as 0% (which would mean "recover").
func TestFailedSampleIsUnavailableNotZero(t *testing.T) {
	obs := &recorder{}
	mem := &fakeSampler{v: 85}
	c := startNew(t, Options{Table: defaultTable(t), CPU: failingSampler{}, Memory: mem, Observer: obs, Rules: levels.Rules{Hysteresis: 0.1}})
	st := c.State() // after the first health check, at the start
	if hasValue(st, levels.CPU) || !hasValue(st, levels.Memory) || st.Level != "Major" {
		t.Fatalf("signals %+v level %s, want cpu null, memory 85 and Major", st.Signals, st.Level)
	}
	mem.set(-1) // warming up: unavailable but not a failure
	c.Check(context.Background())
	if d := cmp.Diff([][]string{{"cpu"}, {"cpu"}}, obs.failed); d != "" {
		t.Errorf("failed samples reported (-want +got):\n%s", d)
	}
	// Signals without a value trigger nothing. With blind_hold 0 (these
	// options) a blind signal never holds recovery, so it steps down one
	// level (the dwell is 0), never straight to Normal; TestUnknownIsNotHealthy
	// has the holding cases.
	if d := cmp.Diff([]string{"Normal>Major:auto", "Major>Moderate:auto"}, obs.moves); d != "" {
		t.Errorf("transitions (-want +got):\n%s", d)
	}
}

// TestFailuresLoggedOncePerChange: a sampler failing on every health check
// is logged when it starts failing and when it comes back, not every tick.
func TestFailuresLoggedOncePerChange(t *testing.T) {
	var logs strings.Builder
	cpu := &fakeSampler{v: -2}
	c := startNew(t, Options{Table: defaultTable(t), CPU: cpu, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for range 2 { // and the first, at the start
		c.Check(context.Background())
	}
	cpu.set(10)
	c.Check(context.Background())
	c.Check(context.Background())
	if n := strings.Count(logs.String(), `msg="sample failed"`); n != 1 {
		t.Errorf("%d 'sample failed' lines over 3 failing checks, want 1:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), `msg="sample recovered"`); n != 1 {
		t.Errorf("%d 'sample recovered' lines, want 1:\n%s", n, logs.String())
	}
}
