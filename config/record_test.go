package config

import (
	"slices"
	"testing"
	"time"
)

func TestRecordMaxBytes(t *testing.T) {
	tests := []struct {
		yaml string
		want ByteSize
	}{
		{"268435456", 256 << 20},
		{"256MiB", 256 << 20},
		{"2GiB", 2 << 30},
		{"4096KiB", 4 << 20},
		{`"1048576"`, 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.yaml, func(t *testing.T) {
			c, _, err := Load(LoadOptions{Path: writeConfig(t, "record:\n  max_bytes: "+tt.yaml+"\n")})
			if err != nil {
				t.Fatal(err)
			}
			if c.Record.MaxBytes != tt.want {
				t.Errorf("max_bytes %s = %d, want %d", tt.yaml, c.Record.MaxBytes, tt.want)
			}
		})
	}
}

func TestValidateRecord(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"a unit it does not know", "record:\n  max_bytes: 256MB\n",
			[]string{"record.max_bytes: must be a size in bytes, or with a KiB, MiB or GiB suffix, such as 256MiB (was 256MB)"}},
		{"negative", "record:\n  max_bytes: -1\n",
			[]string{"record.max_bytes: must be a size in bytes, or with a KiB, MiB or GiB suffix, such as 256MiB (was -1)"}},
		{"a fraction", "record:\n  max_bytes: 1.5\n",
			[]string{"record.max_bytes: must be a size in bytes, or with a KiB, MiB or GiB suffix, such as 256MiB (was 1.5)"}},
		{"too small to hold a day", "record:\n  max_bytes: 1000\n", []string{"record.max_bytes: must be >= 1MiB (was 1000)"}},
		{"no retention", "record:\n  retention: 0s\n", []string{"record.retention: must be > 0 (was 0s)"}},
		{"not a duration", "record:\n  retention: week\n", []string{"record.retention: must be a duration such as 30s or 1m (was week)"}},
		{"unknown key", "record:\n  enable: true\n", []string{"record.enable: unknown key (did you mean record.enabled?)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Load(LoadOptions{Path: writeConfig(t, tt.yaml)})
			if got := problems(t, err); !slices.Equal(got, tt.want) {
				t.Errorf("problems %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRecordFromEnvironment(t *testing.T) {
	c, _, err := Load(LoadOptions{Environ: []string{"DEGRADED_RECORD__MAX_BYTES=64MiB", "DEGRADED_RECORD__RETENTION=24h", "DEGRADED_RECORD__ENABLED=false"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Record; r.MaxBytes != 64<<20 || r.Retention != 24*time.Hour || r.Enabled {
		t.Errorf("record = %+v, want disabled, 24h, 64MiB", r)
	}
}
