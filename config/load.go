package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/maps"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
)

// EnvPrefix starts every environment variable that sets a config key.
const EnvPrefix = "DEGRADED_"

// LoadOptions says where [Load] reads the layers above the embedded defaults.
// The zero value loads the defaults alone.
type LoadOptions struct {
	// Path is the YAML file; "" means embedded defaults only. A file over
	// 1 MiB is an error.
	Path string
	// Reload says the file replaces a running config (SIGHUP, POST
	// /-/reload): an empty file (nothing but blank lines and comments) is
	// then an error, since it would silently reset every key to its default,
	// auth included. Otherwise an empty file is only a warning.
	Reload bool
	// Environ is an os.Environ()-style list. DEGRADED_* variables that name
	// a config key set it (DEGRADED_AUTH__TOKEN sets auth.token; a list such
	// as DEGRADED_ALLOWED_HOSTS is comma-separated). The client commands'
	// DEGRADED_ADDR, DEGRADED_TOKEN and DEGRADED_REPORT_TOKEN are skipped;
	// any other DEGRADED_* variable is a warning naming the closest key.
	// nil means no environment.
	Environ []string
	// Flags, if not nil, overrides keys with the flags the user set
	// (Changed). A flag's name is its key with "-" read as "_" ("listen",
	// "data-dir", "log.level"); flags that name no key are ignored.
	Flags *pflag.FlagSet
}

// ValidationError lists every problem found in a configuration, each
// formatted "key.path: what is wrong (was VALUE)". [Load] and
// [Config.Validate] return it; callers print one problem per line and exit 2.
type ValidationError struct {
	Problems []string
}

// Error joins the problems with newlines.
func (e *ValidationError) Error() string { return strings.Join(e.Problems, "\n") }

// Default returns the embedded default configuration. It never fails: a
// broken default.yaml is a programmer error and panics.
func Default() *Config {
	c, _, err := Load(LoadOptions{})
	if err != nil {
		panic("config: embedded default.yaml: " + err.Error())
	}
	return c
}

// clientVars are the client commands' variables: they share the prefix
// but name no config key, and are not warned about.
var clientVars = map[string]bool{"DEGRADED_ADDR": true, "DEGRADED_TOKEN": true, "DEGRADED_REPORT_TOKEN": true}

// Load merges the embedded defaults, the file at o.Path, the environment
// and the changed flags, in that order of increasing precedence, then
// validates the result.
//
// A file that cannot be read, is over 1 MiB, or is not YAML gives an error
// naming the file; so does an empty file when o.Reload is set. Unknown keys,
// values of the wrong type and failed validation give a *[ValidationError]
// with every problem, those caused by an environment variable naming it; no
// Config is returned then. Warnings (an empty file, a DEGRADED_* variable
// that names no key, valid but suspicious settings) are returned in every
// case where the configuration decoded.
func Load(o LoadOptions) (*Config, []string, error) {
	ko := koanf.New(".")
	if err := ko.Load(rawbytes.Provider(defaultYAML), yaml.Parser()); err != nil {
		return nil, nil, fmt.Errorf("embedded default.yaml: %w", err)
	}
	warnings, err := loadFile(ko, o)
	if err != nil {
		return nil, nil, err
	}
	known := settable(reflect.TypeFor[Config](), "", map[string]bool{})
	from, more, err := loadEnv(ko, o.Environ, known)
	warnings = append(warnings, more...)
	if err != nil {
		return nil, nil, err
	}
	if err := loadFlags(ko, o.Flags, known, from); err != nil {
		return nil, nil, err
	}
	c, more, err := decode(ko.Raw(), from)
	return c, append(warnings, more...), err
}

