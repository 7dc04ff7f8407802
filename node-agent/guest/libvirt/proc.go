package libvirt

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
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
// libvirt puts its limits): the cpu controller's path on cgroup v1, the unified path on v2.
func domainCgroup(pid int) string {
	if pid <= 0 {
		return ""
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	defer f.Close()
	paths, err := cgroup.ParseProcCgroup(f)
	if err != nil {
		return ""
	}
	p, ok := paths["cpu"]
	if !ok {
		p = paths[""] // cgroup2
	}
	return strings.TrimSuffix(p, "/emulator")
}
