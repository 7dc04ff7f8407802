package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/overtime-hpc/overtime/boot/storm"
)

// The boot server's storm tuning (boot/storm) against the kernel's and dnsmasq's
// defaults. A *-defaults storm sets every sysctl of storm.Sysctls to its Default and
// leaves the storm options (tftp-max, dhcp-lease-max) out of the rendered configuration;
// every other run has the sysctls at the boot server's values (as `overtime bootserver
// run` sets them) and the configuration as rendered. The sysctls are host-wide (one
// value for all network namespaces on Linux 6.x), so the benchmark sets them on the host
// for each run and puts back what it found when it ends.

const defaultsSuffix = "-defaults"

// isDefaults says whether a run kind is the untuned variant.
func isDefaults(kind string) bool { return strings.HasSuffix(kind, defaultsSuffix) }

// stormConfLines are the rendered lines a -defaults run leaves out (dnsmasq's defaults:
// 50 TFTP transfers, 1000 leases).
var stormConfLines = []string{"tftp-max=", "dhcp-lease-max="}

// revertStormOptions comments out the storm options of a rendered configuration.
func revertStormOptions(conf []byte) []byte {
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(conf))
	for sc.Scan() {
		l := sc.Text()
		for _, p := range stormConfLines {
			if strings.HasPrefix(l, p) {
				l = "# " + l + ": left out by bootstorm (dnsmasq's default, *" + defaultsSuffix + " run)"
				break
			}
		}
		out.WriteString(l + "\n")
	}
	return out.Bytes()
}

var sysctlSaved struct {
	sync.Mutex
	vals map[string]int64
}

// setStormSysctls sets the sysctls for a run (remembering the host's values the first
// time) and returns what they are now.
func setStormSysctls(defaults bool) (map[string]int64, error) {
	sysctlSaved.Lock()
	defer sysctlSaved.Unlock()
	if sysctlSaved.vals == nil {
		sysctlSaved.vals = map[string]int64{}
		for _, s := range storm.Sysctls {
			v, err := storm.Read(s.Key)
			if err != nil {
				return nil, err
			}
			sysctlSaved.vals[s.Key] = v
		}
	}
	now := map[string]int64{}
	for _, s := range storm.Sysctls {
		v := s.Value
		if defaults {
			v = s.Default
		}
		if err := storm.Write(s.Key, v); err != nil {
			return nil, fmt.Errorf("%s=%d: %w", s.Key, v, err)
		}
		now[s.Key], _ = storm.Read(s.Key)
	}
	return now, nil
}

// restoreSysctls puts back the host's values. Idempotent.
func restoreSysctls() {
	sysctlSaved.Lock()
	defer sysctlSaved.Unlock()
	for k, v := range sysctlSaved.vals {
		if err := storm.Write(k, v); err != nil {
			fmt.Fprintf(os.Stderr, "bootstorm: cannot restore %s=%d: %v\n", k, v, err)
		}
	}
	sysctlSaved.vals = nil
}

// socketDrops sums the drops column of /proc/PID/net/udp (the namespace of the process)
// by local port: the packets the kernel dropped at each socket because its receive
// buffer was full.
func socketDrops(pid int) map[int]int64 {
	out := map[int]int64{}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/udp", pid))
	if err != nil {
		return out
	}
	for _, l := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(l)
		if len(f) < 13 {
			continue
		}
		_, port, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		p, err1 := strconv.ParseInt(port, 16, 32)
		d, err2 := strconv.ParseInt(f[len(f)-1], 10, 64)
		if err1 == nil && err2 == nil {
			out[int(p)] += d
		}
	}
	return out
}

// neighbours counts the IPv4 neighbour entries of the namespace of a process.
func neighbours(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/arp", pid))
	if err != nil {
		return -1
	}
	return max(0, strings.Count(string(b), "\n")-1)
}

// kernelNetStats are host-wide counters (all namespaces): the ARP table's
// (/proc/net/stat/arp_cache, summed over CPUs) and the per-CPU input backlog's drops
// (/proc/net/softnet_stat, second column; veth delivers through it).
func kernelNetStats() map[string]int64 {
	out := map[string]int64{}
	if b, err := os.ReadFile("/proc/net/stat/arp_cache"); err == nil {
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 1 {
			names := strings.Fields(lines[0])
			for _, l := range lines[1:] {
				for i, v := range strings.Fields(l) {
					if i < len(names) && names[i] != "entries" {
						x, _ := strconv.ParseInt(v, 16, 64)
						out["arp_"+names[i]] += x
					}
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/net/softnet_stat"); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if f := strings.Fields(l); len(f) > 1 {
				x, _ := strconv.ParseInt(f[1], 16, 64)
				out["softnet_dropped"] += x
			}
		}
	}
	return out
}
