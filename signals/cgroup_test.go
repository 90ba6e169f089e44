package signals

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// copyTree copies the flat testdata directory src into a fresh temp dir.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(filepath.Join("testdata", src))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("testdata", src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dst, e.Name(), string(b))
	}
	return dst
}

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func removeFile(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func cpuStat(usageUsec uint64) string {
	return fmt.Sprintf("usage_usec %d\nuser_usec 0\nsystem_usec 0\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n", usageUsec)
}

func TestCgroupCPU(t *testing.T) {
	type step struct {
		at      time.Duration // now = t0 + at
		usage   uint64        // usage_usec written to cpu.stat before sampling
		want    float64
		warming bool // want ErrWarmingUp
	}
	tests := []struct {
		name   string
		tree   string
		cpuMax string // written over the tree's cpu.max unless empty
		noMax  bool   // remove cpu.max
		numCPU int
		steps  []step
	}{
		{
			name: "quota of 2 CPUs, half a CPU used for a second",
			tree: "cgroup-limited", numCPU: 4,
			steps: []step{
				{at: 0, usage: 1_000_000, warming: true},
				{at: time.Second, usage: 1_500_000, want: 25},
			},
		},
		{
			name: "quota of 2 CPUs over 2 seconds",
			tree: "cgroup-limited", numCPU: 4,
			steps: []step{
				{at: 0, usage: 1_000_000, warming: true},
				{at: 2 * time.Second, usage: 4_000_000, want: 75},
			},
		},
		{
			name: "fractional quota",
			tree: "cgroup-limited", cpuMax: "50000 100000\n", numCPU: 4,
			steps: []step{
				{at: 0, usage: 0, warming: true},
				{at: time.Second, usage: 250_000, want: 50},
			},
		},
		{
			name: "max quota means the online CPUs",
			tree: "cgroup-max", numCPU: 4,
			steps: []step{
				{at: 0, usage: 1_000_000, warming: true},
				{at: time.Second, usage: 2_000_000, want: 25},
			},
		},
		{
			name: "bare max without a period",
			tree: "cgroup-max", cpuMax: "max\n", numCPU: 2,
			steps: []step{
				{at: 0, usage: 0, warming: true},
				{at: time.Second, usage: 1_000_000, want: 50},
			},
		},
		{
			name: "missing cpu.max (root cgroup) means the online CPUs",
			tree: "cgroup-limited", noMax: true, numCPU: 4,
			steps: []step{
				{at: 0, usage: 0, warming: true},
				{at: time.Second, usage: 3_000_000, want: 75},
			},
		},
		{
			name: "quota above the online CPUs is capped at them",
			tree: "cgroup-limited", cpuMax: "800000 100000\n", numCPU: 2,
			steps: []step{
				{at: 0, usage: 0, warming: true},
				{at: time.Second, usage: 1_000_000, want: 50},
			},
		},
		{
			name: "burst above the quota is capped at 100",
			tree: "cgroup-limited", numCPU: 4,
			steps: []step{
				{at: 0, usage: 0, warming: true},
				{at: time.Second, usage: 3_000_000, want: 100},
			},
		},
		{
			name: "idle cgroup is a real zero",
			tree: "cgroup-limited", numCPU: 4,
			steps: []step{
				{at: 0, usage: 1_000_000, warming: true},
				{at: time.Second, usage: 1_000_000, want: 0},
			},
		},
		{
			name: "each sample measures from the previous one",
			tree: "cgroup-limited", numCPU: 4,
			steps: []step{
				{at: 0, usage: 0, warming: true},
				{at: time.Second, usage: 500_000, want: 25},
				{at: 2 * time.Second, usage: 2_500_000, want: 100},
				{at: 3 * time.Second, usage: 3_500_000, want: 50},
			},
		},
		{
			name: "same instant is warming up, not a division by zero",
			tree: "cgroup-limited", numCPU: 4,
			steps: []step{
				{at: 0, usage: 0, warming: true},
				{at: 0, usage: 100, warming: true},
				{at: time.Second, usage: 500_100, want: 25},
			},
		},
		{
			name: "clock going backwards re-baselines",
			tree: "cgroup-limited", numCPU: 4,
			steps: []step{
				{at: 10 * time.Second, usage: 0, warming: true},
				{at: 5 * time.Second, usage: 100, warming: true},
				{at: 6 * time.Second, usage: 1_000_100, want: 50},
			},
		},
		{
			name: "usage going backwards (cgroup recreated) re-baselines",
			tree: "cgroup-limited", numCPU: 4,
			steps: []step{
				{at: 0, usage: 9_000_000, warming: true},
				{at: time.Second, usage: 1_000, warming: true},
				{at: 2 * time.Second, usage: 1_001_000, want: 50},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyTree(t, tt.tree)
			if tt.cpuMax != "" {
				writeFile(t, dir, "cpu.max", tt.cpuMax)
			}
			if tt.noMax {
				removeFile(t, dir, "cpu.max")
			}
			c := NewCgroupCPU(dir)
			c.numCPU = func() int { return tt.numCPU }
			for i, s := range tt.steps {
				writeFile(t, dir, "cpu.stat", cpuStat(s.usage))
				got, err := c.Sample(t.Context(), t0.Add(s.at))
				if s.warming {
					if !errors.Is(err, ErrWarmingUp) || got != 0 {
						t.Fatalf("step %d: Sample() = %v, %v; want 0, ErrWarmingUp", i, got, err)
					}
					continue
				}
				if err != nil || !approx(got, s.want) {
					t.Fatalf("step %d: Sample() = %v, %v; want %v, nil", i, got, err, s.want)
				}
			}
		})
	}
}

func TestCgroupCPUFileErrors(t *testing.T) {
	tests := []struct {
		name    string
		file    string // file to break
		content string // new content; empty means remove the file
		wantIn  []string
	}{
		{name: "missing cpu.stat", file: "cpu.stat", wantIn: []string{"cpu.stat", "no such file"}},
		{name: "cpu.stat without usage_usec", file: "cpu.stat", content: "user_usec 5\n", wantIn: []string{"cpu.stat", "no usage_usec line"}},
		{name: "usage_usec not a number", file: "cpu.stat", content: "usage_usec lots\n", wantIn: []string{"cpu.stat", `"lots"`}},
		{name: "usage_usec negative", file: "cpu.stat", content: "usage_usec -5\n", wantIn: []string{"cpu.stat", `"-5"`}},
		{name: "cpu.max quota without period", file: "cpu.max", content: "200000\n", wantIn: []string{"cpu.max", "no period"}},
		{name: "cpu.max not numbers", file: "cpu.max", content: "two CPUs\n", wantIn: []string{"cpu.max", `"two CPUs"`}},
		{name: "cpu.max zero quota", file: "cpu.max", content: "0 100000\n", wantIn: []string{"cpu.max", "positive"}},
		{name: "cpu.max zero period", file: "cpu.max", content: "200000 0\n", wantIn: []string{"cpu.max", "positive"}},
		{name: "cpu.max empty", file: "cpu.max", content: "\n", wantIn: []string{"cpu.max"}},
		{name: "cpu.max too many fields", file: "cpu.max", content: "1 2 3\n", wantIn: []string{"cpu.max"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyTree(t, "cgroup-limited")
			if tt.content == "" {
				removeFile(t, dir, tt.file)
			} else {
				writeFile(t, dir, tt.file, tt.content)
			}
			c := NewCgroupCPU(dir)
			for i := range 2 { // fails on the first call and after, never warms up
				got, err := c.Sample(t.Context(), t0.Add(time.Duration(i)*time.Second))
				assertFileError(t, got, err, filepath.Join(dir, tt.file), tt.wantIn)
			}
		})
	}
}

func assertFileError(t *testing.T, got float64, err error, path string, wantIn []string) {
	t.Helper()
	if err == nil || errors.Is(err, ErrWarmingUp) {
		t.Fatalf("Sample() = %v, %v; want an error naming %s", got, err, path)
	}
	if got != 0 {
		t.Errorf("Sample() returned value %v alongside error %v", got, err)
	}
	for _, s := range append([]string{path}, wantIn...) {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("Sample() error %q does not mention %q", err, s)
		}
	}
}

