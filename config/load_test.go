package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

func ptr(f float64) *float64 { return &f }

// writeConfig writes a YAML file into a temp dir and returns its path.
func writeConfig(t testing.TB, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "degraded.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// problems returns the problem lines of a *ValidationError, failing the
// test on any other error.
func problems(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error is %T (%v), want *ValidationError", err, err)
	}
	return ve.Problems
}

func TestDefaultsMatchDesign(t *testing.T) {
	want := &Config{
		Listen:                 "127.0.0.1:8470",
		DataDir:                "data",
		HealthCheckInterval:    30 * time.Second,
		MinimumLevelDuration:   time.Minute,
		EscalationDelay:        0,
		EscalateAfter:          1,
		ErrorRateWindow:        time.Minute,
		ErrorRateWindowBuckets: 6,
		MinThroughput:          10,
		Hysteresis:             0.1,
		EnableAutoAdjustment:   true,
		MaxOverrideTTL:         24 * time.Hour,
		BlindHold:              5 * time.Minute,
		RecoveryJitter:         0.1,
		Mode:                   "enforce",
		MaxConnections:         0,
		AllowedHosts:           []string{},
		Signals: Signals{
			CPU:        SignalSource{Source: "host"},
			Memory:     SignalSource{Source: "host"},
			Pressure:   SignalSource{Source: "off"},
			Latency:    Latency{Quantile: 0.99},
			CgroupPath: "/sys/fs/cgroup",
			Custom:     []CustomSignal{},
			Prometheus: Prometheus{Timeout: 5 * time.Second, Queries: []QuerySignal{}},
		},
		Auth: Auth{Operators: []Operator{}},
		SSE:  SSE{Heartbeat: 15 * time.Second, MaxSubscribers: 20000, WriteTimeout: 10 * time.Second},
		Log:  Log{Level: "info", Format: "text"},

		Record: Record{Enabled: true, Retention: 168 * time.Hour, MaxBytes: 256 << 20},

		Admission: Admission{Mode: "graduated"},

		Fleet: Fleet{Prefix: "/degraded/", ErrorRateScope: "local",
			Etcd: Etcd{Endpoints: []string{"http://127.0.0.1:2379"}, DialTimeout: 5 * time.Second}},
		Levels: []Level{
			{Name: "Minor", PriorityThreshold: 10, ErrorRatePercent: ptr(1), CPUPercent: ptr(60), MemoryPercent: ptr(60), Disable: []string{}},
			{Name: "Moderate", PriorityThreshold: 30, ErrorRatePercent: ptr(5), CPUPercent: ptr(70), MemoryPercent: ptr(70), Disable: []string{}},
			{Name: "Major", PriorityThreshold: 50, ErrorRatePercent: ptr(10), CPUPercent: ptr(80), MemoryPercent: ptr(80), Disable: []string{}},
			{Name: "Severe", PriorityThreshold: 70, ErrorRatePercent: ptr(25), CPUPercent: ptr(90), MemoryPercent: ptr(90), Disable: []string{}},
			{Name: "Emergency", PriorityThreshold: 100, ErrorRatePercent: ptr(50), CPUPercent: ptr(95), MemoryPercent: ptr(95), Disable: []string{}},
		},
	}
	t.Run("Default", func(t *testing.T) {
		if diff := cmp.Diff(want, Default()); diff != "" {
			t.Errorf("Default() mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("Load without options", func(t *testing.T) {
		got, warnings, err := Load(LoadOptions{})
		if err != nil || len(warnings) != 0 {
			t.Fatalf("Load() warnings %q, error %v; want none", warnings, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Load() mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("table", func(t *testing.T) {
		tab, err := Default().Table()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, l := range tab.Levels() {
			names = append(names, l.Name)
		}
		if diff := cmp.Diff([]string{"Normal", "Minor", "Moderate", "Major", "Severe", "Emergency"}, names); diff != "" {
			t.Errorf("table names (-want +got):\n%s", diff)
		}
	})
}

func TestLoadLayers(t *testing.T) {
	file := writeConfig(t, `
listen: 127.0.0.2:9000
health_check_interval: 10s
error_rate_window: 20s
log: {level: debug}
`)
	newFlags := func(args ...string) *pflag.FlagSet {
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		fs.String("config", "", "config file (names no key: ignored)")
		fs.String("listen", "", "listen address")
		fs.String("data-dir", "", "data directory")
		fs.Duration("health-check-interval", 0, "interval")
		fs.String("log.level", "", "log level")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return fs
	}
	tests := []struct {
		name    string
		opts    LoadOptions
		want    func(c *Config)
		wantErr bool
	}{
		{
			name: "file overrides defaults, keeps the rest",
			opts: LoadOptions{Path: file},
			want: func(c *Config) {
				c.Listen = "127.0.0.2:9000"
				c.HealthCheckInterval = 10 * time.Second
				c.ErrorRateWindow = 20 * time.Second
				c.Log.Level = "debug"
			},
		},
		{
			name: "env overrides file, strings decode to their types",
			opts: LoadOptions{Path: file, Environ: []string{
				"DEGRADED_LISTEN=127.0.0.3:9001",
				"DEGRADED_HEALTH_CHECK_INTERVAL=5s",
				"DEGRADED_ESCALATE_AFTER=3",
				"DEGRADED_MIN_THROUGHPUT=100",
				"DEGRADED_HYSTERESIS=0.25",
				"DEGRADED_ENABLE_AUTO_ADJUSTMENT=false",
				"DEGRADED_AUTH__REPORT_TOKEN=rep",
				"DEGRADED_SSE__HEARTBEAT=1m",
				"DEGRADED_SIGNALS__CPU__SOURCE=off",
				"PATH=/usr/bin",
			}},
			want: func(c *Config) {
				c.Listen = "127.0.0.3:9001"
				c.HealthCheckInterval = 5 * time.Second
				c.ErrorRateWindow = 20 * time.Second
				c.Log.Level = "debug"
				c.EscalateAfter = 3
				c.MinThroughput = 100
				c.Hysteresis = 0.25
				c.EnableAutoAdjustment = false
				c.Auth.ReportToken = "rep"
				c.SSE.Heartbeat = time.Minute
				c.Signals.CPU.Source = "off"
			},
		},
		{
			name: "variables that name no key are ignored",
			opts: LoadOptions{Environ: []string{
				"DEGRADED_ADDR=http://example:8470",
				"DEGRADED_TOKEN=secret",
				"DEGRADED_LEVELS=nonsense",
				"DEGRADED_AUTH=nonsense",
				"DEGRADED_LOG__COLOUR=yes",
				"DEGRADED_=x",
				"NOEQUALS",
			}},
			want: func(*Config) {},
		},
		{
			name: "new keys from the file",
			opts: LoadOptions{Path: writeConfig(t, "blind_hold: 90s\nmax_connections: 900\nallowed_hosts: [degraded.internal, 10.0.0.7]\nsse: {write_timeout: 3s}\n")},
			want: func(c *Config) {
				c.BlindHold = 90 * time.Second
				c.MaxConnections = 900
				c.AllowedHosts = []string{"degraded.internal", "10.0.0.7"}
				c.SSE.WriteTimeout = 3 * time.Second
			},
		},
		{
			name: "mode from the file and from the environment",
			opts: LoadOptions{Path: writeConfig(t, "mode: enforce\n"), Environ: []string{"DEGRADED_MODE=shadow"}},
			want: func(c *Config) { c.Mode = "shadow" },
		},
		{
			name: "new keys from the environment, a list comma-separated",
			opts: LoadOptions{Environ: []string{
				"DEGRADED_BLIND_HOLD=0s",
				"DEGRADED_MAX_CONNECTIONS=100",
				"DEGRADED_ALLOWED_HOSTS=degraded.internal, gw.example.com",
				"DEGRADED_SSE__WRITE_TIMEOUT=1m",
			}},
			want: func(c *Config) {
				c.BlindHold = 0
				c.MaxConnections = 100
				c.AllowedHosts = []string{"degraded.internal", "gw.example.com"}
				c.SSE.WriteTimeout = time.Minute
			},
		},
		{
			name: "the signals of issue 12 from the file",
			opts: LoadOptions{Path: writeConfig(t, `
signals:
  pressure: {source: cgroup}
  latency: {quantile: 0.999}
  custom: [{name: queue_depth, ttl: 1m}]
  prometheus:
    url: http://prometheus:9090
    timeout: 2s
    queries: [{name: p95, query: 'max(p95{app="shop"})', interval: 15s}]
levels:
  - {name: Busy, priority_threshold: 10, latency_ms: 500, cpu_pressure_percent: 20, custom: {queue_depth: 1000, p95: null}}
  - {name: Shed, priority_threshold: 50, io_pressure_percent: 60, memory_pressure_percent: 40, custom: {p95: 0.8}}
`)},
			want: func(c *Config) {
				c.Signals.Pressure.Source = "cgroup"
				c.Signals.Latency.Quantile = 0.999
				c.Signals.Custom = []CustomSignal{{Name: "queue_depth", TTL: time.Minute}}
				c.Signals.Prometheus = Prometheus{URL: "http://prometheus:9090", Timeout: 2 * time.Second,
					Queries: []QuerySignal{{Name: "p95", Query: `max(p95{app="shop"})`, Interval: 15 * time.Second}}}
				c.Levels = []Level{
					{Name: "Busy", PriorityThreshold: 10, LatencyMS: ptr(500), CPUPressurePercent: ptr(20),
						Custom: map[string]*float64{"queue_depth": ptr(1000), "p95": nil}},
					{Name: "Shed", PriorityThreshold: 50, IOPressurePercent: ptr(60), MemoryPressurePercent: ptr(40),
						Custom: map[string]*float64{"p95": ptr(0.8)}},
				}
			},
		},
		{
			name: "the signals of issue 12 from the environment",
			opts: LoadOptions{Environ: []string{
				"DEGRADED_SIGNALS__PRESSURE__SOURCE=host",
				"DEGRADED_SIGNALS__LATENCY__QUANTILE=0.95",
				"DEGRADED_SIGNALS__PROMETHEUS__URL=https://prom.example",
				"DEGRADED_SIGNALS__PROMETHEUS__TIMEOUT=3s",
			}},
			want: func(c *Config) {
				c.Signals.Pressure.Source = "host"
				c.Signals.Latency.Quantile = 0.95
				c.Signals.Prometheus.URL = "https://prom.example"
				c.Signals.Prometheus.Timeout = 3 * time.Second
			},
		},
		{
			name: "an empty list from the environment",
			opts: LoadOptions{
				Path:    writeConfig(t, "allowed_hosts: [a.example]\n"),
				Environ: []string{"DEGRADED_ALLOWED_HOSTS="},
			},
			want: func(*Config) {},
		},
		{
			name: "changed flags override env, unchanged and unknown flags do not",
			opts: LoadOptions{
				Path:    file,
				Environ: []string{"DEGRADED_LISTEN=127.0.0.3:9001", "DEGRADED_DATA_DIR=/var/lib/x"},
				Flags:   newFlags("--listen", "127.0.0.4:9002", "--config", "x.yaml", "--health-check-interval", "2s", "--log.level", "warn"),
			},
			want: func(c *Config) {
				c.Listen = "127.0.0.4:9002"
				c.DataDir = "/var/lib/x"
				c.HealthCheckInterval = 2 * time.Second
				c.ErrorRateWindow = 20 * time.Second
				c.Log.Level = "warn"
			},
		},
		{
			name: "null in a file keeps the default",
			opts: LoadOptions{Path: writeConfig(t, "listen:\ntls:\nlevels:\nsignals: {cpu: }\n")},
			want: func(*Config) {},
		},
		{
			name: "empty file is the defaults",
			opts: LoadOptions{Path: writeConfig(t, "")},
			want: func(*Config) {},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := Default()
			tt.want(want)
			got, _, err := Load(tt.opts)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Load mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadLevels(t *testing.T) {
	t.Run("a file's list replaces the default table", func(t *testing.T) {
		got, _, err := Load(LoadOptions{Path: writeConfig(t, `
levels:
  - name: Busy
    priority_threshold: 20
    cpu_percent: 75
    disable: [recommendations]
  - name: Shedding
    priority_threshold: 60
    error_rate_percent: null
    cpu_percent: 90
    memory_percent: 90
    disable: [search]
`)})
		if err != nil {
			t.Fatal(err)
		}
		want := []Level{
			{Name: "Busy", PriorityThreshold: 20, CPUPercent: ptr(75), Disable: []string{"recommendations"}},
			{Name: "Shedding", PriorityThreshold: 60, CPUPercent: ptr(90), MemoryPercent: ptr(90), Disable: []string{"search"}},
		}
		if diff := cmp.Diff(want, got.Levels); diff != "" {
			t.Errorf("levels (-want +got):\n%s", diff)
		}
		tab, err := got.Table()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"recommendations", "search"}, tab.DisabledFeatures(2)); diff != "" {
			t.Errorf("disabled at Shedding (-want +got):\n%s", diff)
		}
		if l := tab.Level(1); len(l.Thresholds) != 1 {
			t.Errorf("Busy thresholds %v, want only cpu (error_rate and memory never trigger)", l.Thresholds)
		}
	})
	t.Run("an empty list is a problem, not the defaults", func(t *testing.T) {
		_, _, err := Load(LoadOptions{Path: writeConfig(t, "levels: []\n")})
		if diff := cmp.Diff([]string{"levels: must list 1 to 64 levels (was 0 levels)"}, problems(t, err)); diff != "" {
			t.Errorf("problems (-want +got):\n%s", diff)
		}
	})
}

func TestLoadFileProblems(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		environ []string
		want    []string
	}{
		{
			name: "typo",
			yaml: "health_check_intreval: 5s\n",
			want: []string{"health_check_intreval: unknown key (did you mean health_check_interval?)"},
		},
		{
			name: "keys are case-sensitive",
			yaml: "Listen: 127.0.0.1:1\n",
			want: []string{"Listen: unknown key (did you mean listen?)"},
		},
		{
			name: "unknown keys in sections and level elements",
			yaml: `
auth: {tokn: abc}
signals: {cpu: {sauce: host}}
levels:
  - {name: A, priority_threshold: 1}
  - {name: B, priority_threshold: 2}
  - {name: C, priority_threshold: 3, cpu_precent: 50}
`,
			want: []string{
				"auth.tokn: unknown key (did you mean auth.token?)",
				"levels[2].cpu_precent: unknown key (did you mean levels[2].cpu_percent?)",
				"signals.cpu.sauce: unknown key (did you mean signals.cpu.source?)",
			},
		},
		{
			name: "values of the wrong type",
			yaml: `
health_check_interval: soon
minimum_level_duration: 30
escalate_after: 1.5
hysteresis: lots
enable_auto_adjustment: maybe
signals: {cpu: host}
sse: [1, 2]
levels:
  - {name: A, priority_threshold: x, cpu_percent: high}
  - just a string
`,
			want: []string{
				"enable_auto_adjustment: must be true or false (was maybe)",
				"escalate_after: must be an integer (was 1.5)",
				"health_check_interval: must be a duration such as 30s or 1m (was soon)",
				"hysteresis: must be a number (was lots)",
				"levels[0].cpu_percent: must be a number (was high)",
				"levels[0].priority_threshold: must be an integer (was x)",
				"levels[1]: must be a mapping (was just a string)",
				"minimum_level_duration: must be a duration such as 30s or 1m (was 30)",
				"signals.cpu: must be a mapping (was host)",
				"sse: must be a mapping (was a list)",
			},
		},
		{
			name: "the signals of issue 12: unknown keys and wrong types",
			yaml: `
signals:
  latency: {quantile: high}
  custom: [{name: q, tll: 1m}, {name: r, ttl: 60}, 7]
  prometheus: {url: http://p:9090, timeout: 1m, queries: [{name: s, query: up, intreval: 2m}]}
levels:
  - {name: A, latency_ms: slow, custom: {q: lots, r: 5}}
  - {name: B, custom: 5}
`,
			want: []string{
				"levels[0].custom.q: must be a number (was lots)",
				"levels[0].latency_ms: must be a number (was slow)",
				"levels[1].custom: must be a mapping (was 5)",
				"signals.custom[0].tll: unknown key (did you mean signals.custom[0].ttl?)",
				"signals.custom[1].ttl: must be a duration such as 30s or 1m (was 60)",
				"signals.custom[2]: must be a mapping (was 7)",
				"signals.latency.quantile: must be a number (was high)",
				"signals.prometheus.queries[0].intreval: unknown key (did you mean signals.prometheus.queries[0].interval?)",
				"signals.custom[0].ttl: must be >= 1s (was 0s)",
				"signals.prometheus.queries[0].interval: must be >= 1s (was 0s)",
			},
		},
		{
			name:    "bad env values of issue 12's keys name the variable",
			environ: []string{"DEGRADED_SIGNALS__LATENCY__QUANTILE=1", "DEGRADED_SIGNALS__PROMETHEUS__TIMEOUT=never", "DEGRADED_SIGNALS__PRESSURE__SOURCE=psi"},
			want: []string{
				`signals.prometheus.timeout: must be a duration such as 30s or 1m (was "never", from DEGRADED_SIGNALS__PROMETHEUS__TIMEOUT)`,
				"signals.pressure.source: must be one of host, cgroup, off (was psi, from DEGRADED_SIGNALS__PRESSURE__SOURCE)",
				"signals.latency.quantile: must be in (0, 1) (was 1, from DEGRADED_SIGNALS__LATENCY__QUANTILE)",
			},
		},
		{
			name:    "bad env values are problems too",
			environ: []string{"DEGRADED_SSE__MAX_SUBSCRIBERS=many", "DEGRADED_ERROR_RATE_WINDOW=1 minute"},
			want: []string{
				`error_rate_window: must be a duration such as 30s or 1m (was "1 minute", from DEGRADED_ERROR_RATE_WINDOW)`,
				`sse.max_subscribers: must be an integer (was "many", from DEGRADED_SSE__MAX_SUBSCRIBERS)`,
			},
		},
		{
			name: "unknown keys and validation problems come together",
			yaml: `
helth_check_interval: 5s
escalate_after: 0
levels:
  - {name: Minor, priority_threshold: 10, cpu_percent: 150, cpu_precent: 3}
`,
			want: []string{
				"helth_check_interval: unknown key (did you mean health_check_interval?)",
				"levels[0].cpu_precent: unknown key (did you mean levels[0].cpu_percent?)",
				"escalate_after: must be >= 1 (was 0)",
				"levels[0].cpu_percent: must be in (0, 100] (was 150)",
			},
		},
		{
			name: "a mistyped key is not reported again by validation",
			yaml: "health_check_interval: soon\nsignals: off\n",
			want: []string{
				"health_check_interval: must be a duration such as 30s or 1m (was soon)",
				"signals: must be a mapping (was off)",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, err := Load(LoadOptions{Path: writeConfig(t, tt.yaml), Environ: tt.environ})
			if c != nil {
				t.Errorf("Load returned a config with problems")
			}
			if diff := cmp.Diff(tt.want, problems(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadFileErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	t.Run("missing file names the path", func(t *testing.T) {
		_, _, err := Load(LoadOptions{Path: missing})
		if err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Load(missing) = %v, want an fs.ErrNotExist naming %s", err, missing)
		}
	})
	for _, tt := range []struct{ name, yaml string }{
		{"not YAML", "listen: [unclosed\n"},
		{"not a mapping", "- a\n- b\n"},
		{"duplicate key", "listen: a\nlisten: b\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := writeConfig(t, tt.yaml)
			_, _, err := Load(LoadOptions{Path: p})
			if err == nil || !strings.Contains(err.Error(), p) {
				t.Errorf("Load = %v, want an error naming %s", err, p)
			}
			var ve *ValidationError
			if errors.As(err, &ve) {
				t.Errorf("error is a ValidationError, want a file error")
			}
		})
	}
}

func TestLoadWarning(t *testing.T) {
	c, warnings, err := Load(LoadOptions{Path: writeConfig(t, "health_check_interval: 1m\nerror_rate_window: 30s\n")})
	if err != nil || c == nil {
		t.Fatalf("Load: %v", err)
	}
	want := []string{"error_rate_window: shorter than health_check_interval (1m0s), so outcomes between two health checks can age out unseen (was 30s)"}
	if diff := cmp.Diff(want, warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

func TestLoadEnvironmentWarnings(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		want    []string
	}{
		{"client variables", []string{"DEGRADED_ADDR=http://x:1", "DEGRADED_TOKEN=t", "DEGRADED_REPORT_TOKEN=r"}, nil},
		{"a single underscore for a nested key", []string{"DEGRADED_AUTH_TOKEN=secret-value"},
			[]string{"DEGRADED_AUTH_TOKEN names no config key (did you mean DEGRADED_AUTH__TOKEN?)"}},
		{"a typo", []string{"DEGRADED_HEALTH_CHECK_INTERVL=5s"},
			[]string{"DEGRADED_HEALTH_CHECK_INTERVL names no config key (did you mean DEGRADED_HEALTH_CHECK_INTERVAL?)"}},
		{"nothing close", []string{"DEGRADED_FROBNICATE=1", "DEGRADED_LISTEN__PORT__X=1"},
			[]string{"DEGRADED_FROBNICATE names no config key", "DEGRADED_LISTEN__PORT__X names no config key"}},
		{"lists of sections are file-only", []string{"DEGRADED_LEVELS=x", "DEGRADED_SIGNALS__CUSTOM=queue_depth", "DEGRADED_SIGNALS__PROMETHEUS__QUERIES=x"},
			[]string{
				"DEGRADED_LEVELS names levels, a list of sections that only a config file can set",
				"DEGRADED_SIGNALS__CUSTOM names signals.custom, a list of sections that only a config file can set",
				"DEGRADED_SIGNALS__PROMETHEUS__QUERIES names signals.prometheus.queries, a list of sections that only a config file can set",
			}},
		{"other prefixes are not ours", []string{"DEGRADEDX=1", "PATH=/bin"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, warnings, err := Load(LoadOptions{Environ: tt.environ})
			if err != nil || c == nil {
				t.Fatalf("Load: %v", err)
			}
			if diff := cmp.Diff(tt.want, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			for _, w := range warnings {
				if strings.Contains(w, "secret-value") {
					t.Errorf("warning reveals a value: %s", w)
				}
			}
		})
	}
}

func TestLoadProblemsNameTheVariable(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		flags   []string
		want    []string
	}{
		{"a value that does not decode", []string{"DEGRADED_HEALTH_CHECK_INTERVAL=abc"}, nil,
			[]string{`health_check_interval: must be a duration such as 30s or 1m (was "abc", from DEGRADED_HEALTH_CHECK_INTERVAL)`}},
		{"a value validation refuses", []string{"DEGRADED_HEALTH_CHECK_INTERVAL=1ns", "DEGRADED_SSE__HEARTBEAT=1ms"}, nil,
			[]string{
				"health_check_interval: must be >= 10ms (was 1ns, from DEGRADED_HEALTH_CHECK_INTERVAL)",
				"sse.heartbeat: must be >= 1s (was 1ms, from DEGRADED_SSE__HEARTBEAT)",
			}},
		{"a list item", []string{"DEGRADED_ALLOWED_HOSTS=ok.example,*.example"}, nil,
			[]string{"allowed_hosts[1]: must not be a wildcard: list each host name (was *.example, from DEGRADED_ALLOWED_HOSTS)"}},
		{"a secret stays hidden", []string{"DEGRADED_AUTH__TOKEN=secret-value "}, nil,
			[]string{"auth.token: must not start or end with whitespace (was a secret, not shown, from DEGRADED_AUTH__TOKEN)"}},
		{"a flag overrides the variable", []string{"DEGRADED_HEALTH_CHECK_INTERVAL=5s"}, []string{"--health-check-interval", "1ms"},
			[]string{"health_check_interval: must be >= 10ms (was 1ms)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
			fs.Duration("health-check-interval", 0, "interval")
			if err := fs.Parse(tt.flags); err != nil {
				t.Fatal(err)
			}
			_, _, err := Load(LoadOptions{Environ: tt.environ, Flags: fs})
			if diff := cmp.Diff(tt.want, problems(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadFileLimit(t *testing.T) {
	dir := t.TempDir()
	zero := filepath.Join(dir, "zero.yaml")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	over := writeConfig(t, "# "+strings.Repeat("x", maxFileBytes)+"\n")
	atLimit := writeConfig(t, "listen: 127.0.0.1:8470\n#"+strings.Repeat("x", maxFileBytes-len("listen: 127.0.0.1:8470\n#")))
	for _, reload := range []bool{false, true} {
		for _, p := range []string{zero, over} {
			t.Run(fmt.Sprintf("%s reload=%v", filepath.Base(p), reload), func(t *testing.T) {
				_, _, err := Load(LoadOptions{Path: p, Reload: reload})
				if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "larger than the 1 MiB limit") {
					t.Errorf("Load = %v, want an error naming %s and the 1 MiB limit", err, p)
				}
			})
		}
	}
	t.Run("exactly 1 MiB", func(t *testing.T) {
		if _, _, err := Load(LoadOptions{Path: atLimit}); err != nil {
			t.Errorf("Load = %v, want a file of exactly 1 MiB accepted", err)
		}
	})
}

func TestLoadEmptyFile(t *testing.T) {
	for _, tt := range []struct{ name, yaml string }{
		{"no bytes", ""},
		{"blank lines", "\n  \n\n"},
		{"comments only", "# listen: 0.0.0.0:8470\n  # auth: {}\n"},
		{"document markers", "---\n# nothing\n...\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := writeConfig(t, tt.yaml)
			c, warnings, err := Load(LoadOptions{Path: p})
			if err != nil || c == nil {
				t.Fatalf("Load: %v, want the defaults", err)
			}
			if diff := cmp.Diff([]string{p + ": file is empty, so the embedded defaults apply"}, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			_, _, err = Load(LoadOptions{Path: p, Reload: true})
			if want := p + ": file is empty; a reload needs the whole config"; err == nil || err.Error() != want {
				t.Errorf("reload: Load = %v, want %q", err, want)
			}
		})
	}
	t.Run("an empty mapping is not an empty file", func(t *testing.T) {
		c, warnings, err := Load(LoadOptions{Path: writeConfig(t, "{}\n"), Reload: true})
		if err != nil || c == nil || len(warnings) != 0 {
			t.Errorf("Load = %v, warnings %q; want the defaults, no warning", err, warnings)
		}
	})
}
