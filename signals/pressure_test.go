package signals

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// hostPressure returns a host-source Pressure reading a copy of the testdata
// directory tree instead of /proc/pressure.
func hostPressure(t *testing.T, tree string) (*Pressure, string) {
	t.Helper()
	p, err := NewPressure("host", "")
	if err != nil {
		t.Fatal(err)
	}
	p.dir = copyTree(t, tree)
	return p, p.dir
}

func cgroupPressure(t *testing.T, tree string) (*Pressure, string) {
	t.Helper()
	dir := copyTree(t, tree)
	p, err := NewPressure("cgroup", dir)
	if err != nil {
		t.Fatal(err)
	}
	return p, dir
}

func TestPressureSample(t *testing.T) {
	tests := []struct {
		name string
		new  func(*testing.T, string) (*Pressure, string)
		tree string
		want PressureReading
	}{
		{
			name: "host /proc/pressure files",
			new:  hostPressure, tree: "psi-host",
			want: PressureReading{CPU: PSI{1.5, 2.25}, Memory: PSI{0.01, 1.57}, IO: PSI{12, 8.5}},
		},
		{
			name: "host cpu without a full line (before Linux 5.13)",
			new:  hostPressure, tree: "psi-host-old-kernel",
			want: PressureReading{CPU: PSI{0.75, 0.5}, Memory: PSI{0.01, 1.57}, IO: PSI{12, 8.5}},
		},
		{
			name: "cgroup <dir>/<resource>.pressure files",
			new:  cgroupPressure, tree: "psi-cgroup",
			want: PressureReading{CPU: PSI{45, 38.2}, Memory: PSI{5.1, 4.2}, IO: PSI{0, 0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := tt.new(t, tt.tree)
			got, err := p.Sample(t.Context())
			if err != nil {
				t.Fatalf("Sample() error %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Sample() mismatch (-want +got):\n%s", diff)
			}
			for _, res := range []PressureResource{PressureCPU, PressureMemory, PressureIO} {
				if _, err := got.Get(res); err != nil {
					t.Errorf("Get(%s) error %v after a clean sample", res, err)
				}
			}
		})
	}
}

func TestPressureSampleOneResourceFails(t *testing.T) {
	tests := []struct {
		name    string
		file    string // the cgroup file to break
		content string // new content; empty means remove the file
		wantIn  []string
	}{
		{name: "missing io.pressure", file: "io.pressure", wantIn: []string{"sample io pressure", "no such file"}},
		{name: "missing cpu.pressure", file: "cpu.pressure", wantIn: []string{"sample cpu pressure", "no such file"}},
		{name: "malformed memory.pressure", file: "memory.pressure", content: "some avg10=101 avg60=0 avg300=0 total=0\n", wantIn: []string{"sample memory pressure", "above 100"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, dir := cgroupPressure(t, "psi-cgroup")
			if tt.content == "" {
				removeFile(t, dir, tt.file)
			} else {
				writeFile(t, dir, tt.file, tt.content)
			}
			failed := PressureResource(strings.TrimSuffix(tt.file, ".pressure"))
			path := filepath.Join(dir, tt.file)

			got, err := p.Sample(t.Context())
			if err == nil || !strings.Contains(err.Error(), path) {
				t.Fatalf("Sample() error %v; want one naming %s", err, path)
			}
			if len(got.Errs) != 1 || got.Errs[failed] == nil {
				t.Fatalf("Sample() Errs = %v; want only %s", got.Errs, failed)
			}
			psi, gerr := got.Get(failed)
			if gerr == nil || psi != (PSI{}) {
				t.Fatalf("Get(%s) = %+v, %v; want a zero PSI and an error", failed, psi, gerr)
			}
			for _, s := range append([]string{path}, tt.wantIn...) {
				if !strings.Contains(gerr.Error(), s) {
					t.Errorf("Get(%s) error %q does not mention %q", failed, gerr, s)
				}
			}
			// The other two resources are still read.
			want := map[PressureResource]PSI{PressureCPU: {45, 38.2}, PressureMemory: {5.1, 4.2}, PressureIO: {0, 0}}
			for res, w := range want {
				if res == failed {
					continue
				}
				if psi, err := got.Get(res); err != nil || psi != w {
					t.Errorf("Get(%s) = %+v, %v; want %+v, nil despite %s failing", res, psi, err, w, failed)
				}
			}
		})
	}
}

func TestPressureSampleAllMissing(t *testing.T) {
	dir := copyTree(t, "cgroup-missing")
	p, err := NewPressure("cgroup", dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Sample(t.Context())
	if err == nil {
		t.Fatal("Sample() error nil on a directory without pressure files")
	}
	if len(got.Errs) != 3 {
		t.Errorf("Sample() Errs = %v; want one per resource", got.Errs)
	}
	for _, name := range []string{"cpu.pressure", "memory.pressure", "io.pressure"} {
		if path := filepath.Join(dir, name); !strings.Contains(err.Error(), path) {
			t.Errorf("Sample() error %q does not name %s", err, path)
		}
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Sample() error %v does not wrap fs.ErrNotExist", err)
	}
}

func TestPressureSampleCanceledContext(t *testing.T) {
	p, _ := cgroupPressure(t, "psi-cgroup")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	got, err := p.Sample(ctx)
	if !errors.Is(err, context.Canceled) || !cmp.Equal(got, PressureReading{}) {
		t.Fatalf("Sample(canceled) = %+v, %v; want a zero reading and context.Canceled", got, err)
	}
}

func TestPressureSampleConcurrent(t *testing.T) {
	p, _ := cgroupPressure(t, "psi-cgroup")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				if got, err := p.Sample(t.Context()); err != nil || got.CPU != (PSI{45, 38.2}) {
					t.Errorf("Sample() = %+v, %v", got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestPressureReadingGetUnknownResource(t *testing.T) {
	_, err := PressureReading{}.Get("irq")
	if err == nil || !strings.Contains(err.Error(), `"irq"`) {
		t.Fatalf(`Get("irq") error %v; want one naming "irq"`, err)
	}
}

func TestNewPressure(t *testing.T) {
	tests := []struct {
		source   string
		wantPath string // the cpu file it reads; empty for a nil sampler
		wantErr  string
	}{
		{source: "host", wantPath: "/proc/pressure/cpu"},
		{source: "cgroup", wantPath: "/sys/fs/cgroup/app.slice/cpu.pressure"},
		{source: "off"},
		{source: "", wantErr: `unknown pressure source ""`},
		{source: "proc", wantErr: `unknown pressure source "proc"`},
	}
	for _, tt := range tests {
		t.Run(tt.source, func(t *testing.T) {
			p, err := NewPressure(tt.source, "/sys/fs/cgroup/app.slice")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NewPressure(%q) error %v; want %q", tt.source, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewPressure(%q) error %v", tt.source, err)
			}
			if tt.wantPath == "" {
				if p != nil {
					t.Fatalf("NewPressure(%q) = %+v; want nil", tt.source, p)
				}
				return
			}
			if got := p.path(PressureCPU); got != tt.wantPath {
				t.Errorf("NewPressure(%q) reads %s; want %s", tt.source, got, tt.wantPath)
			}
		})
	}
}

func TestCheckPressure(t *testing.T) {
	tests := []struct {
		name     string
		remove   []string
		write    map[string]string
		wantFile string // the file the error names; empty for nil
		notExist bool   // the error wraps fs.ErrNotExist
		wantIn   string
	}{
		{name: "all three files present"},
		{name: "io.pressure missing", remove: []string{"io.pressure"}, wantFile: "io.pressure", notExist: true, wantIn: "does not exist"},
		{
			name:   "memory and io missing: names memory first",
			remove: []string{"memory.pressure", "io.pressure"}, wantFile: "memory.pressure", notExist: true,
			wantIn: "a kernel without PSI",
		},
		{name: "cpu.pressure malformed", write: map[string]string{"cpu.pressure": "usage_usec 5\n"}, wantFile: "cpu.pressure", wantIn: `no "some" line`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyTree(t, "psi-cgroup")
			for _, name := range tt.remove {
				removeFile(t, dir, name)
			}
			for name, content := range tt.write {
				writeFile(t, dir, name, content)
			}
			err := CheckPressure("cgroup", dir)
			if tt.wantFile == "" {
				if err != nil {
					t.Fatalf("CheckPressure() error %v; want nil", err)
				}
				return
			}
			path := filepath.Join(dir, tt.wantFile)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.wantIn) {
				t.Fatalf("CheckPressure() error %v; want one naming %s and saying %q", err, path, tt.wantIn)
			}
			if got := errors.Is(err, fs.ErrNotExist); got != tt.notExist {
				t.Errorf("errors.Is(%v, fs.ErrNotExist) = %v; want %v", err, got, tt.notExist)
			}
		})
	}
}

func TestCheckPressureSources(t *testing.T) {
	if err := CheckPressure("off", "/nonexistent"); err != nil {
		t.Errorf(`CheckPressure("off") error %v; want nil: nothing is read`, err)
	}
	if err := CheckPressure("psi", ""); err == nil || !strings.Contains(err.Error(), `"psi"`) {
		t.Errorf(`CheckPressure("psi") error %v; want one naming the unknown source`, err)
	}
	err := CheckPressure("cgroup", filepath.Join(t.TempDir(), "gone"))
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "cpu.pressure") || !strings.Contains(err.Error(), "not a cgroup v2 directory") {
		t.Errorf("CheckPressure(cgroup, missing dir) error %v; want cpu.pressure named as missing", err)
	}
}

