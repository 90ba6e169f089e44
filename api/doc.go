// Package api is degraded's HTTP surface: the JSON endpoints, long-poll and
// Server-Sent Events for the level, the admission check for proxies, the
// outcome reports (with the admission accounts the graduated law reads),
// pushed signals, overrides and fleet overrides, reload, the timeline,
// Prometheus metrics and the dashboard.
//
// It reads and commands a *controller.Controller ([Deps].Controller) and
// owns no degradation logic of its own: a handler hands a request to the
// controller's goroutine and waits for its reply, never evaluating a rule
// itself. Transport concerns (listening, TLS, timeouts, connection
// limits at accept) belong to internal/daemon; NewServer returns a plain
// http.Handler.
package api
