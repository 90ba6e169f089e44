package main

import (
	"fmt"
	"strings"
)

// writeMiddleware writes section 10: what a service pays per request for
// the client's middleware and for Observe.
func (r *report) writeMiddleware(b *strings.Builder) {
	bare, _, ok := r.med("BenchmarkMiddleware/bare")
	if !ok {
		return
	}
	busy, busyAllocs, _ := r.med("BenchmarkMiddleware/middleware")
	all, allAllocs, _ := r.med("BenchmarkMiddleware/middleware,_every_request_timed")
	clock, _, _ := r.med("BenchmarkMiddleware/clock")
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("\n## 10. The middleware and `Observe` per request\n\n")
	p("`go test -bench 'Middleware|Observe' ./micro` (bench/micro/observe_test.go), median of %d runs. The\n", r.microRun)
	p("bare handler answers 204; the same handler behind `client.Middleware` with\n")
	p("`PriorityFromHeader(\"X-Priority\", 50)`, on a client following a real daemon pinned at Major, serves\n")
	p("requests of priority 80 (admitted). A busy service's middleware (the client reports every 10 ms\n")
	p("here, so it has learnt the benchmark's rate) counts every outcome and times a random sample of at\n")
	p("least 1,024 requests a second; under about 2,048 requests a second every request is timed. The\n")
	p("clock row is the two monotonic clock reads that time one request, alone.\n\n")
	p("| handler | ns/op | over bare | allocs/op |\n|---|---:|---:|---:|\n")
	p("| bare | %.2f | | 0 |\n", bare)
	p("| middleware, busy service (sampled timing) | %.2f | +%.1f ns | %.0f |\n", busy, busy-bare, busyAllocs)
	p("| middleware, every request timed | %.2f | +%.1f ns | %.0f |\n", all, all-bare, allAllocs)
	p("| clock: two monotonic reads alone | %.2f | | 0 |\n", clock)
	r.verdicts = append(r.verdicts, verdict{
		"middleware ≤ 50 ns and 0 allocs over the bare handler",
		fmt.Sprintf("busy service: %.1f vs %.1f ns (+%.1f ns), %.0f allocs; every request timed: +%.1f ns, of which the two clock reads are %.1f ns", busy, bare, busy-bare, busyAllocs, all-bare, clock),
		yes(busy-bare <= 50 && busyAllocs == 0),
	})
	s, sAllocs, ok := r.med("BenchmarkObserve/serial")
	if !ok {
		return
	}
	q, qAllocs, _ := r.med("BenchmarkObserve/parallel")
	p("\n| `client.Observe` | serial ns/op | parallel ns/op | allocs/op |\n|---|---:|---:|---:|\n")
	p("| one outcome and its latency bucket | %.2f | %.2f | %.0f |\n", s, q, max(sAllocs, qAllocs))
	r.verdicts = append(r.verdicts, verdict{
		"`client.Observe` 0 allocs",
		fmt.Sprintf("serial %.1f ns, parallel %.1f ns, %.0f allocs", s, q, max(sAllocs, qAllocs)),
		yes(sAllocs == 0 && qAllocs == 0),
	})
}
