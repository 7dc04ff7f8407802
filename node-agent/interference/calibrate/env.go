package calibrate

import (
	"bufio"
	"io"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
)

// Environment reads this host's environment: the running kernel's release (uname), the
// CPU model and the number of CPUs (/proc/cpuinfo; runtime.NumCPU when it lists none)
// and the cgroup version (cgroup.Detect). Backend is the guest's and left to the caller.
// What cannot be read stays empty; the error is the first failure (the rest is still
// filled), so that a host whose cgroups cannot be read compares as "cgroup changed"
// rather than not at all.
func Environment() (Env, error) {
	var e Env
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		keep(err)
	} else {
		e.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if f, err := os.Open("/proc/cpuinfo"); err != nil {
		keep(err)
	} else {
		e.CPUModel, e.CPUs = ParseCPUInfo(f)
		f.Close()
	}
	if e.CPUs == 0 {
		e.CPUs = runtime.NumCPU()
	}
	if h, err := cgroup.Detect(); err != nil {
		keep(err)
	} else {
		e.Cgroup = h.Version().String()
	}
	return e, first
}

// cpuModelKeys are /proc/cpuinfo's names of the CPU model, by architecture: x86
// "model name", arm64 and others "Hardware"/"Model" or "CPU part", POWER "cpu",
// RISC-V "uarch". The first one present wins.
var cpuModelKeys = []string{"model name", "Hardware", "Model", "cpu model", "uarch", "cpu", "CPU part"}

// ParseCPUInfo reads /proc/cpuinfo text: the CPU model (the first processor's, by
// cpuModelKeys, spaces collapsed, at most 200 bytes) and the number of "processor"
// entries.
func ParseCPUInfo(r io.Reader) (model string, cpus int) {
	found := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.Join(strings.Fields(v), " ")
		if k == "processor" {
			cpus++
			continue
		}
		if _, seen := found[k]; !seen && v != "" {
			found[k] = v
		}
	}
	for _, k := range cpuModelKeys {
		if v, ok := found[k]; ok {
			if len(v) > 200 {
				v = v[:200]
			}
			return v, cpus
		}
	}
	return "", cpus
}
