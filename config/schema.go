package config

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file checks the merged key tree against the Config type before
// decoding, so that unknown keys and mistyped values are reported with
// their key path ("levels[2].cpu_precent: unknown key") instead of as a
// decoder error or a silently ignored key.

var durationType = reflect.TypeFor[time.Duration]()

// fieldByKey returns the field of struct type t whose koanf tag is key.
// Matching is exact: "Listen" is not "listen".
func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Tag.Get("koanf") == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// keysOf returns the keys of struct type t, in field order.
func keysOf(t reflect.Type) []string {
	keys := make([]string, t.NumField())
	for i := range keys {
		keys[i] = t.Field(i).Tag.Get("koanf")
	}
	return keys
}

// settable adds to known the dotted path of every key of t that the
// environment may set: a single value (flags may set these too), or a list
// of strings (the environment gives it comma-separated), mapped to true.
// Sections are walked; lists of sections (levels) are not settable.
func settable(t reflect.Type, prefix string, known map[string]bool) map[string]bool {
	for i := range t.NumField() {
		f := t.Field(i)
		key := prefix + f.Tag.Get("koanf")
		switch {
		case f.Type.Kind() == reflect.Struct:
			settable(f.Type, key+".", known)
		case f.Type.Kind() != reflect.Slice:
			known[key] = false
		case f.Type.Elem().Kind() == reflect.String:
			known[key] = true
		}
	}
	return known
}

// joinKey builds a problem's key path.
func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// checker checks the merged key tree. It collects problems; bad records
// the paths of values removed because they do not decode, so that
// validation does not report them a second time; from maps a key set by
// the environment to its variable, for the messages.
type checker struct {
	problems []string
	bad      map[string]bool
	from     map[string]string
}

// value appends a problem for every unknown key under v and every value
// that does not decode into t, in key order. It returns false when v itself
// does not decode; the caller then removes v, and records path in bad, so
// that decoding can go on and validation can report the rest.
func (ch *checker) value(path string, v any, t reflect.Type) bool {
	if t == durationType {
		return ch.check(path, v, durationProblem(v))
	}
	if t == byteSizeType && v != nil {
		return ch.check(path, v, byteSizeProblem(v))
	}
	if v == nil {
		return true // absent: the zero value (nil threshold, empty list)
	}
	switch t.Kind() {
	case reflect.Struct:
		return ch.mapping(path, v, t)
	case reflect.Slice:
		return ch.list(path, v, t)
	case reflect.Map:
		return ch.dict(path, v, t)
	case reflect.Pointer:
		return ch.value(path, v, t.Elem())
	}
	return ch.check(path, v, scalarProblem(v, t.Kind()))
}

// check records what is wrong with v at path, if anything, and reports
// whether v is good.
func (ch *checker) check(path string, v any, what string) bool {
	if what == "" {
		return true
	}
	was := show(v)
	if src := ch.from[path]; src != "" {
		was = strconv.Quote(fmt.Sprint(v)) + ", from " + src
	}
	ch.problems = append(ch.problems, fmt.Sprintf("%s: %s (was %s)", path, what, was))
	ch.bad[path] = true
	return false
}

// mapping checks a YAML mapping against struct type t: unknown keys are
// reported (with the closest known key) and removed, and each value is
// checked against its field.
func (ch *checker) mapping(path string, v any, t reflect.Type) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return ch.check(path, v, "must be a mapping")
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		f, ok := fieldByKey(t, k)
		if !ok {
			p := joinKey(path, k) + ": unknown key"
			if near, ok := closest(k, keysOf(t)); ok {
				p += " (did you mean " + joinKey(path, near) + "?)"
			}
			ch.problems = append(ch.problems, p)
			delete(m, k)
			continue
		}
		if !ch.value(joinKey(path, k), m[k], f.Type) {
			delete(m, k)
		}
	}
	return true
}

