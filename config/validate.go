package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/degraded/degraded/levels"
)

// levelName is the pattern every configured level name must match.
var levelName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,31}$`)

// Validate checks c against every rule of the configuration contract and
// returns all problems at once as a *[ValidationError], each formatted
// "key.path: what is wrong (was VALUE)". Secrets are never echoed. It also
// returns warnings: settings that are valid but probably not what was
// meant. Validate reads auth.token_file and the TLS files to check they are
// readable, and the pressure files (a warning if they are missing); it does
// not modify c.
func (c *Config) Validate() (warnings []string, err error) {
	v := &validator{}

	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		v.add("listen", "must be host:port", c.Listen)
	} else if what := unprotected(c.Listen, c.Auth); what != "" {
		v.add("listen", what, c.Listen)
	}

	v.atLeast("health_check_interval", c.HealthCheckInterval, 10*time.Millisecond)
	v.nonNegative("minimum_level_duration", c.MinimumLevelDuration)
	v.nonNegative("escalation_delay", c.EscalationDelay)
	if c.EscalateAfter < 1 {
		v.add("escalate_after", "must be >= 1", c.EscalateAfter)
	}
	v.positive("error_rate_window", c.ErrorRateWindow)
	switch b := c.ErrorRateWindowBuckets; {
	case b < 1 || b > levels.MaxWindowBuckets:
		v.add("error_rate_window_buckets", fmt.Sprintf("must be in [1, %d]", levels.MaxWindowBuckets), b)
	case c.ErrorRateWindow > 0 && c.ErrorRateWindow/time.Duration(b) < levels.MinWindowBucket:
		v.add("error_rate_window_buckets", fmt.Sprintf("each bucket (error_rate_window / buckets = %s) must be >= %s", c.ErrorRateWindow/time.Duration(b), levels.MinWindowBucket), b)
	}
	if c.MinThroughput < 0 {
		v.add("min_throughput", "must be >= 0", c.MinThroughput)
	}
	if !(c.Hysteresis >= 0 && c.Hysteresis < 1) {
		v.add("hysteresis", "must be in [0, 1)", c.Hysteresis)
	}
	if !(c.RecoveryJitter >= 0 && c.RecoveryJitter < 1) {
		v.add("recovery_jitter", "must be in [0, 1)", c.RecoveryJitter)
	}
	v.atLeast("max_override_ttl", c.MaxOverrideTTL, time.Second)
	v.nonNegative("blind_hold", c.BlindHold)
	v.oneOf("mode", c.Mode, "enforce", "shadow")
	v.oneOf("admission.mode", c.Admission.Mode, AdmissionGraduated, AdmissionLevels)
	if c.MaxConnections < 0 || (c.MaxConnections > 0 && c.MaxConnections < MinConnections) {
		v.add("max_connections", fmt.Sprintf("must be 0 (RLIMIT_NOFILE - 64) or >= %d: 32 are kept for short requests and streams need the rest", MinConnections), c.MaxConnections)
	}
	v.allowedHosts(c.AllowedHosts)

	v.signals(c.Signals)

	v.auth(c.Auth)
	v.tls(c.TLS)
	v.fleet(c.Fleet)

	v.atLeast("sse.heartbeat", c.SSE.Heartbeat, time.Second)
	if c.SSE.MaxSubscribers < 1 {
		v.add("sse.max_subscribers", "must be >= 1", c.SSE.MaxSubscribers)
	}
	v.atLeast("sse.write_timeout", c.SSE.WriteTimeout, time.Second)
	v.oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	v.oneOf("log.format", c.Log.Format, "text", "json")
	v.record(c.Record)

	v.levels(c.Levels, c.customSignals())

	if c.ErrorRateWindow > 0 && c.ErrorRateWindow < c.HealthCheckInterval {
		warnings = append(warnings, fmt.Sprintf(
			"error_rate_window: shorter than health_check_interval (%s), so outcomes between two health checks can age out unseen (was %s)",
			c.HealthCheckInterval, c.ErrorRateWindow))
	}
	warnings = append(warnings, c.signalWarnings()...)
	if len(v.problems) > 0 {
		return warnings, &ValidationError{Problems: v.problems}
	}
	return warnings, nil
}

// validator collects problems in the order the rules run.
type validator struct {
	problems []string
}

func (v *validator) add(key, what string, was any) {
	v.problems = append(v.problems, fmt.Sprintf("%s: %s (was %s)", key, what, show(was)))
}

func (v *validator) positive(key string, d time.Duration) {
	if d <= 0 {
		v.add(key, "must be > 0", d)
	}
}

// atLeast is a lower bound that keeps a duration from burning CPU or
// making its feature unusable.
func (v *validator) atLeast(key string, d, lowest time.Duration) {
	if d < lowest {
		v.add(key, "must be >= "+lowest.String(), d)
	}
}

func (v *validator) nonNegative(key string, d time.Duration) {
	if d < 0 {
		v.add(key, "must be >= 0", d)
	}
}

func (v *validator) oneOf(key, val string, allowed ...string) {
	for _, a := range allowed {
		if val == a {
			return
		}
	}
	v.add(key, "must be one of "+strings.Join(allowed, ", "), val)
}

// source checks that val names one of [Sources].
func (v *validator) source(key, val string) {
	v.oneOf(key, val, Sources()...)
}

// tls checks that cert and key are both set or both empty, readable, and a
// key pair.
func (v *validator) tls(t TLS) {
	if t.CertFile == "" && t.KeyFile == "" {
		return
	}
	if t.KeyFile == "" {
		v.add("tls.key_file", "must be set when tls.cert_file is", "")
		return
	}
	if t.CertFile == "" {
		v.add("tls.cert_file", "must be set when tls.key_file is", "")
		return
	}
	ok := true
	for _, f := range []struct{ key, path string }{{"tls.cert_file", t.CertFile}, {"tls.key_file", t.KeyFile}} {
		if _, err := os.ReadFile(f.path); err != nil {
			v.add(f.key, "must be a readable file: "+cause(err), f.path)
			ok = false
		}
	}
	if ok {
		if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			v.add("tls.cert_file", "is not a certificate matching tls.key_file: "+err.Error(), t.CertFile)
		}
	}
}

// levels checks the table: count, names, priority thresholds and signal
// thresholds, naming each element as levels[i]. custom are the configured
// custom signals, which alone may have levels[i].custom thresholds.
func (v *validator) levels(ls []Level, custom []levels.Signal) {
	if len(ls) < 1 || len(ls) > levels.MaxLevels {
		v.add("levels", fmt.Sprintf("must list 1 to %d levels", levels.MaxLevels), strconv.Itoa(len(ls))+" levels")
	}
	sigs := slices.Clone(levels.AllSignals)
	configured := map[string]bool{}
	var names []string
	for _, s := range custom {
		if !configured[string(s)] && !s.Builtin() {
			configured[string(s)] = true
			sigs = append(sigs, s)
			if levels.CustomNameProblem(string(s)) == "" {
				names = append(names, string(s))
			}
		}
	}
	seen := levelNames{}
	prevPriority := -1 // index of the last level with a valid priority
	type last struct {
		i int
		v float64
	}
	prevSignal := map[levels.Signal]*last{}
	for i, l := range ls {
		key := func(k string) string { return fmt.Sprintf("levels[%d].%s", i, k) }
		if what := seen.problem(i, l.Name); what != "" {
			v.add(key("name"), what, l.Name)
		}
		switch {
		case l.PriorityThreshold < 0:
			v.add(key("priority_threshold"), "must be >= 0", l.PriorityThreshold)
		case prevPriority >= 0 && l.PriorityThreshold < ls[prevPriority].PriorityThreshold:
			v.add(key("priority_threshold"), fmt.Sprintf("must be >= levels[%d].priority_threshold (%d)", prevPriority, ls[prevPriority].PriorityThreshold), l.PriorityThreshold)
		default:
			prevPriority = i
		}
		ths := l.thresholds()
		for _, sig := range sigs {
			p := ths[sig]
			if p == nil {
				continue
			}
			x, name := *p, thresholdKey(sig)
			prev := prevSignal[sig]
			if what := thresholdProblem(sig, x); what != "" {
				v.add(key(name), what, x)
			} else if prev != nil && x < prev.v {
				v.add(key(name), fmt.Sprintf("must be >= levels[%d].%s (%v)", prev.i, name, prev.v), x)
			} else {
				prevSignal[sig] = &last{i, x}
			}
		}
		for _, name := range slices.Sorted(maps.Keys(l.Custom)) {
			if configured[name] {
				continue
			}
			what := "names no signal of signals.custom or signals.prometheus.queries"
			if sig := levels.Signal(name); sig.Builtin() {
				what = "is a built-in signal: its threshold is " + key(sig.Key())
			} else if near, ok := closest(name, names); ok {
				what += "; did you mean " + near + "?"
			}
			v.add(key("custom."+name), what, deref(l.Custom[name]))
		}
		for j, f := range l.Disable {
			if strings.TrimSpace(f) == "" {
				v.add(fmt.Sprintf("levels[%d].disable[%d]", i, j), "must not be empty", f)
			}
		}
	}
}

// maxLatencyMS is the largest latency threshold: the upper bound of the
// last finite latency bucket, which the +Inf bucket reads as.
const maxLatencyMS = 10000

// thresholdKey names sig's threshold within a level: its key for a
// built-in signal (cpu_percent), custom.NAME for a custom one.
func thresholdKey(sig levels.Signal) string {
	if sig.Builtin() {
		return sig.Key()
	}
	return "custom." + sig.Key()
}

// thresholdProblem says what is wrong with x as a threshold of sig, or "".
func thresholdProblem(sig levels.Signal, x float64) string {
	switch {
	case !sig.Builtin():
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return "must be a finite number >= 0"
		}
	case sig == levels.Latency:
		if !(x > 0 && x <= maxLatencyMS) {
			return fmt.Sprintf("must be in (0, %d]", maxLatencyMS)
		}
	case !(x > 0 && x <= 100):
		return "must be in (0, 100]"
	}
	return ""
}

// deref shows a threshold: its value, or null.
func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// levelNames is the one home of the level-name rule: a name matches
// levelName, is not Normal, and is unique, all ignoring case (a CLI or API
// that accepts "major" must find one level). It maps each lower-cased name
// seen to the index and spelling of its first use.
type levelNames map[string]namedAt

// namedAt is where a level name was first used, as written.
type namedAt struct {
	i    int
	name string
}

// problem checks the name of levels[i] against the names before it and
// says what is wrong with it, or "".
func (seen levelNames) problem(i int, name string) string {
	folded := strings.ToLower(name)
	first, dup := seen[folded]
	switch {
	case strings.EqualFold(name, levels.NormalName):
		return "is reserved for level 0 (Normal), ignoring case"
	case !levelName.MatchString(name):
		return "must match " + levelName.String()
	case dup && first.name == name:
		return fmt.Sprintf("duplicates levels[%d].name", first.i)
	case dup:
		return fmt.Sprintf("duplicates levels[%d].name (%s): names are unique ignoring case", first.i, first.name)
	}
	seen[folded] = namedAt{i, name}
	return ""
}

// cause strips the path from a file error: the problem already shows it.
func cause(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
