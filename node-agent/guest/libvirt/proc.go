package libvirt

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func durationNS(ns int64) time.Duration { return time.Duration(ns) }

// qemuPID finds the QEMU process of a domain by its command line (-name guest=NAME,...):
// libvirt's pid file lives under its run directory, which differs between the system
// daemon and a private one.
func qemuPID(name string) int {
	want := []byte("guest=" + name + ",")
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("qemu-system")) {
			continue
		}
		for _, arg := range bytes.Split(b, []byte{0}) {
			if bytes.HasPrefix(arg, want) {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
				return pid
			}
		}
	}
	return 0
}

// domainCgroup is the domain's cgroup (the parent of QEMU's "emulator" group, where
// libvirt puts its limits), read from /proc/PID/cgroup: the cpu controller's path on
// cgroup v1, the unified path on v2.
func domainCgroup(pid int) string {
	if pid <= 0 {
		return ""
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	var unified, cpu string
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			unified = parts[2]
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "cpu" {
				cpu = parts[2]
			}
		}
	}
	p := cpu
	if p == "" {
		p = unified
	}
	return strings.TrimSuffix(p, "/emulator")
}
