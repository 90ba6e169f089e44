package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
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
	// Path is the YAML file; "" means embedded defaults only.
	Path string
	// Environ is an os.Environ()-style list. Only DEGRADED_* variables that
	// name a scalar config key are used (DEGRADED_AUTH__TOKEN sets
	// auth.token); others are ignored. nil means no environment.
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

// Load merges the embedded defaults, the file at o.Path, the environment
// and the changed flags, in that order of increasing precedence, then
// validates the result.
//
// A file that cannot be read or is not YAML gives an error naming the file.
// Unknown keys, values of the wrong type and failed validation give a
// *[ValidationError] with every problem; no Config is returned then.
// Warnings (valid but suspicious settings) are returned in every case where
// the configuration decoded.
func Load(o LoadOptions) (*Config, []string, error) {
	ko := koanf.New(".")
	if err := ko.Load(rawbytes.Provider(defaultYAML), yaml.Parser()); err != nil {
		return nil, nil, fmt.Errorf("embedded default.yaml: %w", err)
	}
	if o.Path != "" {
		b, err := os.ReadFile(o.Path)
		if err != nil {
			return nil, nil, fmt.Errorf("read config file: %w", err)
		}
		m, err := yaml.Parser().Unmarshal(b)
		if err != nil {
			return nil, nil, fmt.Errorf("parse config file %s: %w", o.Path, err)
		}
		maps.IntfaceKeysToStrings(m)
		dropNulls(m, reflect.TypeFor[Config]())
		if err := ko.Load(mapProvider(m), nil); err != nil {
			return nil, nil, fmt.Errorf("merge config file %s: %w", o.Path, err)
		}
	}
	known := scalarKeys(reflect.TypeFor[Config](), "", map[string]bool{})
	environ := o.Environ
	envp := env.Provider(".", env.Opt{
		Prefix:        EnvPrefix,
		EnvironFunc:   func() []string { return environ }, // never os.Environ
		TransformFunc: envKey(known),
	})
	if err := ko.Load(envp, nil); err != nil {
		return nil, nil, fmt.Errorf("environment: %w", err)
	}
	if o.Flags != nil {
		fp := posflag.ProviderWithFlag(o.Flags, ".", nil, func(f *pflag.Flag) (string, any) {
			key := strings.ReplaceAll(f.Name, "-", "_")
			if !f.Changed || !known[key] {
				return "", nil
			}
			return key, posflag.FlagVal(o.Flags, f)
		})
		if err := ko.Load(fp, nil); err != nil {
			return nil, nil, fmt.Errorf("flags: %w", err)
		}
	}

	// Check the merged tree: unknown keys and mistyped values are removed
	// and reported, and decoding and validation go on without them, so
	// that one run reports every problem.
	raw := ko.Raw()
	var problems []string
	bad := map[string]bool{}
	if !checkValue(&problems, bad, "", raw, reflect.TypeFor[Config]()) {
		return nil, nil, &ValidationError{Problems: problems}
	}
	clean := koanf.New(".")
	if err := clean.Load(mapProvider(raw), nil); err != nil {
		return nil, nil, fmt.Errorf("reload checked config: %w", err)
	}
	var c Config
	err := clean.UnmarshalWithConf("", &c, koanf.UnmarshalConf{
		Tag: "koanf",
		DecoderConfig: &mapstructure.DecoderConfig{
			DecodeHook:       mapstructure.StringToTimeDurationHookFunc(),
			WeaklyTypedInput: true,
			Result:           &c,
		},
	})
	if err != nil {
		// checkValue should have caught it; report rather than guess.
		return nil, nil, &ValidationError{Problems: append(problems, "decode: "+err.Error())}
	}
	warnings, err := c.Validate()
	var ve *ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			if !under(p, bad) {
				problems = append(problems, p)
			}
		}
	}
	if len(problems) > 0 {
		return nil, warnings, &ValidationError{Problems: problems}
	}
	return &c, warnings, nil
}

// mapProvider is a koanf.Provider for an already parsed map.
type mapProvider map[string]any

func (m mapProvider) ReadBytes() ([]byte, error) {
	return nil, fmt.Errorf("mapProvider does not support ReadBytes")
}

func (m mapProvider) Read() (map[string]any, error) { return m, nil }

// envKey maps DEGRADED_AUTH__TOKEN to auth.token, and variables that name
// no scalar key to "" (ignored).
func envKey(known map[string]bool) func(k, v string) (string, any) {
	return func(k, v string) (string, any) {
		key := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(k, EnvPrefix)), "__", ".")
		if !known[key] {
			return "", nil
		}
		return key, v
	}
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
