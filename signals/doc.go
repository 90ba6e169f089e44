// Package signals measures what degraded turns into a degradation level,
// and hands it to the controller as levels.Reading values or single
// numbers.
//
//   - CPU and memory: the whole host, read through gopsutil ([HostCPU],
//     [HostMemory]), or one cgroup v2 directory such as a container's
//     /sys/fs/cgroup ([CgroupCPU], [CgroupMemory]). They return a
//     percentage; CPU samplers compute the load between two calls, so their
//     first call returns [ErrWarmingUp]: warming, not a failure. [CPU] and
//     [Memory] build one from the configured source name.
//   - Pressure stall information: [Pressure] reads /proc/pressure or a
//     cgroup's *.pressure files with one in-tree, fuzzed parser, as three
//     signals (some avg10, with avg60 for recovery). [CheckPressure] names
//     a missing file, for serve to refuse a kernel without PSI.
//   - Custom signals: [Pushed] holds values services push, stale after
//     their ttl; [Queries] evaluates PromQL queries ([Query]) on their
//     intervals with client_golang's API client.
//
// A file that is missing or cannot be parsed is an error that names the
// file, never a silent 0. The package does not decide anything from the
// values, smooth them or export metrics: the controller owns the loop and
// the decisions. cgroup v1 hierarchies are not supported.
package signals