// loadFile merges the file at o.Path, if any, into ko.
func loadFile(ko *koanf.Koanf, o LoadOptions) (warnings []string, err error) {
	if o.Path == "" {
		return nil, nil
	}
	b, err := readFile(o.Path)
	if err != nil {
		return nil, fmt.Errorf("read config file: %w", err)
	}
	m, err := yaml.Parser().Unmarshal(b)
	if err != nil {
		return nil, fmt.Errorf("parse config file %s: %w", o.Path, err)
	}
	if blank(b) {
		if o.Reload {
			return nil, fmt.Errorf("%s: file is empty; a reload needs the whole config", o.Path)
		}
		warnings = append(warnings, o.Path+": file is empty, so the embedded defaults apply")
	}
	maps.IntfaceKeysToStrings(m)
	dropNulls(m, reflect.TypeFor[Config]())
	if err := ko.Load(mapProvider(m), nil); err != nil {
		return nil, fmt.Errorf("merge config file %s: %w", o.Path, err)
	}
	return warnings, nil
}

// loadEnv merges the DEGRADED_* variables of environ into ko. It returns
// which variable set each key, and a warning for each variable that names
// no key.
func loadEnv(ko *koanf.Koanf, environ []string, known map[string]bool) (from map[string]string, warnings []string, err error) {
	from = map[string]string{}
	envp := env.Provider(".", env.Opt{
		Prefix:      EnvPrefix,
		EnvironFunc: func() []string { return environ }, // never os.Environ
		TransformFunc: func(k, v string) (string, any) {
			key, val, warning := envKey(known, k, v)
			if warning != "" {
				warnings = append(warnings, warning)
			} else if key != "" {
				from[key] = k
			}
			return key, val
		},
	})
	if err := ko.Load(envp, nil); err != nil {
		return nil, warnings, fmt.Errorf("environment: %w", err)
	}
	return from, warnings, nil
}

// loadFlags merges the changed flags that name a key into ko; a flag wins
// over the variable that set the same key.
func loadFlags(ko *koanf.Koanf, flags *pflag.FlagSet, known map[string]bool, from map[string]string) error {
	if flags == nil {
		return nil
	}
	fp := posflag.ProviderWithFlag(flags, ".", nil, func(f *pflag.Flag) (string, any) {
		key := strings.ReplaceAll(f.Name, "-", "_")
		if isList, ok := known[key]; !f.Changed || !ok || isList {
			return "", nil
		}
		delete(from, key)
		return key, posflag.FlagVal(flags, f)
	})
	if err := ko.Load(fp, nil); err != nil {
		return fmt.Errorf("flags: %w", err)
	}
	return nil
}

// decode checks the merged tree, decodes it and validates the result.
// Unknown keys and mistyped values are removed and reported, and decoding
// and validation go on without them, so that one run reports every
// problem; from names the variable behind each key's problems.
func decode(raw map[string]any, from map[string]string) (*Config, []string, error) {
	ch := &checker{bad: map[string]bool{}, from: from}
	if !ch.value("", raw, reflect.TypeFor[Config]()) {
		return nil, nil, &ValidationError{Problems: ch.problems}
	}
	problems := ch.problems
	clean := koanf.New(".")
	if err := clean.Load(mapProvider(raw), nil); err != nil {
		return nil, nil, fmt.Errorf("reload checked config: %w", err)
	}
	var c Config
	err := clean.UnmarshalWithConf("", &c, koanf.UnmarshalConf{
		Tag: "koanf",
		DecoderConfig: &mapstructure.DecoderConfig{
			DecodeHook:       mapstructure.ComposeDecodeHookFunc(mapstructure.StringToTimeDurationHookFunc(), byteSizeHook),
			WeaklyTypedInput: true,
			Result:           &c,
		},
	})
	if err != nil {
		// The checker should have caught it; report rather than guess.
		return nil, nil, &ValidationError{Problems: append(problems, "decode: "+err.Error())}
	}
	warnings, err := c.Validate()
	var ve *ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			if !under(p, ch.bad) {
				problems = append(problems, fromEnv(p, from))
			}
		}
	}
	if len(problems) > 0 {
		return nil, warnings, &ValidationError{Problems: problems}
	}
	return &c, warnings, nil
}

