package config

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to Load as a config file: whatever the
// file holds, Load returns a config or an error, never panics, and a config
// it returns builds a level table.
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
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "fuzz.yaml")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, _, err := Load(LoadOptions{Path: p})
		if err != nil {
			return
		}
		if _, err := c.Table(); err != nil {
			t.Errorf("valid config, but Table() = %v", err)
		}
	})
}
