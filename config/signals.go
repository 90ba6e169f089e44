package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/degraded/degraded/levels"
)

// Signals says where each signal is read from. Error rate and latency come
// from outcome reports and need no source.
type Signals struct {
	// CPU selects the CPU sampler.
	CPU SignalSource `koanf:"cpu"`
	// Memory selects the memory sampler.
	Memory SignalSource `koanf:"memory"`
	// Pressure selects the PSI sampler behind cpu_pressure,
	// memory_pressure and io_pressure.
	Pressure SignalSource `koanf:"pressure"`
	// Latency configures the latency signal.
	Latency Latency `koanf:"latency"`
	// CgroupPath is the cgroup v2 directory read by "cgroup" sources.
	CgroupPath string `koanf:"cgroup_path"`
	// Custom are the pushed signals (PUT /v1/signals/{name}), in order.
	Custom []CustomSignal `koanf:"custom"`
	// Prometheus configures the Prometheus-query signals.
	Prometheus Prometheus `koanf:"prometheus"`
}

// The values of a signal source (signals.cpu.source and the others): the
// signals package reads them (signals.Sources lists the same).
const (
	// SourceHost reads the whole host.
	SourceHost = "host"
	// SourceCgroup reads the cgroup v2 directory signals.cgroup_path.
	SourceCgroup = "cgroup"
	// SourceOff turns the signal off.
	SourceOff = "off"
)

// Sources lists the values of a signal source.
func Sources() []string { return []string{SourceHost, SourceCgroup, SourceOff} }

// SignalSource configures one sampled signal.
type SignalSource struct {
	// Source is one of [Sources]: "host", "cgroup" or "off".
	Source string `koanf:"source"`
}

// Latency configures the latency signal.
type Latency struct {
	// Quantile is the quantile of the window's latencies the signal
	// reads, in (0, 1): 0.99 is the p99.
	Quantile float64 `koanf:"quantile"`
}

// CustomSignal is one pushed signal: services PUT its value, and a value
// older than TTL reads as failed.
type CustomSignal struct {
	// Name matches ^[a-z][a-z0-9_]{0,62}$, is not a built-in signal's,
	// and is unique among the custom and query signals.
	Name string `koanf:"name"`
	// TTL is how long a pushed value stays trusted (>= 1s).
	TTL time.Duration `koanf:"ttl"`
}

// Prometheus configures the signals read by PromQL queries.
type Prometheus struct {
	// URL is the Prometheus server's base URL (http or https); required
	// when Queries is not empty.
	URL string `koanf:"url"`
	// Timeout bounds one evaluation; it is shorter than every query's
	// Interval.
	Timeout time.Duration `koanf:"timeout"`
	// Queries are the query signals, in order.
	Queries []QuerySignal `koanf:"queries"`
}

// QuerySignal is one signal read by a PromQL query.
type QuerySignal struct {
	// Name follows the rule of CustomSignal.Name; custom and query
	// signals share one namespace.
	Name string `koanf:"name"`
	// Query is the PromQL expression; a vector reads as its largest value.
	Query string `koanf:"query"`
	// Interval is the time between two evaluations (>= 1s).
	Interval time.Duration `koanf:"interval"`
}

// QueriedNames returns the names of the query signals in config order: the
// custom names that refuse pushed values.
func (c *Config) QueriedNames() []levels.Signal {
	out := make([]levels.Signal, len(c.Signals.Prometheus.Queries))
	for i, q := range c.Signals.Prometheus.Queries {
		out[i] = levels.Signal(q.Name)
	}
	return out
}

// customSignals returns the custom signals' names: the pushed ones, then
// the queried ones, in config order.
func (c *Config) customSignals() []levels.Signal {
	out := make([]levels.Signal, 0, len(c.Signals.Custom)+len(c.Signals.Prometheus.Queries))
	for _, s := range c.Signals.Custom {
		out = append(out, levels.Signal(s.Name))
	}
	return append(out, c.QueriedNames()...)
}

