// Package client is the Go client of the degraded daemon: it follows the
// published degradation level and lets a service ask, per request, "may I
// serve priority P?" in a few nanoseconds, from memory.
//
// Create a Client with New, keep it current with Run, and ask Allow and
// Feature on the hot path; both read an immutable snapshot behind an
// atomic pointer, never lock and never allocate. Record counts outcomes
// towards the daemon's error rate, Observe counts an outcome with its
// latency, and Run flushes them in batches. The Middleware sheds and
// observes for an http.Handler, and Do picks a degraded fallback for a
// single operation. Admit is Allow that also counts the decision for the
// daemon's admission report and returns a Ticket that records the
// outcome: the Middleware, Do and the degradedgrpc module's interceptors
// are built on it. WithPriority, PriorityFrom, WithPropagation and
// Transport carry a request's priority to the services it calls.
//
//	c, err := client.New("http://127.0.0.1:8470", client.WithToken(reportToken))
//	if err != nil { ... }
//	go c.Run(ctx)
//	handler = client.Middleware(c, client.PriorityFromHeader("X-Priority", 50))(handler)
//
// When the daemon is unreachable, before the first state and after
// WithStaleAfter without contact, the FailMode decides (FailOpen by
// default): the daemon is an advisor, never a dependency.
//
// The client also has the operator calls the degraded CLI is built on:
// Fetch, Levels, SetOverride, ClearOverride and Report.
//
// This package imports nothing of the daemon; it is what other teams vendor.
// It does not decide levels, sample resources, or retry the service's own
// work.
package client
