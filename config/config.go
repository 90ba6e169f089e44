package config

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/degraded/degraded/levels"
)

//go:embed default.yaml
var defaultYAML []byte

// DefaultYAML returns the embedded default configuration, which documents
// every key. The result is a copy.
func DefaultYAML() []byte { return append([]byte(nil), defaultYAML...) }

// Config is the daemon's whole configuration. Build one with [Load] or
// [Default]; the zero value is not valid. A Config is a plain value: it is
// safe for concurrent reads, and nothing in this package modifies one after
// it is returned.
type Config struct {
	// Listen is the HTTP API's host:port.
	Listen string `koanf:"listen"`
	// DataDir holds state.json; "" keeps state in memory only.
	DataDir string `koanf:"data_dir"`
	// HealthCheckInterval is the period of the sample-and-evaluate loop.
	HealthCheckInterval time.Duration `koanf:"health_check_interval"`
	// MinimumLevelDuration is how long a level is held before each recovery step.
	MinimumLevelDuration time.Duration `koanf:"minimum_level_duration"`
	// EscalationDelay is how long the current level is held before escalating.
	EscalationDelay time.Duration `koanf:"escalation_delay"`
	// EscalateAfter is the number of consecutive ticks that must ask for a
	// higher level before escalating.
	EscalateAfter int `koanf:"escalate_after"`
	// ErrorRateWindow is the span of the rolling error window.
	ErrorRateWindow time.Duration `koanf:"error_rate_window"`
	// ErrorRateWindowBuckets is the number of buckets the window is split into.
	ErrorRateWindowBuckets int `koanf:"error_rate_window_buckets"`
	// MinThroughput is the number of attempts in the window below which the
	// error rate is unavailable.
	MinThroughput int64 `koanf:"min_throughput"`
	// Hysteresis scales thresholds by (1 - Hysteresis) for recovery.
	Hysteresis float64 `koanf:"hysteresis"`
	// EnableAutoAdjustment false leaves level changes to overrides only.
	EnableAutoAdjustment bool `koanf:"enable_auto_adjustment"`
	// MaxOverrideTTL is the longest ttl an override may have.
	MaxOverrideTTL time.Duration `koanf:"max_override_ttl"`
	// BlindHold is how long a warming or failed signal may hold recovery.
	BlindHold time.Duration `koanf:"blind_hold"`
	// RecoveryJitter stretches each recovery step's dwell by 1 + r, r
	// uniform in [0, RecoveryJitter).
	RecoveryJitter float64 `koanf:"recovery_jitter"`
	// Mode is "enforce" (shed as the level says) or "shadow" (compute and
	// publish the level with "shadow": true, but admit everything and only
	// count what would have been shed).
	Mode string `koanf:"mode"`
	// MaxConnections caps the HTTP connections; 0 means RLIMIT_NOFILE - 64,
	// and a cap above that is refused at start (the daemon keeps 64 files).
	// Otherwise it is at least MinConnections.
	MaxConnections int `koanf:"max_connections"`
	// AllowedHosts are extra Host names served when no admin token is set:
	// host names or IP addresses, without ports or wildcards.
	AllowedHosts []string `koanf:"allowed_hosts"`

	// Signals, Auth, TLS, SSE and Log are the sections of the same names.
	Signals Signals `koanf:"signals"`
	Auth    Auth    `koanf:"auth"`
	TLS     TLS     `koanf:"tls"`
	SSE     SSE     `koanf:"sse"`
	Log     Log     `koanf:"log"`
	// Record configures the timeline recording.
	Record Record `koanf:"record"`
	// Admission says how a level's admission is decided (DESIGN.md
	// "Overload control").
	Admission Admission `koanf:"admission"`
	// Fleet is fleet mode (config/fleet.go).
	Fleet Fleet `koanf:"fleet"`
	// Levels are the configured levels, least severe first, Normal excluded.
	// Convert them with [Config.Table].
	Levels []Level `koanf:"levels"`
}

