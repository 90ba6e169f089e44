package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"
)

// Fleet configures fleet mode: instances of one service coordinating
// through etcd (a fleet override, instance reports, a fleet error rate).
// Every field is restart-only.
type Fleet struct {
	// Enabled turns fleet mode on.
	Enabled bool `koanf:"enabled"`
	// Name is the fleet, e.g. the service's name; required when enabled.
	Name string `koanf:"name"`
	// Instance names this daemon in the fleet; "" means the hostname. See
	// [Config.FleetInstance].
	Instance string `koanf:"instance"`
	// Prefix is prepended to every etcd key: <prefix><name>/override.
	Prefix string `koanf:"prefix"`
	// ErrorRateScope is local (this instance's window) or fleet (the sum
	// over the live instances' windows).
	ErrorRateScope string `koanf:"error_rate_scope"`
	// InstanceTTL is the lease of this instance's report; 0 means
	// max(3 x health_check_interval, 10s). See [Config.FleetInstanceTTL].
	InstanceTTL time.Duration `koanf:"instance_ttl"`
	// Etcd is how to reach the cluster.
	Etcd Etcd `koanf:"etcd"`
}

// Etcd is the etcd client's configuration. The password is read from
// PasswordFile only, never given inline.
type Etcd struct {
	// Endpoints are the cluster members' URLs (http or https).
	Endpoints []string `koanf:"endpoints"`
	// Username, with the password in PasswordFile, authenticates to etcd.
	Username string `koanf:"username"`
	// PasswordFile holds the password; one trailing newline is trimmed.
	PasswordFile string `koanf:"password_file"`
	// DialTimeout bounds a connection attempt and every etcd operation.
	DialTimeout time.Duration `koanf:"dial_timeout"`
	// TLS holds the client's CA and key pair.
	TLS EtcdTLS `koanf:"tls"`
}

// EtcdTLS is the etcd client's TLS: a CA to verify the members, and a
// client certificate and key (both or neither).
type EtcdTLS struct {
	CAFile   string `koanf:"ca_file"`
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
}

// Enabled reports whether any TLS file is set.
func (t EtcdTLS) Enabled() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// MinInstanceTTL is the shortest fleet.instance_ttl accepted: a lease
// shorter than this would expire between two keepalives.
const MinInstanceTTL = 2 * time.Second

// FleetInstanceTTL is the lease of this instance's report:
// fleet.instance_ttl, or max(3 x health_check_interval, 10s) when it is 0.
func (c *Config) FleetInstanceTTL() time.Duration {
	if c.Fleet.InstanceTTL > 0 {
		return c.Fleet.InstanceTTL
	}
	return max(3*c.HealthCheckInterval, 10*time.Second)
}

// FleetInstance is this instance's name: fleet.instance, or the hostname.
func (c *Config) FleetInstance() (string, error) {
	if c.Fleet.Instance != "" {
		return c.Fleet.Instance, nil
	}
	return os.Hostname()
}

// EtcdPassword reads fleet.etcd.password_file ("" when none is set), one
// trailing newline trimmed.
func (c *Config) EtcdPassword() (string, error) {
	if c.Fleet.Etcd.PasswordFile == "" {
		return "", nil
	}
	s, what := readSecret(c.Fleet.Etcd.PasswordFile)
	if what != "" {
		return "", errors.New("fleet.etcd.password_file: " + what + " (was " + c.Fleet.Etcd.PasswordFile + ")")
	}
	return s, nil
}

// fleet checks the fleet block. Only an enabled block is checked beyond
// its enumerations: a disabled one is never used.
func (v *validator) fleet(f Fleet) {
	v.oneOf("fleet.error_rate_scope", f.ErrorRateScope, "local", "fleet")
	if f.InstanceTTL != 0 {
		v.atLeast("fleet.instance_ttl", f.InstanceTTL, MinInstanceTTL)
	}
	if !f.Enabled {
		return
	}
	if f.Name == "" {
		v.add("fleet.name", "must be set when fleet.enabled is true", f.Name)
	} else if strings.ContainsAny(f.Name, "/\x00") || strings.TrimSpace(f.Name) != f.Name {
		v.add("fleet.name", "must not contain '/' or surrounding whitespace", f.Name)
	}
	if strings.Contains(f.Instance, "/") {
		v.add("fleet.instance", "must not contain '/'", f.Instance)
	}
	if f.Prefix == "" || !strings.HasSuffix(f.Prefix, "/") {
		v.add("fleet.prefix", "must end with '/'", f.Prefix)
	}
	if len(f.Etcd.Endpoints) == 0 {
		v.add("fleet.etcd.endpoints", "must list at least one URL when fleet.enabled is true", "[]")
	}
	for i, e := range f.Etcd.Endpoints {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			v.add(fmt.Sprintf("fleet.etcd.endpoints[%d]", i), "must be an http or https URL such as http://127.0.0.1:2379", e)
		}
	}
	v.atLeast("fleet.etcd.dial_timeout", f.Etcd.DialTimeout, 100*time.Millisecond)
	if f.Etcd.PasswordFile != "" {
		if f.Etcd.Username == "" {
			v.add("fleet.etcd.username", "must be set when fleet.etcd.password_file is", "")
		}
		if _, what := readSecret(f.Etcd.PasswordFile); what != "" {
			v.add("fleet.etcd.password_file", what, f.Etcd.PasswordFile)
		}
	} else if f.Etcd.Username != "" {
		v.add("fleet.etcd.password_file", "must be set when fleet.etcd.username is: the password is read only from a file", "")
	}
	t := f.Etcd.TLS
	if (t.CertFile == "") != (t.KeyFile == "") {
		v.add("fleet.etcd.tls", "cert_file and key_file must be set together", t.CertFile+","+t.KeyFile)
	}
	for _, fl := range []struct{ key, path string }{{"fleet.etcd.tls.ca_file", t.CAFile}, {"fleet.etcd.tls.cert_file", t.CertFile}, {"fleet.etcd.tls.key_file", t.KeyFile}} {
		if fl.path == "" {
			continue
		}
		if _, err := os.ReadFile(fl.path); err != nil {
			v.add(fl.key, "must be a readable file: "+cause(err), fl.path)
		}
	}
}

// readSecret reads a password file: its contents less one trailing "\n"
// or "\r\n", or what is wrong with it in a problem's words, never
// naming the secret.
func readSecret(path string) (secret, problem string) {
	b, err := readFile(path)
	if err != nil {
		return "", "must be a readable file: " + cause(err)
	}
	s := string(b)
	if strings.HasSuffix(s, "\n") {
		s = strings.TrimSuffix(s[:len(s)-1], "\r")
	}
	if s == "" {
		return "", "must not be empty"
	}
	return s, ""
}
