package signals

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/mem"
)

// HostCPU samples the share of all the host's CPUs that was busy between two
// consecutive calls to Sample, from the aggregate CPU times of gopsutil.
// Busy time is everything but idle and iowait.
//
// The first call records a baseline and returns [ErrWarmingUp]. Create one
// with [NewHostCPU]; the zero value is not usable. It is safe for concurrent
// use, though concurrent callers split the intervals between them.
type HostCPU struct {
	times func(ctx context.Context) ([]cpu.TimesStat, error) // injectable for tests

	mu   sync.Mutex
	prev cpu.TimesStat
	have bool
}

// NewHostCPU returns a HostCPU reading the real host through gopsutil.
func NewHostCPU() *HostCPU {
	return &HostCPU{times: func(ctx context.Context) ([]cpu.TimesStat, error) {
		return cpu.TimesWithContext(ctx, false)
	}}
}

// Sample returns the percentage of all CPUs busy since the previous call, or
// [ErrWarmingUp] on the first call and whenever the CPU counters did not
// advance (or went backwards). now is unused: the CPU counters carry their
// own elapsed time.
func (h *HostCPU) Sample(ctx context.Context, now time.Time) (float64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	ts, err := h.times(ctx)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return 0, ctxErr
		}
		return 0, fmt.Errorf("sample host cpu: %w", err)
	}
	if len(ts) == 0 {
		return 0, errors.New("sample host cpu: gopsutil returned no aggregate cpu times")
	}
	cur := ts[0]

	h.mu.Lock()
	prev, had := h.prev, h.have
	h.prev, h.have = cur, true
	h.mu.Unlock()

	if !had {
		return 0, ErrWarmingUp
	}
	total0, busy0 := cpuTotalBusy(prev)
	total1, busy1 := cpuTotalBusy(cur)
	dTotal := total1 - total0
	if !(dTotal > 0) || math.IsInf(dTotal, 0) {
		return 0, ErrWarmingUp
	}
	return clampPercent((busy1 - busy0) / dTotal * 100), nil
}

// cpuTotalBusy returns the total and busy seconds in t. Guest and GuestNice
// are left out of the total: Linux already counts them in User and Nice.
func cpuTotalBusy(t cpu.TimesStat) (total, busy float64) {
	total = t.User + t.System + t.Idle + t.Nice + t.Iowait + t.Irq + t.Softirq + t.Steal
	return total, total - t.Idle - t.Iowait
}

// HostMemory samples the host's used memory percentage as gopsutil reports it
// (UsedPercent of mem.VirtualMemory). It keeps no state; create one with
// [NewHostMemory] (the zero value is not usable). It is safe for concurrent
// use.
type HostMemory struct {
	virtual func(ctx context.Context) (*mem.VirtualMemoryStat, error) // injectable for tests
}

// NewHostMemory returns a HostMemory reading the real host through gopsutil.
func NewHostMemory() *HostMemory {
	return &HostMemory{virtual: mem.VirtualMemoryWithContext}
}

// Sample returns the host's used memory as a percentage of its total. now is
// unused.
func (h *HostMemory) Sample(ctx context.Context, now time.Time) (float64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	vm, err := h.virtual(ctx)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return 0, ctxErr
		}
		return 0, fmt.Errorf("sample host memory: %w", err)
	}
	if vm == nil || math.IsNaN(vm.UsedPercent) {
		return 0, errors.New("sample host memory: gopsutil returned no used percent")
	}
	return clampPercent(vm.UsedPercent), nil
}