// MinConnections is the smallest max_connections other than 0: 32 slots
// are kept for short requests, and streams and long-polls share the rest.
const MinConnections = 64

// Auth holds the bearer tokens. Its fields are secrets: never log them.
type Auth struct {
	// Token is the admin token (override, reload). See [Config.AdminToken].
	Token string `koanf:"token"`
	// TokenFile names a file whose trimmed contents are the admin token.
	TokenFile string `koanf:"token_file"`
	// ReportToken guards POST /v1/outcomes; "" leaves it open.
	ReportToken string `koanf:"report_token"`
	// AllowUnauthenticated permits a non-loopback Listen without tokens.
	AllowUnauthenticated bool `koanf:"allow_unauthenticated"`
	// Operators are named admin tokens: a change made with one is
	// recorded under the operator's name. See [Config.OperatorTokens].
	Operators []Operator `koanf:"operators"`
}

// TLS enables HTTPS when both files are set.
type TLS struct {
	// CertFile is the PEM certificate (chain).
	CertFile string `koanf:"cert_file"`
	// KeyFile is the PEM private key of CertFile.
	KeyFile string `koanf:"key_file"`
}

// Enabled reports whether HTTPS is configured (both files set).
func (t TLS) Enabled() bool { return t.CertFile != "" && t.KeyFile != "" }

// SSE configures the event stream.
type SSE struct {
	// Heartbeat is the interval between ": ping" comments.
	Heartbeat time.Duration `koanf:"heartbeat"`
	// MaxSubscribers caps concurrent streams; more are answered 503.
	MaxSubscribers int `koanf:"max_subscribers"`
	// WriteTimeout drops a subscriber whose write blocks this long.
	WriteTimeout time.Duration `koanf:"write_timeout"`
}

// Admission modes: [AdmissionGraduated] (the default) and [AdmissionLevels].
const (
	// AdmissionGraduated admits part of the band below a level's priority
	// threshold ("partial" in the state document), sized by a feedback law
	// from the services' reports, so an overload sheds only what the
	// service cannot carry.
	AdmissionGraduated = "graduated"
	// AdmissionLevels is the plain table rule: a request is admitted iff its
	// priority is at least the level's threshold.
	AdmissionLevels = "levels"
)

// Admission configures admission inside a level.
type Admission struct {
	// Mode is AdmissionGraduated or AdmissionLevels.
	Mode string `koanf:"mode"`
}

// Log configures the daemon's logger.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `koanf:"level"`
	// Format is text or json.
	Format string `koanf:"format"`
}

// Level is one configured level. A nil threshold (null or omitted in YAML)
// means the signal never triggers this level.
type Level struct {
	// Name is unique ignoring case, not "Normal" in any case, and matches
	// ^[A-Za-z][A-Za-z0-9_-]{0,31}$.
	Name string `koanf:"name"`
	// PriorityThreshold is the lowest priority admitted at this level.
	PriorityThreshold int `koanf:"priority_threshold"`
	// The built-in signals' thresholds: the values a signal must strictly
	// exceed to ask for this level. Percents are in (0, 100], LatencyMS in
	// (0, 10000]. Each key is its signal's levels.Signal.Key
	// (TestThresholdKeysAreTheSignals); thresholds maps them.
	ErrorRatePercent      *float64 `koanf:"error_rate_percent"`
	LatencyMS             *float64 `koanf:"latency_ms"`
	CPUPercent            *float64 `koanf:"cpu_percent"`
	MemoryPercent         *float64 `koanf:"memory_percent"`
	CPUPressurePercent    *float64 `koanf:"cpu_pressure_percent"`
	MemoryPressurePercent *float64 `koanf:"memory_pressure_percent"`
	IOPressurePercent     *float64 `koanf:"io_pressure_percent"`
	// Custom maps a custom signal's name (one of signals.custom or
	// signals.prometheus.queries) to its threshold, finite and >= 0.
	Custom map[string]*float64 `koanf:"custom"`
	// Disable lists the features turned off from this level upwards.
	Disable []string `koanf:"disable"`
}