func TestCheckPressureHostMissing(t *testing.T) {
	p, dir := hostPressure(t, "psi-host")
	if err := p.check(); err != nil {
		t.Fatalf("check() error %v on a complete /proc/pressure", err)
	}
	removeFile(t, dir, "cpu")
	err := p.check()
	path := filepath.Join(dir, "cpu")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path+" does not exist") {
		t.Fatalf("check() error %v; want %s named as missing", err, path)
	}
}

func TestPressureFileSizeLimit(t *testing.T) {
	dir := t.TempDir()
	valid := "some avg10=1.00 avg60=2.00 avg300=3.00 total=4\n"
	// Exactly 4 KiB: read whole; a line of another kind pads it.
	writeFile(t, dir, "cpu.pressure", valid+"pad "+strings.Repeat("x", maxPressureFileSize-len(valid)-5)+"\n")
	if got, err := readPressureFile(filepath.Join(dir, "cpu.pressure")); err != nil || got.Some.Avg60 != 2 {
		t.Fatalf("readPressureFile(4 KiB) = %+v, %v; want avg60 2", got, err)
	}
	// One byte more is refused, without reading the rest.
	writeFile(t, dir, "cpu.pressure", valid+strings.Repeat("x", 1<<20))
	if _, err := readPressureFile(filepath.Join(dir, "cpu.pressure")); err == nil || !strings.Contains(err.Error(), "larger than 4096 bytes") {
		t.Fatalf("readPressureFile(1 MiB) error %v; want a size error", err)
	}
}

