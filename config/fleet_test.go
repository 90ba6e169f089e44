package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestValidateFleet(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	on := func(c *Config) { c.Fleet.Enabled, c.Fleet.Name = true, "shop" }

	tests := []struct {
		name   string
		mutate func(c *Config)
		want   []string
	}{
		{"off by default", func(*Config) {}, nil},
		{"a disabled block is not checked beyond its enumerations", func(c *Config) { c.Fleet.Etcd.Endpoints = []string{"nope"} }, nil},
		{"enabled", on, nil},
		{"name required", func(c *Config) { c.Fleet.Enabled = true },
			[]string{`fleet.name: must be set when fleet.enabled is true (was "")`}},
		{"name with a slash", func(c *Config) { on(c); c.Fleet.Name = "a/b" },
			[]string{"fleet.name: must not contain '/' or surrounding whitespace (was a/b)"}},
		{"instance with a slash", func(c *Config) { on(c); c.Fleet.Instance = "h/1" },
			[]string{"fleet.instance: must not contain '/' (was h/1)"}},
		{"prefix", func(c *Config) { on(c); c.Fleet.Prefix = "/degraded" },
			[]string{"fleet.prefix: must end with '/' (was /degraded)"}},
		{"scope", func(c *Config) { c.Fleet.ErrorRateScope = "global" },
			[]string{"fleet.error_rate_scope: must be one of local, fleet (was global)"}},
		{"instance_ttl under 2s", func(c *Config) { c.Fleet.InstanceTTL = time.Second },
			[]string{"fleet.instance_ttl: must be >= 2s (was 1s)"}},
		{"instance_ttl of 2s", func(c *Config) { on(c); c.Fleet.InstanceTTL = 2 * time.Second }, nil},
		{"no endpoints", func(c *Config) { on(c); c.Fleet.Etcd.Endpoints = nil },
			[]string{"fleet.etcd.endpoints: must list at least one URL when fleet.enabled is true (was [])"}},
		{"endpoints must be URLs", func(c *Config) {
			on(c)
			c.Fleet.Etcd.Endpoints = []string{"https://etcd-0:2379", "127.0.0.1:2379", "unix:///run/etcd", "http://", "http://h:2379/v3"}
		}, []string{
			"fleet.etcd.endpoints[1]: must be an http or https URL such as http://127.0.0.1:2379 (was 127.0.0.1:2379)",
			"fleet.etcd.endpoints[2]: must be an http or https URL such as http://127.0.0.1:2379 (was unix:///run/etcd)",
			"fleet.etcd.endpoints[3]: must be an http or https URL such as http://127.0.0.1:2379 (was http://)",
			"fleet.etcd.endpoints[4]: must be an http or https URL such as http://127.0.0.1:2379 (was http://h:2379/v3)",
		}},
		{"dial_timeout", func(c *Config) { on(c); c.Fleet.Etcd.DialTimeout = 0 },
			[]string{"fleet.etcd.dial_timeout: must be >= 100ms (was 0s)"}},
		{"username with password_file", func(c *Config) { on(c); c.Fleet.Etcd.Username, c.Fleet.Etcd.PasswordFile = "root", pw }, nil},
		{"username without password_file", func(c *Config) { on(c); c.Fleet.Etcd.Username = "root" },
			[]string{`fleet.etcd.password_file: must be set when fleet.etcd.username is: the password is read only from a file (was "")`}},
		{"password_file without username", func(c *Config) { on(c); c.Fleet.Etcd.PasswordFile = pw },
			[]string{`fleet.etcd.username: must be set when fleet.etcd.password_file is (was "")`}},
		{"password_file unreadable", func(c *Config) { on(c); c.Fleet.Etcd.Username, c.Fleet.Etcd.PasswordFile = "root", missing },
			[]string{"fleet.etcd.password_file: must be a readable file: no such file or directory (was " + missing + ")"}},
		{"password_file empty", func(c *Config) { on(c); c.Fleet.Etcd.Username, c.Fleet.Etcd.PasswordFile = "root", empty },
			[]string{"fleet.etcd.password_file: must not be empty (was " + empty + ")"}},
		{"tls cert without key", func(c *Config) { on(c); c.Fleet.Etcd.TLS.CertFile = pw },
			[]string{"fleet.etcd.tls: cert_file and key_file must be set together (was " + pw + ",)"}},
		{"tls files unreadable", func(c *Config) { on(c); c.Fleet.Etcd.TLS = EtcdTLS{CAFile: missing, CertFile: pw, KeyFile: pw} },
			[]string{"fleet.etcd.tls.ca_file: must be a readable file: no such file or directory (was " + missing + ")"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(c)
			_, err := c.Validate()
			var got []string
			if err != nil {
				got = err.(*ValidationError).Problems
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFleetDerivedValues(t *testing.T) {
	c := Default()
	if got := c.FleetInstanceTTL(); got != 90*time.Second {
		t.Errorf("instance ttl at 30s health checks = %s, want 1m30s (3 x the interval)", got)
	}
	c.HealthCheckInterval = time.Second
	if got := c.FleetInstanceTTL(); got != 10*time.Second {
		t.Errorf("instance ttl at 1s health checks = %s, want the 10s minimum", got)
	}
	c.Fleet.InstanceTTL = 2 * time.Second
	if got := c.FleetInstanceTTL(); got != 2*time.Second {
		t.Errorf("instance ttl set to 2s = %s", got)
	}
	host, _ := os.Hostname()
	if got, err := c.FleetInstance(); err != nil || got != host {
		t.Errorf("default instance = %q, %v; want the hostname %q", got, err, host)
	}
	c.Fleet.Instance = "web-1"
	if got, _ := c.FleetInstance(); got != "web-1" {
		t.Errorf("instance = %q, want web-1", got)
	}
	if pw, err := c.EtcdPassword(); pw != "" || err != nil {
		t.Errorf("password without a file = %q, %v; want none", pw, err)
	}
	c.Fleet.Etcd.PasswordFile = filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(c.Fleet.Etcd.PasswordFile, []byte("s3cret\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if pw, err := c.EtcdPassword(); pw != "s3cret" || err != nil {
		t.Errorf("password = %q, %v; want s3cret with the newline trimmed", pw, err)
	}
}

func TestLoadFleetFromFileAndEnv(t *testing.T) {
	f := filepath.Join(t.TempDir(), "c.yaml")
	body := "fleet:\n  enabled: true\n  name: shop\n  instance_ttl: 2s\n  etcd:\n    endpoints: [http://10.0.0.1:2379, http://10.0.0.2:2379]\n"
	if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _, err := Load(LoadOptions{Path: f, Environ: []string{"DEGRADED_FLEET__ERROR_RATE_SCOPE=fleet"}})
	if err != nil {
		t.Fatal(err)
	}
	want := Fleet{Enabled: true, Name: "shop", Prefix: "/degraded/", ErrorRateScope: "fleet", InstanceTTL: 2 * time.Second,
		Etcd: Etcd{Endpoints: []string{"http://10.0.0.1:2379", "http://10.0.0.2:2379"}, DialTimeout: 5 * time.Second}}
	if diff := cmp.Diff(want, c.Fleet); diff != "" {
		t.Errorf("fleet (-want +got):\n%s", diff)
	}

	if err := os.WriteFile(f, []byte("fleet:\n  etcd:\n    password: hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = Load(LoadOptions{Path: f})
	if err == nil || !strings.Contains(err.Error(), "fleet.etcd.password: unknown key") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("an inline password gave %v; want an unknown-key error, never echoing the secret", err)
	}
}
