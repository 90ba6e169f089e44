// Package api is degraded's HTTP surface: the JSON endpoints, long-poll and
// Server-Sent Events for the level, the admission check for proxies, the
// outcome reports (with the admission accounts the graduated law reads),
// pushed signals, overrides and fleet overrides, reload, the timeline,
// Prometheus metrics and the dashboard.
//
// It reads and commands a *controller.Controller ([Deps].Controller) and
// owns no degradation logic of its own: a handler hands a request to the
// controller's goroutine and waits for its reply, never evaluating a rule
// itself.
//
// [NewServer] builds a [Server]: [Server.Handler] serves the requests, and
// [Server.Run] owns the goroutines that serve the hijacked event streams,
// ending every stream and long-poll when its context ends. The API does
// not listen: internal/daemon owns the listener and the http.Server (its
// timeouts and shutdown) and wraps the listener in [LimitListener]
// (max_connections at accept) and, with TLS, [TLSListener], whose streams
// the hub serves as it serves plain ones.
package api
