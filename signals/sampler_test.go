package signals

import (
	"fmt"
	"strings"
	"testing"
)

func TestCPUAndMemory(t *testing.T) {
	const dir = "/sys/fs/cgroup"
	tests := []struct {
		source   string
		wantCPU  string // %T of the sampler; "<nil>" for none
		wantMem  string
		wantErrs bool
	}{
		{source: string(SourceHost), wantCPU: "*signals.HostCPU", wantMem: "*signals.HostMemory"},
		{source: string(SourceCgroup), wantCPU: "*signals.CgroupCPU", wantMem: "*signals.CgroupMemory"},
		{source: string(SourceOff), wantCPU: "<nil>", wantMem: "<nil>"},
		{source: "", wantErrs: true},
		{source: "Host", wantErrs: true},
		{source: "psi", wantErrs: true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("source %q", tt.source), func(t *testing.T) {
			for _, c := range []struct {
				signal string
				build  func(string, string) (Sampler, error)
				want   string
			}{
				{"cpu", CPU, tt.wantCPU},
				{"memory", Memory, tt.wantMem},
			} {
				s, err := c.build(tt.source, dir)
				if tt.wantErrs {
					if err == nil || s != nil {
						t.Fatalf("%s(%q) = %v, %v; want nil and an error", c.signal, tt.source, s, err)
					}
					if !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.source)) || !strings.Contains(err.Error(), c.signal) {
						t.Errorf("%s(%q) error %q does not name the signal and the bad source", c.signal, tt.source, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s(%q) error = %v", c.signal, tt.source, err)
				}
				if got := fmt.Sprintf("%T", s); got != c.want {
					t.Errorf("%s(%q) = %s; want %s", c.signal, tt.source, got, c.want)
				}
				if c.want == "<nil>" && s != nil {
					t.Errorf("%s(%q) = %#v; want a nil interface", c.signal, tt.source, s)
				}
			}
		})
	}
}

func TestCgroupSamplersUseDir(t *testing.T) {
	cpu, _ := CPU(string(SourceCgroup), "/custom/cg")
	mem, _ := Memory(string(SourceCgroup), "/custom/cg")
	if got := cpu.(*CgroupCPU).dir; got != "/custom/cg" {
		t.Errorf("CPU cgroup dir = %q; want /custom/cg", got)
	}
	if got := mem.(*CgroupMemory).dir; got != "/custom/cg" {
		t.Errorf("Memory cgroup dir = %q; want /custom/cg", got)
	}
}
