package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to Load as a config file: whatever the
// file holds, Load returns a config or an error, never panics, a reload
// accepts no more than a load, and a config it returns builds a level
// table and passes protected mode on its own listen address.
func FuzzLoad(f *testing.F) {
	f.Add(DefaultYAML())
	f.Add([]byte(""))
	f.Add([]byte("listen: 0.0.0.0:8470\nauth: {token: a, report_token: b}\nhealth_check_interval: 5s\n"))
	f.Add([]byte("health_check_intreval: 5s\nhysteresis: 1\nescalate_after: 0\n"))
	f.Add([]byte("levels:\n  - {name: Busy, priority_threshold: 20, cpu_percent: 75, error_rate_percent: null, disable: [search]}\n  - {name: Shed, priority_threshold: 60, cpu_percent: 90}\n"))
	f.Add([]byte("levels: [{name: A, cpu_percent: 150}, 3, [x], {? [a] : b}]\n"))
	f.Add([]byte("signals: {cpu: {source: cgroup}, memory: off}\nsse: {heartbeat: soon, max_subscribers: 1e40}\n"))
	f.Add([]byte("tls: {cert_file: /nonexistent, key_file: \"\"}\nlog: {level: [debug]}\n1: 2\n"))
	f.Add([]byte("&a [*a]"))
	f.Add([]byte("levels: &l\n  - name: A\n    disable: *l\n"))
	f.Add([]byte("blind_hold: 1m\nmax_connections: 64\nallowed_hosts: [a.example, 10.0.0.1, \"*\", \"h:1\", \"\"]\nsse: {write_timeout: 1s}\n"))
	f.Add([]byte("blind_hold: -1s\nmax_connections: -1\nallowed_hosts: a.example\nsse: {write_timeout: 1ms, heartbeat: 1ns}\nmax_override_ttl: 1ns\n"))
	f.Add([]byte("auth: {token: \"a \", report_token: a}\nlevels: [{name: Major}, {name: major}, {name: normal}]\n"))
	f.Add([]byte("# comments only\n---\n"))
	f.Add([]byte("signals:\n  pressure: {source: cgroup}\n  latency: {quantile: 0.999}\n  custom: [{name: queue_depth, ttl: 1m}]\n" +
		"  prometheus: {url: http://p:9090, timeout: 2s, queries: [{name: p95, query: max(p95), interval: 15s}]}\n" +
		"levels:\n  - {name: A, latency_ms: 500, cpu_pressure_percent: 20, custom: {queue_depth: 1000, p95: null}}\n" +
		"  - {name: B, io_pressure_percent: 60, memory_pressure_percent: 40, custom: {p95: 0.8}}\n"))
	f.Add([]byte("signals:\n  latency: {quantile: 1}\n  custom: [{name: Cpu}, {name: q, ttl: 1s}, null, 3]\n" +
		"  prometheus: {url: \"ftp://u:p@x\", timeout: 0s, queries: [{name: q, query: \"\", interval: 1s}]}\n" +
		"levels: [{name: A, latency_ms: 10001, custom: {q: -1, a.b: 1, cpu: 5, r: .nan}}, {name: B, custom: {q: .inf}}, {name: C, custom: 5}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "fuzz.yaml")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, _, err := Load(LoadOptions{Path: p})
		if rc, _, rerr := Load(LoadOptions{Path: p, Reload: true}); rerr == nil && (err != nil || !reflect.DeepEqual(c, rc)) {
			t.Errorf("a reload accepted what a load did not give: load error %v", err)
		}
		if err != nil {
			return
		}
		if _, err := c.Table(); err != nil {
			t.Errorf("valid config, but Table() = %v", err)
		}
		if err := CheckProtected(c, c.Listen); err != nil {
			t.Errorf("valid config, but bound to its own listen: %v", err)
		}
	})
}
