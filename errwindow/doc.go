// Package errwindow counts successes, failures and latencies over a rolling
// time window so the controller can compute the error_rate and latency
// signals.
//
// A [Window] is error_rate_window_buckets buckets of
// error_rate_window / buckets each. [Window.Totals] sums the bucket holding
// now plus the buckets-1 before it; older counts never come back, however long
// the window sat idle. Memory is fixed at construction; one mutex guards the
// ring, and [Window.Record] holds it for a few instructions and never
// allocates, so many goroutines (the POST /v1/outcomes handler and in-process
// callers) may record at once. Each bucket also keeps the reports'
// latency counts, in the fixed buckets of [levels.LatencyBounds];
// [Window.RecordLatency] adds them and [Window.Quantile] interpolates a
// quantile from them.
//
// Every method takes the time as an argument and never reads the clock: the
// caller owns time, and tests pass fixed times.
//
// It is not a rate limiter, a general histogram or a metrics exporter, and
// it does not decide anything: turning totals into a percentage, applying
// min_throughput and comparing with thresholds belong to the controller and
// the levels package. It is also not shared between processes: in fleet
// mode (error_rate_scope: fleet) each instance reports its own window's
// counts through etcd, and the controller sums the live instances' reports.
package errwindow
