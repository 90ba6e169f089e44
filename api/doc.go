// Package api is degraded's HTTP surface: the JSON endpoints, long-poll and
// Server-Sent Events for the level, the admission check for proxies, the
// outcome reports, overrides, reload, Prometheus metrics and the dashboard.
//
// It reads and commands a *controller.Controller ([Deps].Controller) and
// owns no degradation logic of its own. Transport concerns
// (listening, TLS, timeouts) belong to cmd/degraded; NewServer returns a
// plain http.Handler.
package api
