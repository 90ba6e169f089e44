// Package deploy holds no code. Its directory is the operator's kit: a
// systemd unit, a Dockerfile, a Kubernetes sidecar example, an nginx
// example and Prometheus alerts with a Grafana dashboard. The package's
// tests check that kit against the daemon itself: the nginx example runs
// in real nginx and sheds by priority, the example configurations pass
// validation, and the alerts and dashboard name only metrics the daemon
// exports.
package deploy
