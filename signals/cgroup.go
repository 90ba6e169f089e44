package signals

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/shirou/gopsutil/v4/mem"
)

// CgroupCPU samples the CPU use of one cgroup v2 directory between two
// consecutive calls to Sample, as a percentage of the CPUs the cgroup may
// use.
//
// Usage comes from usage_usec in cpu.stat. The CPUs the cgroup may use are
// quota/period from cpu.max, capped at the number of CPUs the process can
// run on (a quota above the machine cannot be used); a quota of "max", or no
// cpu.max at all (the root cgroup), means those CPUs. cpu.max is re-read on
// every call, so a changed limit takes effect at once. The result is capped
// at 100: a burst above the quota reads as 100%.
//
// The first call records a baseline and returns [ErrWarmingUp], as does a
// call whose now is not after the previous one or whose usage went
// backwards (the cgroup was recreated). Create one with [NewCgroupCPU]; the
// zero value is not usable. It is safe for concurrent use, though concurrent
// callers split the intervals between them.
type CgroupCPU struct {
	dir    string
	numCPU func() int // injectable for tests

	mu        sync.Mutex
	prevUsage uint64 // usage_usec at prevAt
	prevAt    time.Time
	have      bool
}

// NewCgroupCPU returns a CgroupCPU reading the cgroup v2 directory dir, such
// as /sys/fs/cgroup inside a container. It does not touch the filesystem.
func NewCgroupCPU(dir string) *CgroupCPU {
	return &CgroupCPU{dir: dir, numCPU: runtime.NumCPU}
}

// Sample returns the cgroup's CPU use since the previous call as a
// percentage of its CPU limit. The elapsed time is now minus the previous
// call's now, so pass monotonic readings such as time.Now().
func (c *CgroupCPU) Sample(ctx context.Context, now time.Time) (float64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	usage, err := readKeyedUint(filepath.Join(c.dir, fileCPUStat), "usage_usec")
	if err != nil {
		return 0, fmt.Errorf("sample cgroup cpu: %w", err)
	}
	cpus, err := c.limitCPUs()
	if err != nil {
		return 0, fmt.Errorf("sample cgroup cpu: %w", err)
	}

	c.mu.Lock()
	prevUsage, prevAt, had := c.prevUsage, c.prevAt, c.have
	c.prevUsage, c.prevAt, c.have = usage, now, true
	c.mu.Unlock()

	elapsed := now.Sub(prevAt)
	if !had || elapsed <= 0 || usage < prevUsage {
		return 0, ErrWarmingUp
	}
	usedUsec := float64(usage - prevUsage)
	availUsec := float64(elapsed.Microseconds()) * cpus
	if availUsec <= 0 {
		return 0, ErrWarmingUp
	}
	return clampPercent(usedUsec / availUsec * 100), nil
}

// limitCPUs returns how many CPUs the cgroup may use.
func (c *CgroupCPU) limitCPUs() (float64, error) {
	online := float64(c.numCPU())
	if online < 1 {
		online = 1
	}
	quota, unlimited, err := readCPUMax(filepath.Join(c.dir, fileCPUMax))
	if err != nil {
		return 0, err
	}
	if unlimited {
		return online, nil
	}
	return min(quota, online), nil
}

// CgroupMemory samples the memory use of one cgroup v2 directory as a
// percentage of its limit: (memory.current − inactive_file from memory.stat)
// / memory.max. Inactive file cache is left out because the kernel reclaims
// it before it runs out of memory. When memory.max is "max" or absent (the
// root cgroup) the limit is the host's total memory.
//
// It keeps no state; create one with [NewCgroupMemory] (the zero value is not
// usable). It is safe for concurrent use.
type CgroupMemory struct {
	dir       string
	hostTotal func(ctx context.Context) (uint64, error) // injectable for tests
}

// NewCgroupMemory returns a CgroupMemory reading the cgroup v2 directory dir,
// such as /sys/fs/cgroup inside a container. It does not touch the
// filesystem.
func NewCgroupMemory(dir string) *CgroupMemory {
	return &CgroupMemory{dir: dir, hostTotal: hostTotalMemory}
}

// Sample returns the cgroup's working-set memory as a percentage of its
// limit, capped at 100. now is unused.
func (c *CgroupMemory) Sample(ctx context.Context, now time.Time) (float64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	current, err := readUint(filepath.Join(c.dir, fileMemoryCurrent))
	if err != nil {
		return 0, fmt.Errorf("sample cgroup memory: %w", err)
	}
	inactive, err := readKeyedUint(filepath.Join(c.dir, fileMemoryStat), "inactive_file")
	if err != nil {
		return 0, fmt.Errorf("sample cgroup memory: %w", err)
	}
	limit, unlimited, err := readMemoryMax(filepath.Join(c.dir, fileMemoryMax))
	if err != nil {
		return 0, fmt.Errorf("sample cgroup memory: %w", err)
	}
	if unlimited {
		limit, err = c.hostTotal(ctx)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return 0, ctxErr
			}
			return 0, fmt.Errorf("sample cgroup memory: memory.max is unlimited, host total: %w", err)
		}
		if limit == 0 {
			return 0, errors.New("sample cgroup memory: memory.max is unlimited and host total memory is 0")
		}
	}
	var used uint64
	if current > inactive {
		used = current - inactive
	}
	return clampPercent(float64(used) / float64(limit) * 100), nil
}

func hostTotalMemory(ctx context.Context) (uint64, error) {
	vm, err := mem.VirtualMemoryWithContext(ctx)
	if err != nil {
		return 0, err
	}
	return vm.Total, nil
}