func TestCgroupMemory(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name      string
		tree      string
		files     map[string]string // written over the tree
		noMax     bool              // remove memory.max
		hostTotal uint64
		want      float64
	}{
		// (612 MiB current - 100 MiB inactive_file) / 1 GiB
		{name: "limited: working set over memory.max", tree: "cgroup-limited", hostTotal: 64 << 30, want: 50},
		// (400 MiB - 100 MiB) / 1200 MiB host
		{name: "max: divides by host total", tree: "cgroup-max", hostTotal: 1200 * mib, want: 25},
		{name: "missing memory.max (root cgroup) divides by host total", tree: "cgroup-limited", noMax: true, hostTotal: 2048 * mib, want: 25},
		{
			name: "inactive file larger than current is zero",
			tree: "cgroup-limited", hostTotal: 1,
			files: map[string]string{"memory.current": "1000\n", "memory.stat": "inactive_file 5000\n"},
			want:  0,
		},
		{
			name: "current above the limit is capped at 100",
			tree: "cgroup-limited", hostTotal: 1,
			files: map[string]string{"memory.current": "2147483648\n", "memory.stat": "inactive_file 0\n"},
			want:  100,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyTree(t, tt.tree)
			for name, content := range tt.files {
				writeFile(t, dir, name, content)
			}
			if tt.noMax {
				removeFile(t, dir, "memory.max")
			}
			c := NewCgroupMemory(dir)
			c.hostTotal = func(context.Context) (uint64, error) { return tt.hostTotal, nil }
			got, err := c.Sample(t.Context(), t0)
			if err != nil || !approx(got, tt.want) {
				t.Fatalf("Sample() = %v, %v; want %v, nil", got, err, tt.want)
			}
		})
	}
}

