package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Record configures the timeline: one JSON line per health check, event
// and reload in data_dir/timeline/YYYY-MM-DD.jsonl (DESIGN.md "Shadow mode
// and replay"). A data_dir of "" disables it whatever Enabled says.
type Record struct {
	// Enabled turns recording on.
	Enabled bool `koanf:"enabled"`
	// Retention deletes files whose day ended longer ago than this (> 0).
	Retention time.Duration `koanf:"retention"`
	// MaxBytes bounds the files' total size: the oldest are deleted first
	// (>= 1 MiB). The file being written is never deleted.
	MaxBytes ByteSize `koanf:"max_bytes"`
}

// ByteSize is a size in bytes. In a config it is an integer or a string
// with a KiB, MiB or GiB suffix ("256MiB").
type ByteSize int64

var byteSizeType = reflect.TypeFor[ByteSize]()

// byteUnits are the suffixes a ByteSize may carry.
var byteUnits = []struct {
	suffix string
	size   int64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}}

// ParseByteSize reads an integer number of bytes, or one followed by KiB,
// MiB or GiB.
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if num, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(num), u.size
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size such as 268435456 or 256MiB", s)
	}
	return ByteSize(n * mult), nil
}

// String writes the size with the largest unit that divides it.
func (b ByteSize) String() string {
	for i := len(byteUnits) - 1; i >= 0; i-- {
		if u := byteUnits[i]; b != 0 && int64(b)%u.size == 0 {
			return strconv.FormatInt(int64(b)/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// byteSizeProblem says what is wrong with v as a ByteSize, or "".
func byteSizeProblem(v any) string {
	const want = "must be a size in bytes, or with a KiB, MiB or GiB suffix, such as 256MiB"
	if s, ok := v.(string); ok {
		if _, err := ParseByteSize(s); err != nil {
			return want
		}
		return ""
	}
	if f, ok := number(v); !ok || !isInteger(v) || f < 0 {
		return want
	}
	return ""
}

// byteSizeHook decodes a string with a unit into a ByteSize.
func byteSizeHook(_ reflect.Type, to reflect.Type, data any) (any, error) {
	s, ok := data.(string)
	if to != byteSizeType || !ok {
		return data, nil
	}
	return ParseByteSize(s)
}

// record checks the record section.
func (v *validator) record(r Record) {
	v.positive("record.retention", r.Retention)
	if r.MaxBytes < 1<<20 {
		v.add("record.max_bytes", "must be >= 1MiB", r.MaxBytes)
	}
}
