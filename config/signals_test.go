package config

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/degraded/degraded/levels"
	"github.com/degraded/degraded/signals"
	"github.com/google/go-cmp/cmp"
)

// withSignals configures a pushed signal queue_depth and a query signal
// p95, the custom signals most cases below start from.
func withSignals(c *Config) {
	c.Signals.Custom = []CustomSignal{{Name: "queue_depth", TTL: time.Minute}}
	c.Signals.Prometheus = Prometheus{URL: "http://prometheus:9090", Timeout: 5 * time.Second,
		Queries: []QuerySignal{{Name: "p95", Query: "max(p95)", Interval: 15 * time.Second}}}
}

func TestValidateSignals(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   []string
	}{
		{"custom and query signals", withSignals, nil},
		{"pressure source", func(c *Config) { c.Signals.Pressure.Source = "psi" },
			[]string{"signals.pressure.source: must be one of host, cgroup, off (was psi)"}},
		{"cgroup pressure without a path", func(c *Config) { c.Signals.Pressure.Source = "cgroup"; c.Signals.CgroupPath = "" },
			[]string{`signals.cgroup_path: must be set when a signal source is cgroup (was "")`}},
		{"quantile 1", func(c *Config) { c.Signals.Latency.Quantile = 1 },
			[]string{"signals.latency.quantile: must be in (0, 1) (was 1)"}},
		{"quantile 0", func(c *Config) { c.Signals.Latency.Quantile = 0 },
			[]string{"signals.latency.quantile: must be in (0, 1) (was 0)"}},
		{"quantile NaN", func(c *Config) { c.Signals.Latency.Quantile = math.NaN() },
			[]string{"signals.latency.quantile: must be in (0, 1) (was NaN)"}},
		{"quantile 0.999", func(c *Config) { c.Signals.Latency.Quantile = 0.999 }, nil},
		{"custom names", func(c *Config) {
			c.Signals.Custom = []CustomSignal{
				{Name: "Queue", TTL: time.Minute}, {Name: "cpu", TTL: time.Minute}, {Name: "", TTL: time.Minute},
				{Name: "q", TTL: time.Minute}, {Name: "q", TTL: time.Minute}, {Name: "x" + strings.Repeat("y", 63), TTL: time.Minute},
			}
		}, []string{
			"signals.custom[0].name: must match ^[a-z][a-z0-9_]{0,62}$ (was Queue)",
			"signals.custom[1].name: is the name of a built-in signal (was cpu)",
			`signals.custom[2].name: must match ^[a-z][a-z0-9_]{0,62}$ (was "")`,
			"signals.custom[4].name: duplicates signals.custom[3].name: custom and query signals share one namespace (was q)",
			"signals.custom[5].name: must match ^[a-z][a-z0-9_]{0,62}$ (was x" + strings.Repeat("y", 63) + ")",
		}},
		{"custom ttl", func(c *Config) {
			c.Signals.Custom = []CustomSignal{{Name: "a"}, {Name: "b", TTL: 999 * time.Millisecond}, {Name: "c", TTL: time.Second}}
		}, []string{
			"signals.custom[0].ttl: must be >= 1s (was 0s)",
			"signals.custom[1].ttl: must be >= 1s (was 999ms)",
		}},
		{"a query named like a pushed signal", func(c *Config) {
			withSignals(c)
			c.Signals.Prometheus.Queries[0].Name = "queue_depth"
		}, []string{"signals.prometheus.queries[0].name: duplicates signals.custom[0].name: custom and query signals share one namespace (was queue_depth)"}},
		{"a query named like a built-in signal", func(c *Config) {
			withSignals(c)
			c.Signals.Prometheus.Queries[0].Name = "latency"
		}, []string{"signals.prometheus.queries[0].name: is the name of a built-in signal (was latency)"}},
		{"queries without a url", func(c *Config) { withSignals(c); c.Signals.Prometheus.URL = "" },
			[]string{`signals.prometheus.url: must be set when signals.prometheus.queries lists a query (was "")`}},
		{"a url without queries is still checked", func(c *Config) { c.Signals.Prometheus.URL = "prometheus:9090" },
			[]string{"signals.prometheus.url: must be an http or https URL (was prometheus:9090)"}},
		{"a url without a host", func(c *Config) { withSignals(c); c.Signals.Prometheus.URL = "http:///api" },
			[]string{"signals.prometheus.url: must name a host (was http:///api)"}},
		{"a url's password is not shown", func(c *Config) { withSignals(c); c.Signals.Prometheus.URL = "ftp://user:hunter2@prom" },
			[]string{"signals.prometheus.url: must be an http or https URL (was ftp://user:xxxxx@prom)"}},
		{"a url that does not parse, with credentials", func(c *Config) { withSignals(c); c.Signals.Prometheus.URL = "http://u:hunter2@[::1" },
			[]string{"signals.prometheus.url: must be a URL (was a secret, not shown)"}},
		{"https with credentials and a path", func(c *Config) { withSignals(c); c.Signals.Prometheus.URL = "https://u:p@prom.example/prometheus" }, nil},
		{"timeout", func(c *Config) { withSignals(c); c.Signals.Prometheus.Timeout = 0 },
			[]string{"signals.prometheus.timeout: must be > 0 (was 0s)"}},
		{"query fields", func(c *Config) {
			withSignals(c)
			c.Signals.Prometheus.Queries = append(c.Signals.Prometheus.Queries,
				QuerySignal{Name: "a", Query: " ", Interval: 500 * time.Millisecond},
				QuerySignal{Name: "b", Query: "up", Interval: 5 * time.Second},
				QuerySignal{Name: "c", Query: "up", Interval: 5*time.Second + 1})
		}, []string{
			`signals.prometheus.queries[1].query: must not be empty (was " ")`,
			"signals.prometheus.queries[1].interval: must be >= 1s (was 500ms)",
			"signals.prometheus.queries[2].interval: must be longer than signals.prometheus.timeout (5s) (was 5s)",
		}},
		{"latency and pressure thresholds", func(c *Config) {
			c.Signals.Pressure.Source = "off"
			c.Levels[0].LatencyMS = ptr(0)
			c.Levels[1].LatencyMS = ptr(10001)
			c.Levels[2].CPUPressurePercent = ptr(0)
			c.Levels[3].MemoryPressurePercent = ptr(101)
			c.Levels[4].IOPressurePercent = ptr(math.Inf(1))
		}, []string{
			"levels[0].latency_ms: must be in (0, 10000] (was 0)",
			"levels[1].latency_ms: must be in (0, 10000] (was 10001)",
			"levels[2].cpu_pressure_percent: must be in (0, 100] (was 0)",
			"levels[3].memory_pressure_percent: must be in (0, 100] (was 101)",
			"levels[4].io_pressure_percent: must be in (0, 100] (was +Inf)",
		}},
		{"the largest thresholds", func(c *Config) {
			c.Levels[4].LatencyMS = ptr(10000)
			c.Levels[4].IOPressurePercent = ptr(100)
		}, nil},
		{"every signal's thresholds are non-decreasing", func(c *Config) {
			withSignals(c)
			c.Levels[0].LatencyMS = ptr(500)
			c.Levels[2].LatencyMS = ptr(400)
			c.Levels[1].CPUPressurePercent = ptr(40)
			c.Levels[3].CPUPressurePercent = ptr(30)
			c.Levels[0].Custom = map[string]*float64{"queue_depth": ptr(1000), "p95": ptr(0.5)}
			c.Levels[1].Custom = map[string]*float64{"queue_depth": nil, "p95": ptr(0.5)}
			c.Levels[4].Custom = map[string]*float64{"queue_depth": ptr(999)}
		}, []string{
			"levels[2].latency_ms: must be >= levels[0].latency_ms (500) (was 400)",
			"levels[3].cpu_pressure_percent: must be >= levels[1].cpu_pressure_percent (40) (was 30)",
			"levels[4].custom.queue_depth: must be >= levels[0].custom.queue_depth (1000) (was 999)",
		}},
		{"no suggestion of a name that is wrong itself", func(c *Config) {
			c.Signals.Custom = []CustomSignal{{Name: "Queue_depth", TTL: time.Minute}}
			c.Levels[0].Custom = map[string]*float64{"queue_depth": ptr(1)}
		}, []string{
			"signals.custom[0].name: must match ^[a-z][a-z0-9_]{0,62}$ (was Queue_depth)",
			"levels[0].custom.queue_depth: names no signal of signals.custom or signals.prometheus.queries (was 1)",
		}},
		{"custom thresholds", func(c *Config) {
			withSignals(c)
			c.Levels[0].Custom = map[string]*float64{"queue_depth": ptr(0), "p95": ptr(-1)}
			c.Levels[1].Custom = map[string]*float64{"queue_depth": ptr(math.NaN())}
			c.Levels[2].Custom = map[string]*float64{"queue_depth": ptr(math.Inf(1)), "queue_dept": ptr(5), "cpu": ptr(5), "nothing_like_it": nil}
		}, []string{
			"levels[0].custom.p95: must be a finite number >= 0 (was -1)",
			"levels[1].custom.queue_depth: must be a finite number >= 0 (was NaN)",
			"levels[2].custom.queue_depth: must be a finite number >= 0 (was +Inf)",
			"levels[2].custom.cpu: is a built-in signal: its threshold is levels[2].cpu_percent (was 5)",
			"levels[2].custom.nothing_like_it: names no signal of signals.custom or signals.prometheus.queries (was null)",
			"levels[2].custom.queue_dept: names no signal of signals.custom or signals.prometheus.queries; did you mean queue_depth? (was 5)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(c)
			_, err := c.Validate()
			if diff := cmp.Diff(tt.want, problems(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if err == nil {
				if _, err := c.Table(); err != nil {
					t.Errorf("valid config, but Table() = %v", err)
				}
			}
		})
	}
}

// writePressure writes the three cgroup pressure files into a new
// directory and returns it.
func writePressure(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, res := range []string{"cpu", "memory", "io"} {
		body := "some avg10=1.00 avg60=2.00 avg300=3.00 total=100\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
		if err := os.WriteFile(filepath.Join(dir, res+".pressure"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestValidateSignalWarnings(t *testing.T) {
	psi := writePressure(t)
	noPSI := t.TempDir()
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   []string
	}{
		{"defaults", func(*Config) {}, nil},
		{"cgroup pressure files present", func(c *Config) {
			c.Signals.Pressure.Source, c.Signals.CgroupPath = "cgroup", psi
			c.Levels[2].CPUPressurePercent = ptr(40)
		}, nil},
		{"cgroup pressure files missing", func(c *Config) {
			c.Signals.Pressure.Source, c.Signals.CgroupPath = "cgroup", noPSI
		}, []string{
			"signals.pressure.source: cannot be read on this machine, so serve would not start here: cpu pressure: " +
				filepath.Join(noPSI, "cpu.pressure") + " does not exist (a kernel without PSI, or psi=0 on its command line, or not a cgroup v2 directory): file does not exist (was cgroup)",
		}},
		{"cpu off with thresholds", func(c *Config) { c.Signals.CPU.Source = "off" }, []string{
			"cpu: has thresholds but its source is off: it will never trigger (levels[0].cpu_percent is set, signals.cpu.source is off)",
		}},
		{"cpu and memory off without thresholds", func(c *Config) {
			c.Signals.CPU.Source, c.Signals.Memory.Source = "off", "off"
			for i := range c.Levels {
				c.Levels[i].CPUPercent, c.Levels[i].MemoryPercent = nil, nil
			}
		}, nil},
		{"pressure off with thresholds", func(c *Config) {
			c.Levels[3].IOPressurePercent = ptr(50)
			c.Levels[1].CPUPressurePercent = ptr(20)
			c.Levels[2].CPUPressurePercent = ptr(30)
		}, []string{
			"cpu_pressure: has thresholds but its source is off: it will never trigger (levels[1].cpu_pressure_percent is set, signals.pressure.source is off)",
			"io_pressure: has thresholds but its source is off: it will never trigger (levels[3].io_pressure_percent is set, signals.pressure.source is off)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(c)
			warnings, err := c.Validate()
			if err != nil {
				t.Fatalf("Validate: %v, want only warnings", err)
			}
			if w := c.PressureWarning(signals.CheckPressure); w != "" {
				warnings = append([]string{w}, warnings...)
			}
			if diff := cmp.Diff(tt.want, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTableHasTheCustomSignals(t *testing.T) {
	c := Default()
	withSignals(c)
	c.Signals.Custom = append(c.Signals.Custom, CustomSignal{Name: "backlog", TTL: time.Minute})
	c.Signals.Latency.Quantile = 0.999
	c.Levels[2].LatencyMS = ptr(500)
	c.Levels[2].Custom = map[string]*float64{"queue_depth": ptr(1000), "p95": nil}
	c.Levels[3].Custom = map[string]*float64{"p95": ptr(0.8)}
	if _, err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	tab, err := c.Table()
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]levels.Signal(nil), levels.AllSignals...), "queue_depth", "backlog", "p95")
	if diff := cmp.Diff(want, tab.Signals()); diff != "" {
		t.Errorf("signals (-want +got):\n%s", diff)
	}
	if got := tab.LatencyQuantile(); got != 0.999 {
		t.Errorf("LatencyQuantile() = %v, want 0.999", got)
	}
	wantMajor := levels.Thresholds{levels.ErrorRate: 10, levels.CPU: 80, levels.Memory: 80, levels.Latency: 500, "queue_depth": 1000}
	if diff := cmp.Diff(wantMajor, tab.Level(3).Thresholds); diff != "" {
		t.Errorf("Major thresholds (-want +got):\n%s", diff)
	}
	if th, ok := tab.Level(4).Threshold("p95"); !ok || th != 0.8 {
		t.Errorf("Severe p95 threshold = %v, %v; want 0.8", th, ok)
	}
	if !tab.Custom("p95") || !tab.Custom("backlog") {
		t.Errorf("p95 and backlog are not the table's custom signals")
	}
}

func TestQueriedNames(t *testing.T) {
	c := Default()
	if len(c.QueriedNames()) != 0 {
		t.Errorf("defaults: queried %v, want none", c.QueriedNames())
	}
	withSignals(c)
	c.Signals.Prometheus.Queries = append(c.Signals.Prometheus.Queries, QuerySignal{Name: "errors", Query: "sum(rate(e[1m]))", Interval: time.Minute})
	t.Run("QueriedNames", func(t *testing.T) {
		if diff := cmp.Diff([]levels.Signal{"p95", "errors"}, c.QueriedNames()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}