// signals checks the signals section: the sources, the latency quantile,
// and the custom and query signals, naming list elements as
// signals.custom[1].ttl.
func (v *validator) signals(s Signals) {
	v.source("signals.cpu.source", s.CPU.Source)
	v.source("signals.memory.source", s.Memory.Source)
	v.source("signals.pressure.source", s.Pressure.Source)
	cgroup := SourceCgroup
	if (s.CPU.Source == cgroup || s.Memory.Source == cgroup || s.Pressure.Source == cgroup) && s.CgroupPath == "" {
		v.add("signals.cgroup_path", "must be set when a signal source is cgroup", "")
	}
	if q := s.Latency.Quantile; !(q > 0 && q < 1) {
		v.add("signals.latency.quantile", "must be in (0, 1)", q)
	}

	names := signalNames{}
	for i, cs := range s.Custom {
		key := fmt.Sprintf("signals.custom[%d]", i)
		if what := names.problem(key+".name", cs.Name); what != "" {
			v.add(key+".name", what, cs.Name)
		}
		v.atLeast(key+".ttl", cs.TTL, time.Second)
	}

	p := s.Prometheus
	if p.URL != "" || len(p.Queries) > 0 {
		if what, was := urlProblem(p.URL); what != "" {
			v.add("signals.prometheus.url", what, was)
		}
	}
	v.positive("signals.prometheus.timeout", p.Timeout)
	for i, q := range p.Queries {
		key := fmt.Sprintf("signals.prometheus.queries[%d]", i)
		if what := names.problem(key+".name", q.Name); what != "" {
			v.add(key+".name", what, q.Name)
		}
		if strings.TrimSpace(q.Query) == "" {
			v.add(key+".query", "must not be empty", q.Query)
		}
		switch {
		case q.Interval < time.Second:
			v.atLeast(key+".interval", q.Interval, time.Second)
		case p.Timeout > 0 && q.Interval <= p.Timeout:
			v.add(key+".interval", fmt.Sprintf("must be longer than signals.prometheus.timeout (%s)", p.Timeout), q.Interval)
		}
	}
}

// signalNames is where config applies the custom signal name rule:
// levels.CustomNameProblem, and unique across signals.custom and
// signals.prometheus.queries, which share one namespace. It maps each
// name to the key that first used it.
type signalNames map[string]string

// problem says what is wrong with name, used at key, or "".
func (seen signalNames) problem(key, name string) string {
	if what := levels.CustomNameProblem(name); what != "" {
		return what
	}
	if first, dup := seen[name]; dup {
		return "duplicates " + first + ": custom and query signals share one namespace"
	}
	seen[name] = key
	return ""
}

// urlProblem says what is wrong with raw as signals.prometheus.url, or "",
// and what to show of it: credentials are never shown.
func urlProblem(raw string) (what string, was any) {
	if raw == "" {
		return "must be set when signals.prometheus.queries lists a query", raw
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil && strings.Contains(raw, "@"):
		return "must be a URL", secret{}
	case err != nil:
		return "must be a URL", raw
	case u.Scheme != "http" && u.Scheme != "https":
		return "must be an http or https URL", u.Redacted()
	case u.Host == "":
		return "must name a host", u.Redacted()
	}
	return "", nil
}

// PressureWarning says, when check (signals.CheckPressure) finds that the
// pressure source cannot be read on this machine, that serve would not
// start here; "" otherwise. `degraded validate` prints it as a warning:
// configs are often checked on another machine than they run on.
func (c *Config) PressureWarning(check func(source, cgroupPath string) error) string {
	s := c.Signals
	if s.Pressure.Source != SourceHost && (s.Pressure.Source != SourceCgroup || s.CgroupPath == "") {
		return ""
	}
	if err := check(s.Pressure.Source, s.CgroupPath); err != nil {
		return fmt.Sprintf("signals.pressure.source: cannot be read on this machine, so serve would not start here: %v (was %s)", err, s.Pressure.Source)
	}
	return ""
}

// signalWarnings returns what is valid about the signals but will not
// work as it seems: thresholds of a signal whose source is off.
func (c *Config) signalWarnings() []string {
	var warnings []string
	s := c.Signals
	sources := []struct {
		sig levels.Signal
		key string
		src string
	}{
		{levels.CPU, "signals.cpu.source", s.CPU.Source},
		{levels.Memory, "signals.memory.source", s.Memory.Source},
		{levels.CPUPressure, "signals.pressure.source", s.Pressure.Source},
		{levels.MemoryPressure, "signals.pressure.source", s.Pressure.Source},
		{levels.IOPressure, "signals.pressure.source", s.Pressure.Source},
	}
	for _, so := range sources {
		if so.src != SourceOff {
			continue
		}
		for i, l := range c.Levels {
			if l.thresholds()[so.sig] != nil {
				warnings = append(warnings, fmt.Sprintf("%s: has thresholds but its source is off: it will never trigger (levels[%d].%s is set, %s is off)",
					so.sig, i, so.sig.Key(), so.key))
				break
			}
		}
	}
	return warnings
}
