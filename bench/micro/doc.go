// Package micro holds the per-request micro-benchmarks of bench/run.sh:
// the admission check (client.Allow against aegis BBR, a failsafe-go
// bulkhead and a gobreaker two-step breaker, also with a partial band),
// the gRPC unary interceptor against failsafe-go's failsafegrpc, outcome
// recording (errwindow.Window.Record and RecordLatency against a
// Prometheus counter and a bare atomic add), client.Observe, and the
// middleware, with and without priority propagation, against the bare
// handler. It has no code of its own, only benchmarks; run them with
//
//	go test -run '^$' -bench . -benchmem ./micro
//
// It is not part of the daemon's module, so the peers measured here never
// enter the daemon's dependencies.
package micro
