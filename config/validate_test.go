package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/degraded/degraded/levels"
	"github.com/google/go-cmp/cmp"
)

// writeKeyPair writes a self-signed certificate and its key into dir.
func writeKeyPair(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeKeyPair(t, dir)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("admin-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(dir, "empty")
	if err := os.WriteFile(emptyFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")

	tests := []struct {
		name   string
		mutate func(c *Config)
		want   []string
	}{
		{"defaults", func(*Config) {}, nil},
		{"health_check_interval", func(c *Config) { c.HealthCheckInterval = 0 },
			[]string{"health_check_interval: must be >= 10ms (was 0s)"}},
		{"health_check_interval under 10ms", func(c *Config) { c.HealthCheckInterval = time.Nanosecond },
			[]string{"health_check_interval: must be >= 10ms (was 1ns)"}},
		{"health_check_interval of 10ms", func(c *Config) { c.HealthCheckInterval = 10 * time.Millisecond }, nil},
		{"error_rate_window", func(c *Config) { c.ErrorRateWindow = -time.Second },
			[]string{"error_rate_window: must be > 0 (was -1s)"}},
		{"buckets too few", func(c *Config) { c.ErrorRateWindowBuckets = 0 },
			[]string{"error_rate_window_buckets: must be in [1, 10000] (was 0)"}},
		{"buckets too many", func(c *Config) { c.ErrorRateWindowBuckets = 10001 },
			[]string{"error_rate_window_buckets: must be in [1, 10000] (was 10001)"}},
		{"bucket under 1ms", func(c *Config) { c.ErrorRateWindow = time.Second; c.ErrorRateWindowBuckets = 2000 },
			[]string{"error_rate_window_buckets: each bucket (error_rate_window / buckets = 500µs) must be >= 1ms (was 2000)"}},
		{"bucket of exactly 1ms", func(c *Config) { c.ErrorRateWindow = 10 * time.Second; c.ErrorRateWindowBuckets = 10000 }, nil},
		{"minimum_level_duration", func(c *Config) { c.MinimumLevelDuration = -time.Minute },
			[]string{"minimum_level_duration: must be >= 0 (was -1m0s)"}},
		{"minimum_level_duration zero", func(c *Config) { c.MinimumLevelDuration = 0 }, nil},
		{"escalation_delay", func(c *Config) { c.EscalationDelay = -time.Second },
			[]string{"escalation_delay: must be >= 0 (was -1s)"}},
		{"hysteresis one", func(c *Config) { c.Hysteresis = 1 },
			[]string{"hysteresis: must be in [0, 1) (was 1)"}},
		{"hysteresis negative", func(c *Config) { c.Hysteresis = -0.1 },
			[]string{"hysteresis: must be in [0, 1) (was -0.1)"}},
		{"hysteresis zero", func(c *Config) { c.Hysteresis = 0 }, nil},
		{"min_throughput", func(c *Config) { c.MinThroughput = -1 },
			[]string{"min_throughput: must be >= 0 (was -1)"}},
		{"escalate_after", func(c *Config) { c.EscalateAfter = 0 },
			[]string{"escalate_after: must be >= 1 (was 0)"}},
		{"max_override_ttl", func(c *Config) { c.MaxOverrideTTL = time.Nanosecond },
			[]string{"max_override_ttl: must be >= 1s (was 1ns)"}},
		{"max_override_ttl of 1s", func(c *Config) { c.MaxOverrideTTL = time.Second }, nil},
		{"sse.heartbeat", func(c *Config) { c.SSE.Heartbeat = time.Nanosecond },
			[]string{"sse.heartbeat: must be >= 1s (was 1ns)"}},
		{"sse.heartbeat of 1s", func(c *Config) { c.SSE.Heartbeat = time.Second }, nil},
		{"sse.write_timeout", func(c *Config) { c.SSE.WriteTimeout = 999 * time.Millisecond },
			[]string{"sse.write_timeout: must be >= 1s (was 999ms)"}},
		{"blind_hold", func(c *Config) { c.BlindHold = -time.Second },
			[]string{"blind_hold: must be >= 0 (was -1s)"}},
		{"blind_hold zero", func(c *Config) { c.BlindHold = 0 }, nil},
		{"recovery_jitter 1", func(c *Config) { c.RecoveryJitter = 1 }, []string{"recovery_jitter: must be in [0, 1) (was 1)"}},
		{"recovery_jitter negative", func(c *Config) { c.RecoveryJitter = -0.1 }, []string{"recovery_jitter: must be in [0, 1) (was -0.1)"}},
		{"recovery_jitter off", func(c *Config) { c.RecoveryJitter = 0 }, nil},
		{"mode", func(c *Config) { c.Mode = "dry_run" },
			[]string{"mode: must be one of enforce, shadow (was dry_run)"}},
		{"mode shadow", func(c *Config) { c.Mode = "shadow" }, nil},
		{"admission.mode", func(c *Config) { c.Admission.Mode = "fair" },
			[]string{"admission.mode: must be one of graduated, levels (was fair)"}},
		{"admission.mode levels", func(c *Config) { c.Admission.Mode = "levels" }, nil},
		{"max_connections", func(c *Config) { c.MaxConnections = -1 },
			[]string{"max_connections: must be 0 (RLIMIT_NOFILE - 64) or >= 64: 32 are kept for short requests and streams need the rest (was -1)"}},
		{"max_connections leaving no streams", func(c *Config) { c.MaxConnections = 32 },
			[]string{"max_connections: must be 0 (RLIMIT_NOFILE - 64) or >= 64: 32 are kept for short requests and streams need the rest (was 32)"}},
		{"max_connections set", func(c *Config) { c.MaxConnections = 4096 }, nil},
		{"allowed_hosts", func(c *Config) {
			c.AllowedHosts = []string{"degraded.internal", "Degraded.Example.COM.", "10.0.0.7", "::1", "gateway_1",
				"", "*.example.com", "example.com:8470", "[::1]:80", "[::1]", "http://example.com", "a..b", "-x"}
		}, []string{
			`allowed_hosts[5]: must not be empty (was "")`,
			"allowed_hosts[6]: must not be a wildcard: list each host name (was *.example.com)",
			"allowed_hosts[7]: must not have a port: a host name or IP address only (was example.com:8470)",
			"allowed_hosts[8]: must not have a port: a host name or IP address only (was [::1]:80)",
			"allowed_hosts[9]: must be a host name or an IP address (was [::1])",
			"allowed_hosts[10]: must be a host name or an IP address (was http://example.com)",
			"allowed_hosts[11]: must be a host name or an IP address (was a..b)",
			"allowed_hosts[12]: must be a host name or an IP address (was -x)",
		}},
		{"sse.max_subscribers", func(c *Config) { c.SSE.MaxSubscribers = 0 },
			[]string{"sse.max_subscribers: must be >= 1 (was 0)"}},
		{"signal sources", func(c *Config) { c.Signals.CPU.Source = "gpu"; c.Signals.Memory.Source = "" },
			[]string{
				"signals.cpu.source: must be one of host, cgroup, off (was gpu)",
				`signals.memory.source: must be one of host, cgroup, off (was "")`,
			}},
		{"cgroup without a path", func(c *Config) { c.Signals.Memory.Source = "cgroup"; c.Signals.CgroupPath = "" },
			[]string{`signals.cgroup_path: must be set when a signal source is cgroup (was "")`}},
		{"log", func(c *Config) { c.Log.Level = "verbose"; c.Log.Format = "xml" },
			[]string{
				"log.level: must be one of debug, info, warn, error (was verbose)",
				"log.format: must be one of text, json (was xml)",
			}},
		{"listen not host:port", func(c *Config) { c.Listen = "localhost" },
			[]string{"listen: must be host:port (was localhost)"}},
		{"no levels", func(c *Config) { c.Levels = nil },
			[]string{"levels: must list 1 to 64 levels (was 0 levels)"}},
		{"65 levels", func(c *Config) {
			c.Levels = nil
			for i := range 65 {
				c.Levels = append(c.Levels, Level{Name: "L" + strings.Repeat("x", i%30) + string(rune('a'+i/30)), PriorityThreshold: i})
			}
		}, []string{"levels: must list 1 to 64 levels (was 65 levels)"}},
		{"level names", func(c *Config) {
			c.Levels[0].Name = "Normal"
			c.Levels[1].Name = "Major"
			c.Levels[3].Name = "9lives"
			c.Levels[4].Name = strings.Repeat("a", 33)
		}, []string{
			"levels[0].name: is reserved for level 0 (Normal), ignoring case (was Normal)",
			"levels[2].name: duplicates levels[1].name (was Major)",
			"levels[3].name: must match ^[A-Za-z][A-Za-z0-9_-]{0,31}$ (was 9lives)",
			"levels[4].name: must match ^[A-Za-z][A-Za-z0-9_-]{0,31}$ (was aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa)",
		}},
		{"level names ignore case", func(c *Config) {
			c.Levels[0].Name = "normal"
			c.Levels[3].Name = "major"
			c.Levels[4].Name = "MAJOR"
		}, []string{
			"levels[0].name: is reserved for level 0 (Normal), ignoring case (was normal)",
			"levels[3].name: duplicates levels[2].name (Major): names are unique ignoring case (was major)",
			"levels[4].name: duplicates levels[2].name (Major): names are unique ignoring case (was MAJOR)",
		}},
		{"empty level name", func(c *Config) { c.Levels[0].Name = "" },
			[]string{`levels[0].name: must match ^[A-Za-z][A-Za-z0-9_-]{0,31}$ (was "")`}},
		{"priority thresholds", func(c *Config) {
			c.Levels[0].PriorityThreshold = -1
			c.Levels[3].PriorityThreshold = 40
		}, []string{
			"levels[0].priority_threshold: must be >= 0 (was -1)",
			"levels[3].priority_threshold: must be >= levels[2].priority_threshold (50) (was 40)",
		}},
		{"equal priority thresholds", func(c *Config) { c.Levels[1].PriorityThreshold = 10 }, nil},
		{"percents out of range", func(c *Config) {
			c.Levels[0].ErrorRatePercent = ptr(0)
			c.Levels[2].CPUPercent = ptr(150)
			c.Levels[4].MemoryPercent = ptr(100.5)
		}, []string{
			"levels[0].error_rate_percent: must be in (0, 100] (was 0)",
			"levels[2].cpu_percent: must be in (0, 100] (was 150)",
			"levels[4].memory_percent: must be in (0, 100] (was 100.5)",
		}},
		{"100 percent is allowed", func(c *Config) { c.Levels[4].CPUPercent = ptr(100) }, nil},
		{"thresholds must not decrease, nulls skipped", func(c *Config) {
			c.Levels[1].CPUPercent = nil
			c.Levels[2].CPUPercent = ptr(55)
			c.Levels[3].ErrorRatePercent = ptr(9.5)
		}, []string{
			"levels[2].cpu_percent: must be >= levels[0].cpu_percent (60) (was 55)",
			"levels[3].error_rate_percent: must be >= levels[2].error_rate_percent (10) (was 9.5)",
		}},
		{"null thresholds everywhere", func(c *Config) {
			for i := range c.Levels {
				c.Levels[i].CPUPercent, c.Levels[i].MemoryPercent = nil, nil
			}
		}, nil},
		{"empty feature name", func(c *Config) { c.Levels[1].Disable = []string{"search", " "} },
			[]string{`levels[1].disable[1]: must not be empty (was " ")`}},
		{"tls both", func(c *Config) { c.TLS = TLS{CertFile: cert, KeyFile: key} }, nil},
		{"tls cert only", func(c *Config) { c.TLS.CertFile = cert },
			[]string{`tls.key_file: must be set when tls.cert_file is (was "")`}},
		{"tls key only", func(c *Config) { c.TLS.KeyFile = key },
			[]string{`tls.cert_file: must be set when tls.key_file is (was "")`}},
		{"tls unreadable", func(c *Config) { c.TLS = TLS{CertFile: missing, KeyFile: key} },
			[]string{"tls.cert_file: must be a readable file: no such file or directory (was " + missing + ")"}},
		{"tls not a pair", func(c *Config) { c.TLS = TLS{CertFile: tokenFile, KeyFile: key} },
			[]string{"tls.cert_file: is not a certificate matching tls.key_file: tls: failed to find any PEM data in certificate input (was " + tokenFile + ")"}},
		{"token_file readable", func(c *Config) { c.Auth.TokenFile = tokenFile }, nil},
		{"token_file missing", func(c *Config) { c.Auth.TokenFile = missing },
			[]string{"auth.token_file: must be a readable file: no such file or directory (was " + missing + ")"}},
		{"token_file empty", func(c *Config) { c.Auth.TokenFile = emptyFile },
			[]string{"auth.token_file: must not be empty (was " + emptyFile + ")"}},
		{"token and token_file", func(c *Config) { c.Auth.Token = "t"; c.Auth.TokenFile = tokenFile },
			[]string{"auth.token_file: set only one of auth.token and auth.token_file (was " + tokenFile + ")"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(c)
			_, err := c.Validate()
			if diff := cmp.Diff(tt.want, problems(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateProtectedMode(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("admin-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	const refused = "listen: a non-loopback address needs auth.token (or auth.token_file) and auth.report_token, or auth.allow_unauthenticated: true; missing "
	tests := []struct {
		name     string
		listen   string
		auth     Auth
		loopback bool
		want     []string
	}{
		{"127.0.0.1", "127.0.0.1:8470", Auth{}, true, nil},
		{"127.1.2.3", "127.1.2.3:8470", Auth{}, true, nil},
		{"::1", "[::1]:8470", Auth{}, true, nil},
		{"localhost", "localhost:8470", Auth{}, true, nil},
		{"empty host is every interface", ":8470", Auth{}, false, []string{refused + "auth.token (or auth.token_file) and auth.report_token (was :8470)"}},
		{"0.0.0.0", "0.0.0.0:8470", Auth{}, false, []string{refused + "auth.token (or auth.token_file) and auth.report_token (was 0.0.0.0:8470)"}},
		{"admin token only", "0.0.0.0:8470", Auth{Token: "a"}, false, []string{refused + "auth.report_token (was 0.0.0.0:8470)"}},
		{"report token only", "10.0.0.1:8470", Auth{ReportToken: "r"}, false, []string{refused + "auth.token (or auth.token_file) (was 10.0.0.1:8470)"}},
		{"both tokens", "0.0.0.0:8470", Auth{Token: "a", ReportToken: "r"}, false, nil},
		{"token file and report token", "[::]:8470", Auth{TokenFile: tokenFile, ReportToken: "r"}, false, nil},
		{"allow_unauthenticated", "192.168.1.1:8470", Auth{AllowUnauthenticated: true}, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Listen, c.Auth = tt.listen, tt.auth
			if got := c.IsLoopback(); got != tt.loopback {
				t.Errorf("IsLoopback(%q) = %v, want %v", tt.listen, got, tt.loopback)
			}
			_, err := c.Validate()
			if diff := cmp.Diff(tt.want, problems(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateReportsEverythingAtOnce(t *testing.T) {
	c := Default()
	c.HealthCheckInterval = 0
	c.Hysteresis = 2
	c.Log.Format = "xml"
	c.Levels[2].CPUPercent = ptr(150)
	_, err := c.Validate()
	want := []string{
		"health_check_interval: must be >= 10ms (was 0s)",
		"hysteresis: must be in [0, 1) (was 2)",
		"log.format: must be one of text, json (was xml)",
		"levels[2].cpu_percent: must be in (0, 100] (was 150)",
	}
	if diff := cmp.Diff(want, problems(t, err)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if got, wantErr := err.Error(), strings.Join(want, "\n"); got != wantErr {
		t.Errorf("Error() = %q, want %q", got, wantErr)
	}
}

func TestSecretsNeverInProblems(t *testing.T) {
	const secret = "hunter2-very-secret"
	p := writeConfig(t, `
listen: 0.0.0.0:8470
auth: {token: `+secret+`, token_file: /nonexistent/`+"x"+`}
log: {level: `+"loud"+`}
`)
	_, _, err := Load(LoadOptions{Path: p, Environ: []string{"DEGRADED_AUTH__REPORT_TOKEN=" + secret + "-report"}})
	if err == nil {
		t.Fatal("Load succeeded, want problems")
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("problems reveal a token:\n%v", err)
	}
}

func TestAdminToken(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		auth    Auth
		want    string
		wantErr bool
	}{
		{"none", Auth{}, "", false},
		{"token", Auth{Token: "inline"}, "inline", false},
		{"token file, trimmed", Auth{TokenFile: tokenFile}, "from-file", false},
		{"missing file", Auth{TokenFile: filepath.Join(dir, "missing")}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Config{Auth: tt.auth}
			got, err := c.AdminToken()
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("AdminToken() = %q, %v; want %q, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestThresholdKeysAreTheSignals: each threshold field's key is its
// signal's Key, so levels, config and GET /v1/levels name them alike.
func TestThresholdKeysAreTheSignals(t *testing.T) {
	var l Level
	typ := reflect.TypeOf(l)
	fields := map[*float64]string{}
	v := reflect.ValueOf(&l).Elem()
	for i := range typ.NumField() {
		if p, ok := v.Field(i).Addr().Interface().(**float64); ok {
			*p = new(float64)
			fields[*p] = typ.Field(i).Tag.Get("koanf")
		}
	}
	ths := l.thresholds()
	if len(ths) != len(levels.AllSignals) || len(fields) != len(levels.AllSignals) {
		t.Fatalf("%d threshold fields, %d mapped, %d signals: one field per signal", len(fields), len(ths), len(levels.AllSignals))
	}
	for sig, p := range ths {
		if fields[p] != sig.Key() {
			t.Errorf("%s's threshold field has key %q, want %q", sig, fields[p], sig.Key())
		}
	}
}
