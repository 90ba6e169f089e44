package signals

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/mem"
)

// fakeTimes returns one result per call, in order.
type fakeTimes struct {
	mu    sync.Mutex
	calls int
	steps []timesResult
}

type timesResult struct {
	times cpu.TimesStat
	err   error
	empty bool // return an empty slice and no error
}

func (f *fakeTimes) times(context.Context) ([]cpu.TimesStat, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.steps[f.calls]
	f.calls++
	if r.err != nil {
		return nil, r.err
	}
	if r.empty {
		return nil, nil
	}
	return []cpu.TimesStat{r.times}, nil
}

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// approx reports whether got is within 1e-9 of want.
func approx(got, want float64) bool { return math.Abs(got-want) < 1e-9 }

func TestHostCPU(t *testing.T) {
	errBoom := errors.New("boom")
	base := cpu.TimesStat{CPU: "cpu-total", User: 10, Idle: 90}
	type step struct {
		res     timesResult
		want    float64
		wantErr error // nil: want a value
		anyErr  bool  // want some error other than ErrWarmingUp
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "first sample warms up, second measures busy share",
			steps: []step{
				{res: timesResult{times: base}, wantErr: ErrWarmingUp},
				// total 100 -> 200, busy 10 -> 40: 30% (iowait is not busy)
				{res: timesResult{times: cpu.TimesStat{User: 35, System: 5, Idle: 150, Iowait: 10}}, want: 30},
			},
		},
		{
			name: "every busy field counts",
			steps: []step{
				{res: timesResult{times: base}, wantErr: ErrWarmingUp},
				// +10 each of user, system, nice, irq, softirq, steal; +40 idle: 60/100
				{res: timesResult{times: cpu.TimesStat{User: 20, System: 10, Nice: 10, Irq: 10, Softirq: 10, Steal: 10, Idle: 130}}, want: 60},
			},
		},
		{
			name: "guest time is not counted twice",
			steps: []step{
				{res: timesResult{times: base}, wantErr: ErrWarmingUp},
				// Linux counts guest inside user: +50 user of which 50 guest, +50 idle: 50%
				{res: timesResult{times: cpu.TimesStat{User: 60, Guest: 50, Idle: 140}}, want: 50},
			},
		},
		{
			name: "idle host is a real zero",
			steps: []step{
				{res: timesResult{times: base}, wantErr: ErrWarmingUp},
				{res: timesResult{times: cpu.TimesStat{User: 10, Idle: 190}}, want: 0},
			},
		},
		{
			name: "fully busy host is 100",
			steps: []step{
				{res: timesResult{times: base}, wantErr: ErrWarmingUp},
				{res: timesResult{times: cpu.TimesStat{User: 60, System: 50, Idle: 90}}, want: 100},
			},
		},
		{
			name: "zero delta is warming up, not a fake zero",
			steps: []step{
				{res: timesResult{times: base}, wantErr: ErrWarmingUp},
				{res: timesResult{times: base}, wantErr: ErrWarmingUp},
				{res: timesResult{times: cpu.TimesStat{User: 60, Idle: 140}}, want: 50},
			},
		},
		{
			name: "counters going backwards re-baseline",
			steps: []step{
				{res: timesResult{times: base}, wantErr: ErrWarmingUp},
				{res: timesResult{times: cpu.TimesStat{User: 1, Idle: 9}}, wantErr: ErrWarmingUp},
				{res: timesResult{times: cpu.TimesStat{User: 6, Idle: 14}}, want: 50},
			},
		},
		{
			name: "gopsutil error is reported and keeps the baseline",
			steps: []step{
				{res: timesResult{times: base}, wantErr: ErrWarmingUp},
				{res: timesResult{err: errBoom}, wantErr: errBoom},
				{res: timesResult{times: cpu.TimesStat{User: 35, Idle: 165}}, want: 25},
			},
		},
		{
			name: "no aggregate times is an error",
			steps: []step{
				{res: timesResult{empty: true}, anyErr: true},
				{res: timesResult{times: base}, wantErr: ErrWarmingUp},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeTimes{}
			for _, s := range tt.steps {
				f.steps = append(f.steps, s.res)
			}
			h := &HostCPU{times: f.times}
			for i, s := range tt.steps {
				now := t0.Add(time.Duration(i) * time.Second)
				got, err := h.Sample(t.Context(), now)
				switch {
				case s.anyErr:
					if err == nil || errors.Is(err, ErrWarmingUp) {
						t.Fatalf("step %d: Sample() = %v, %v; want a sampling error", i, got, err)
					}
				case s.wantErr != nil:
					if !errors.Is(err, s.wantErr) {
						t.Fatalf("step %d: Sample() = %v, %v; want error %v", i, got, err, s.wantErr)
					}
				default:
					if err != nil || !approx(got, s.want) {
						t.Fatalf("step %d: Sample() = %v, %v; want %v, nil", i, got, err, s.want)
					}
				}
				if err != nil && got != 0 {
					t.Errorf("step %d: Sample() returned value %v alongside error %v", i, got, err)
				}
			}
		})
	}
}

