// Package signals samples the CPU and memory load that degraded turns into a
// degradation level.
//
// It offers two sources for each signal: the whole host, read through
// gopsutil ([HostCPU], [HostMemory]), and one cgroup v2 directory such as a
// container's /sys/fs/cgroup ([CgroupCPU], [CgroupMemory]). Every sampler
// returns a percentage in [0, 100] from Sample(ctx, now). CPU samplers compute
// the load between two consecutive calls, so their first call returns
// [ErrWarmingUp] instead of a value; callers treat that as "unavailable", not
// as a failure. A file that is missing or cannot be parsed is an error that
// names the file, never a silent 0. [CPU] and [Memory] build a sampler from the
// configured source name.
//
// The package is not a monitoring agent: it does not run a loop, keep history,
// smooth or average values, export metrics, or decide anything from the
// values. The controller owns the loop and the decisions. cgroup v1
// hierarchies and pressure-stall (PSI) files are not supported.
package signals