// dict checks a YAML mapping against map type t (levels[].custom): its
// keys are free, and each value is checked against t's element type.
func (ch *checker) dict(path string, v any, t reflect.Type) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return ch.check(path, v, "must be a mapping")
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !ch.value(joinKey(path, k), m[k], t.Elem()) {
			delete(m, k)
		}
	}
	return true
}

// list checks a YAML list against slice type t, element by element.
func (ch *checker) list(path string, v any, t reflect.Type) bool {
	list, ok := v.([]any)
	if !ok {
		return ch.check(path, v, "must be a list")
	}
	for i, e := range list {
		if !ch.value(fmt.Sprintf("%s[%d]", path, i), e, t.Elem()) {
			list[i] = nil
		}
	}
	return true
}

// durationProblem says what is wrong with v as a duration, or "".
func durationProblem(v any) string {
	const want = "must be a duration such as 30s or 1m"
	switch x := v.(type) {
	case nil, time.Duration:
	case string:
		if _, err := time.ParseDuration(x); err != nil {
			return want
		}
	default:
		// A bare 0 is unambiguous; any other number is not (seconds? ns?).
		if f, ok := number(v); !ok || f != 0 {
			return want
		}
	}
	return ""
}

// scalarProblem says what is wrong with v as a value of kind k, or "".
func scalarProblem(v any, k reflect.Kind) string {
	switch k {
	case reflect.String:
		switch v.(type) {
		case map[string]any, []any:
			return "must be a string"
		}
	case reflect.Bool:
		if x, isStr := v.(string); isStr {
			if _, err := strconv.ParseBool(x); err == nil {
				return ""
			}
		}
		if _, ok := v.(bool); !ok {
			return "must be true or false"
		}
	case reflect.Int, reflect.Int64:
		if !isInteger(v) {
			return "must be an integer"
		}
	case reflect.Float64:
		ok := false
		if s, isStr := v.(string); isStr {
			_, err := strconv.ParseFloat(s, 64)
			ok = err == nil
		} else {
			_, ok = number(v)
		}
		if !ok {
			return "must be a number"
		}
	}
	return ""
}

// isInteger reports whether v decodes into an int64.
func isInteger(v any) bool {
	switch x := v.(type) {
	case int, int8, int16, int32, int64, uint8, uint16, uint32:
		return true
	case uint, uint64:
		return reflect.ValueOf(x).Uint() <= math.MaxInt64
	case float32, float64:
		f, _ := number(x)
		return f == math.Trunc(f) && math.Abs(f) < 1<<63
	case string:
		_, err := strconv.ParseInt(x, 0, 64)
		return err == nil
	}
	return false
}

// under reports whether a problem line is about a key in bad or below one.
func under(problem string, bad map[string]bool) bool {
	key, _, _ := strings.Cut(problem, ":")
	for b := range bad {
		if within(key, b) {
			return true
		}
	}
	return false
}

// within reports whether key is parent or a key below it.
func within(key, parent string) bool {
	return key == parent || strings.HasPrefix(key, parent+".") || strings.HasPrefix(key, parent+"[")
}

// number returns v as a float64 if it is any Go numeric type.
func number(v any) (float64, bool) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(rv.Uint()), true
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	}
	return 0, false
}

// show formats a value for "(was VALUE)": strings plain, quoted when empty
// or when spaces or control characters would hide in the line,
// sections and lists abbreviated, long values cut.
func show(v any) string {
	var s string
	switch x := v.(type) {
	case nil:
		s = "null"
	case secret:
		return "a secret, not shown"
	case string:
		if x == "" {
			return `""`
		}
		s = x
	case map[string]any:
		s = "a mapping"
	case []any:
		s = "a list"
	case time.Duration:
		s = x.String()
	default:
		s = fmt.Sprint(x)
	}
	if r := []rune(s); len(r) > 80 {
		s = string(r[:77]) + "..."
	}
	if !strconv.CanBackquote(s) || strings.TrimSpace(s) != s {
		s = strconv.Quote(s) // one problem per line, no control characters
	}
	return s
}