func TestHostMemory(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name    string
		vm      *mem.VirtualMemoryStat
		err     error
		want    float64
		wantErr bool
	}{
		{name: "used percent passes through", vm: &mem.VirtualMemoryStat{UsedPercent: 42.5}, want: 42.5},
		{name: "above 100 is capped", vm: &mem.VirtualMemoryStat{UsedPercent: 100.2}, want: 100},
		{name: "gopsutil error", err: errBoom, wantErr: true},
		{name: "NaN is an error", vm: &mem.VirtualMemoryStat{UsedPercent: math.NaN()}, wantErr: true},
		{name: "nil stat is an error", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &HostMemory{virtual: func(context.Context) (*mem.VirtualMemoryStat, error) { return tt.vm, tt.err }}
			got, err := h.Sample(t.Context(), t0)
			if tt.wantErr {
				if err == nil || got != 0 {
					t.Fatalf("Sample() = %v, %v; want 0 and an error", got, err)
				}
				if tt.err != nil && !errors.Is(err, tt.err) {
					t.Errorf("Sample() error %v does not wrap %v", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Sample() = %v, %v; want %v, nil", got, err, tt.want)
			}
		})
	}
}

func TestHostSamplersCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for name, s := range map[string]Sampler{"cpu": NewHostCPU(), "memory": NewHostMemory()} {
		t.Run(name, func(t *testing.T) {
			if _, err := s.Sample(ctx, t0); !errors.Is(err, context.Canceled) {
				t.Fatalf("Sample(canceled) error = %v; want context.Canceled", err)
			}
		})
	}
}

// TestHostRealMachine reads the real host through gopsutil.
func TestHostRealMachine(t *testing.T) {
	t.Run("cpu", func(t *testing.T) {
		h := NewHostCPU()
		if got, err := h.Sample(t.Context(), t0); !errors.Is(err, ErrWarmingUp) {
			t.Fatalf("first Sample() = %v, %v; want ErrWarmingUp", got, err)
		}
		// Back to back, the counters may not have moved: ErrWarmingUp is fine.
		got, err := h.Sample(t.Context(), t0.Add(time.Second))
		if errors.Is(err, ErrWarmingUp) {
			t.Logf("second Sample() back to back: counters did not advance")
			return
		}
		if err != nil || got < 0 || got > 100 {
			t.Fatalf("second Sample() = %v, %v; want a value in [0, 100]", got, err)
		}
	})
	t.Run("memory", func(t *testing.T) {
		got, err := NewHostMemory().Sample(t.Context(), t0)
		if err != nil || got <= 0 || got > 100 {
			t.Fatalf("Sample() = %v, %v; want a value in (0, 100]", got, err)
		}
	})
}

// TestHostCPUConcurrent is for the race detector.
func TestHostCPUConcurrent(t *testing.T) {
	var mu sync.Mutex
	var n float64
	h := &HostCPU{times: func(context.Context) ([]cpu.TimesStat, error) {
		mu.Lock()
		defer mu.Unlock()
		n += 10
		return []cpu.TimesStat{{User: n, Idle: n}}, nil
	}}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				got, err := h.Sample(t.Context(), t0)
				if err != nil && !errors.Is(err, ErrWarmingUp) {
					t.Errorf("Sample() error = %v", err)
				}
				if got < 0 || got > 100 {
					t.Errorf("Sample() = %v; want a value in [0, 100]", got)
				}
			}
		})
	}
	wg.Wait()
}