// Table converts c.Levels into a [levels.Table] (Normal prepended), with
// the custom signals (pushed, then queried, in config order) and the
// latency quantile. It fails only on what [Config.Validate] also reports.
func (c *Config) Table() (*levels.Table, error) {
	ls := make([]levels.Level, len(c.Levels))
	for i, l := range c.Levels {
		ths := levels.Thresholds{}
		for sig, p := range l.thresholds() {
			if p != nil {
				ths[sig] = *p
			}
		}
		ls[i] = levels.Level{
			Name:              l.Name,
			PriorityThreshold: l.PriorityThreshold,
			Thresholds:        ths,
			Disable:           append([]string(nil), l.Disable...),
		}
	}
	return levels.NewTableWith(ls, levels.TableOptions{
		Custom:          c.customSignals(),
		LatencyQuantile: c.Signals.Latency.Quantile,
	})
}

// thresholds maps each signal to this level's threshold (nil: none): the
// built-in ones, then each of Custom not named like a built-in one. It is
// the one place config lists the signals' threshold fields.
func (l *Level) thresholds() map[levels.Signal]*float64 {
	ths := map[levels.Signal]*float64{
		levels.ErrorRate:      l.ErrorRatePercent,
		levels.Latency:        l.LatencyMS,
		levels.CPU:            l.CPUPercent,
		levels.Memory:         l.MemoryPercent,
		levels.CPUPressure:    l.CPUPressurePercent,
		levels.MemoryPressure: l.MemoryPressurePercent,
		levels.IOPressure:     l.IOPressurePercent,
	}
	for name, p := range l.Custom {
		if sig := levels.Signal(name); !sig.Builtin() {
			ths[sig] = p
		}
	}
	return ths
}

// Machine returns the level machine's configuration: the table ([Config.Table])
// and the rules, the one mapping of the config onto levels.Rules that the
// daemon and `degraded replay` share.
func (c *Config) Machine() (levels.Config, error) {
	t, err := c.Table()
	if err != nil {
		return levels.Config{}, err
	}
	return levels.Config{Table: t, Rules: levels.Rules{
		MinimumLevelDuration: c.MinimumLevelDuration,
		EscalationDelay:      c.EscalationDelay,
		EscalateAfter:        c.EscalateAfter,
		Hysteresis:           c.Hysteresis,
		BlindHold:            c.BlindHold,
		ManualOnly:           !c.EnableAutoAdjustment,
		RecoveryJitter:       c.RecoveryJitter,
		MaxOverrideTTL:       c.MaxOverrideTTL,
		MinThroughput:        c.MinThroughput,
		Shadow:               c.Mode == "shadow",
		Admission:            levels.AdmissionMode(c.Admission.Mode),
	}}, nil
}

// Measured returns, as text, the keys that decide what the daemon measures
// rather than how the level machine judges it: the health check interval,
// the error window and the signal sources. Timeline start and reload lines
// carry them, so that `degraded replay` can say which keys of a candidate
// it cannot apply.
func (c *Config) Measured() map[string]string {
	text := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	}
	return map[string]string{
		"health_check_interval":     c.HealthCheckInterval.String(),
		"error_rate_window":         c.ErrorRateWindow.String(),
		"error_rate_window_buckets": strconv.Itoa(c.ErrorRateWindowBuckets),
		"signals.cpu":               c.Signals.CPU.Source,
		"signals.memory":            c.Signals.Memory.Source,
		"signals.pressure":          c.Signals.Pressure.Source,
		"signals.cgroup_path":       c.Signals.CgroupPath,
		"signals.custom":            text(c.Signals.Custom),
		"signals.prometheus":        text(c.Signals.Prometheus),
		"fleet.error_rate_scope":    c.Fleet.ErrorRateScope,
	}
}