// fromEnv appends the variable that set a problem's key to its "(was
// VALUE)": "health_check_interval: must be >= 10ms (was 1ms, from
// DEGRADED_HEALTH_CHECK_INTERVAL)".
func fromEnv(problem string, from map[string]string) string {
	key, _, _ := strings.Cut(problem, ":")
	for k, src := range from {
		if within(key, k) && strings.HasSuffix(problem, ")") {
			return problem[:len(problem)-1] + ", from " + src + ")"
		}
	}
	return problem
}

// blank reports whether a file holds nothing but blank lines, comments and
// document markers: nothing a YAML parser would load.
func blank(b []byte) bool {
	for line := range strings.Lines(string(b)) {
		switch l := strings.TrimSpace(line); {
		case l == "", l == "---", l == "...", strings.HasPrefix(l, "#"):
		default:
			return false
		}
	}
	return true
}

// mapProvider is a koanf.Provider for an already parsed map.
type mapProvider map[string]any

func (m mapProvider) ReadBytes() ([]byte, error) {
	return nil, fmt.Errorf("mapProvider does not support ReadBytes")
}

func (m mapProvider) Read() (map[string]any, error) { return m, nil }

// envKey maps a variable to the key it sets (DEGRADED_AUTH__TOKEN to
// auth.token) and its value: the string, or for a list of strings its
// comma-separated items. A variable that names no settable key maps to ""
// (ignored), with a warning unless it is the client's: one naming the key
// for a list that only a file can set, else one naming the closest key.
func envKey(known map[string]bool, name, value string) (key string, v any, warning string) {
	key = strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(name, EnvPrefix)), "__", ".")
	isList, ok := known[key]
	switch {
	case !ok && clientVars[name]:
		return "", nil, ""
	case !ok && fileOnly(key):
		return "", nil, name + " names " + key + ", a list of sections that only a config file can set"
	case !ok:
		// Compare what follows the prefix, so that the shared prefix does
		// not make unrelated names look close.
		vars := make([]string, 0, len(known))
		for k := range known {
			vars = append(vars, strings.TrimPrefix(envVar(k), EnvPrefix))
		}
		slices.Sort(vars)
		warning = name + " names no config key"
		if v, ok := closest(strings.TrimPrefix(name, EnvPrefix), vars); ok {
			warning += " (did you mean " + EnvPrefix + v + "?)"
		}
		return "", nil, warning
	case isList:
		items := []any{}
		if strings.TrimSpace(value) != "" {
			for item := range strings.SplitSeq(value, ",") {
				items = append(items, strings.TrimSpace(item))
			}
		}
		return key, items, ""
	}
	return key, value, ""
}

// fileOnly reports whether key names a list of sections (levels,
// signals.custom, signals.prometheus.queries), which the environment
// cannot set.
func fileOnly(key string) bool {
	t := reflect.TypeFor[Config]()
	for part := range strings.SplitSeq(key, ".") {
		if t.Kind() != reflect.Struct {
			return false
		}
		f, ok := fieldByKey(t, part)
		if !ok {
			return false
		}
		t = f.Type
	}
	return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct
}

// envVar is the variable that sets key: auth.token is DEGRADED_AUTH__TOKEN.
func envVar(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "__"))
}

// dropNulls deletes the file's null values outside the levels list (an
// empty "tls:" or "health_check_interval:"): null means "not set", so the
// key keeps its default instead of being wiped. Inside levels, null is
// meaningful (a threshold that never triggers) and stays.
func dropNulls(m map[string]any, t reflect.Type) {
	for k, v := range m {
		f, ok := fieldByKey(t, k)
		if !ok {
			continue
		}
		if v == nil {
			delete(m, k)
			continue
		}
		if sub, ok := v.(map[string]any); ok && f.Type.Kind() == reflect.Struct {
			dropNulls(sub, f.Type)
		}
	}
}
