package signals

import (
	"context"
	"fmt"
	"time"

	"github.com/degraded/degraded/levels"
)

// ErrWarmingUp is returned by a sampler that cannot compute a value yet: a
// delta-based sampler's first call, which only records the baseline, or a call
// whose counters did not advance since the previous one. Callers treat it as
// "signal unavailable for now", not as a sampling failure. Test with
// errors.Is. It is levels.ErrWarmingUp, the sentinel the controller checks.
var ErrWarmingUp = levels.ErrWarmingUp

// Sampler reports one load signal as a percentage in [0, 100].
//
// now is the caller's clock reading for this sample; delta-based samplers
// measure elapsed time between consecutive calls from it, so pass a
// monotonic reading such as time.Now(). It mirrors the interface the
// controller declares for what it consumes; every sampler in this package
// satisfies both.
type Sampler interface {
	Sample(ctx context.Context, now time.Time) (percent float64, err error)
}

var (
	_ Sampler = (*HostCPU)(nil)
	_ Sampler = (*HostMemory)(nil)
	_ Sampler = (*CgroupCPU)(nil)
	_ Sampler = (*CgroupMemory)(nil)
)

// Source names where a signal is read from: the values of the config keys
// signals.cpu.source and signals.memory.source.
type Source string

// The sources a signal can be configured with.
const (
	// SourceHost reads the whole host through gopsutil.
	SourceHost Source = "host"
	// SourceCgroup reads the cgroup v2 directory given by signals.cgroup_path.
	SourceCgroup Source = "cgroup"
	// SourceOff disables the signal: no sampler is built.
	SourceOff Source = "off"
)

// Sources returns every accepted [Source], in the order messages list them.
// The config validation accepts exactly these.
func Sources() []Source {
	return []Source{SourceHost, SourceCgroup, SourceOff}
}

// CPU returns the CPU sampler for source: a [HostCPU] for "host", a
// [CgroupCPU] reading cgroupDir for "cgroup", and a nil Sampler with a nil
// error for "off". Any other source is an error. It does not touch the
// filesystem; a bad cgroupDir shows up as errors from Sample.
func CPU(source, cgroupDir string) (Sampler, error) {
	switch Source(source) {
	case SourceHost:
		return NewHostCPU(), nil
	case SourceCgroup:
		return NewCgroupCPU(cgroupDir), nil
	case SourceOff:
		return nil, nil
	default:
		return nil, unknownSource("cpu", source)
	}
}

// Memory returns the memory sampler for source: a [HostMemory] for "host", a
// [CgroupMemory] reading cgroupDir for "cgroup", and a nil Sampler with a nil
// error for "off". Any other source is an error. It does not touch the
// filesystem; a bad cgroupDir shows up as errors from Sample.
func Memory(source, cgroupDir string) (Sampler, error) {
	switch Source(source) {
	case SourceHost:
		return NewHostMemory(), nil
	case SourceCgroup:
		return NewCgroupMemory(cgroupDir), nil
	case SourceOff:
		return nil, nil
	default:
		return nil, unknownSource("memory", source)
	}
}

func unknownSource(signal, source string) error {
	return fmt.Errorf("signals: unknown %s source %q (want %q, %q or %q)",
		signal, source, SourceHost, SourceCgroup, SourceOff)
}

// clampPercent caps p to [0, 100].
func clampPercent(p float64) float64 {
	return min(max(p, 0), 100)
}
