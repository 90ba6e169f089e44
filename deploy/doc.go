// Package deploy holds no code. Its directory is the operator's kit: a
// systemd unit, a Dockerfile, a Kubernetes sidecar example, nginx and
// Caddy examples and Prometheus alerts with a Grafana dashboard. The package's
// tests check that kit against the daemon itself: the nginx and Caddy
// examples run in the real proxies and shed by priority, the example configurations pass
// validation, and the alerts and dashboard name only metrics the daemon
// exports.
package deploy