func TestCgroupMemoryFileErrors(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		content string // empty means remove the file
		wantIn  []string
	}{
		{name: "missing memory.current", file: "memory.current", wantIn: []string{"no such file"}},
		{name: "memory.current not a number", file: "memory.current", content: "twelve\n", wantIn: []string{`"twelve"`}},
		{name: "missing memory.stat", file: "memory.stat", wantIn: []string{"no such file"}},
		{name: "memory.stat without inactive_file", file: "memory.stat", content: "anon 1\nfile 2\n", wantIn: []string{"no inactive_file line"}},
		{name: "memory.max negative", file: "memory.max", content: "-1\n", wantIn: []string{`"-1"`}},
		{name: "memory.max zero", file: "memory.max", content: "0\n", wantIn: []string{"0 bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyTree(t, "cgroup-limited")
			if tt.content == "" {
				removeFile(t, dir, tt.file)
			} else {
				writeFile(t, dir, tt.file, tt.content)
			}
			c := NewCgroupMemory(dir)
			got, err := c.Sample(t.Context(), t0)
			assertFileError(t, got, err, filepath.Join(dir, tt.file), tt.wantIn)
		})
	}
}

func TestCgroupMemoryHostTotalError(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name  string
		total uint64
		err   error
	}{
		{name: "gopsutil error", err: errBoom},
		{name: "zero total", total: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCgroupMemory(filepath.Join("testdata", "cgroup-max"))
			c.hostTotal = func(context.Context) (uint64, error) { return tt.total, tt.err }
			got, err := c.Sample(t.Context(), t0)
			if err == nil || got != 0 || !strings.Contains(err.Error(), "memory.max is unlimited") {
				t.Fatalf("Sample() = %v, %v; want 0 and an error about the unlimited memory.max", got, err)
			}
			if tt.err != nil && !errors.Is(err, tt.err) {
				t.Errorf("Sample() error %v does not wrap %v", err, tt.err)
			}
		})
	}
}

func TestCgroupMemoryRealHostTotal(t *testing.T) {
	got, err := NewCgroupMemory(filepath.Join("testdata", "cgroup-max")).Sample(t.Context(), t0)
	if err != nil || got <= 0 || got > 100 {
		t.Fatalf("Sample() = %v, %v; want a value in (0, 100]", got, err)
	}
}

func TestCgroupMissingTree(t *testing.T) {
	dir := filepath.Join("testdata", "cgroup-missing")
	tests := []struct {
		name    string
		sampler Sampler
		file    string
	}{
		{name: "cpu", sampler: NewCgroupCPU(dir), file: "cpu.stat"},
		{name: "memory", sampler: NewCgroupMemory(dir), file: "memory.current"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.sampler.Sample(t.Context(), t0)
			assertFileError(t, got, err, filepath.Join(dir, tt.file), []string{"no such file"})
			if !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Sample() error %v does not wrap os.ErrNotExist", err)
			}
		})
	}
}

func TestCgroupSamplersCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	dir := filepath.Join("testdata", "cgroup-limited")
	for name, s := range map[string]Sampler{"cpu": NewCgroupCPU(dir), "memory": NewCgroupMemory(dir)} {
		t.Run(name, func(t *testing.T) {
			if _, err := s.Sample(ctx, t0); err != context.Canceled {
				t.Fatalf("Sample(canceled) error = %v; want context.Canceled unchanged", err)
			}
		})
	}
}

// TestCgroupCPUConcurrent is for the race detector.
func TestCgroupCPUConcurrent(t *testing.T) {
	c := NewCgroupCPU(filepath.Join("testdata", "cgroup-limited"))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				got, err := c.Sample(t.Context(), t0.Add(time.Duration(g*50+i)*time.Millisecond))
				if err != nil && !errors.Is(err, ErrWarmingUp) {
					t.Errorf("Sample() error = %v", err)
				}
				if got < 0 || got > 100 {
					t.Errorf("Sample() = %v; want a value in [0, 100]", got)
				}
			}
		})
	}
	wg.Wait()
}