// TestPressureRealHost reads this machine's /proc/pressure.
func TestPressureRealHost(t *testing.T) {
	if _, err := os.Stat("/proc/pressure/cpu"); err != nil {
		t.Skipf("no PSI on this kernel: %v", err)
	}
	if err := CheckPressure("host", ""); err != nil {
		t.Fatalf("CheckPressure(host) error %v", err)
	}
	p, err := NewPressure("host", "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Sample(t.Context())
	if err != nil {
		t.Fatalf("Sample() error %v", err)
	}
	assertPressureInRange(t, got)
}

// TestPressureRealCgroup reads the pressure files of this machine's cgroup
// v2 root (mounted at /sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid
// hierarchy).
func TestPressureRealCgroup(t *testing.T) {
	var dir string
	for _, d := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if CheckPressure("cgroup", d) == nil {
			dir = d
			break
		}
	}
	if dir == "" {
		t.Skip("no cgroup v2 directory with pressure files")
	}
	p, err := NewPressure("cgroup", dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Sample(t.Context())
	if err != nil {
		t.Fatalf("Sample() error %v", err)
	}
	assertPressureInRange(t, got)
}

func assertPressureInRange(t *testing.T, r PressureReading) {
	t.Helper()
	for _, res := range []PressureResource{PressureCPU, PressureMemory, PressureIO} {
		psi, err := r.Get(res)
		if err != nil {
			t.Errorf("Get(%s) error %v", res, err)
		}
		for _, v := range []float64{psi.Avg10, psi.Avg60} {
			if v < 0 || v > 100 {
				t.Errorf("%s pressure %+v outside [0, 100]", res, psi)
			}
		}
	}
}
