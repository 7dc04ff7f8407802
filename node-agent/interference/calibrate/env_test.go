package calibrate

import (
	"strings"
	"testing"
)

func TestParseCPUInfo(t *testing.T) {
	for _, tc := range []struct {
		name, text, model string
		cpus              int
	}{
		{"x86", "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Core(TM)  i5-8500 CPU @ 3.00GHz\n\nprocessor\t: 1\nmodel name\t: Intel(R) Core(TM)  i5-8500 CPU @ 3.00GHz\n",
			"Intel(R) Core(TM) i5-8500 CPU @ 3.00GHz", 2},
		{"arm64 without a model", "processor\t: 0\nBogoMIPS\t: 48.00\nCPU part\t: 0xd0b\n\nprocessor\t: 1\nCPU part\t: 0xd0b\n", "0xd0b", 2},
		{"raspberry pi", "processor\t: 0\nCPU part\t: 0xd08\n\nHardware\t: BCM2835\nModel\t: Raspberry Pi 4 Model B Rev 1.4\n", "BCM2835", 1},
		{"empty", "", "", 0},
	} {
		m, n := ParseCPUInfo(strings.NewReader(tc.text))
		if m != tc.model || n != tc.cpus {
			t.Errorf("%s: %q %d, want %q %d", tc.name, m, n, tc.model, tc.cpus)
		}
	}
}

// On the test machine: a kernel, some CPUs, a cgroup version (when /proc is Linux's).
func TestEnvironment(t *testing.T) {
	e, err := Environment()
	if e.Kernel == "" || e.CPUs <= 0 {
		t.Fatalf("environment %+v (%v)", e, err)
	}
	if err == nil && e.Cgroup != "v1" && e.Cgroup != "v2" {
		t.Errorf("cgroup %q", e.Cgroup)
	}
	t.Logf("%+v (err %v)", e, err)
}
