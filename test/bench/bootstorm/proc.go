package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100 on every
// Linux architecture Go supports (the kernel exports it as a constant to user space).
const clockTicks = 100

// procCPU returns utime+stime of a process (all its threads, dead ones included).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(s[i+1:])
	// After the command: state is field 3, utime 14, stime 15 (1-based, proc(5)).
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime/stime", pid)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// udpCounters reads the Udp: line of /proc/PID/net/snmp: the counters of the network
// namespace the process is in.
func udpCounters(pid int) (map[string]int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/net/snmp", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "Udp: ") {
			continue
		}
		if names == nil {
			names = strings.Fields(l)[1:]
			continue
		}
		out := map[string]int64{}
		for i, v := range strings.Fields(l)[1:] {
			if i < len(names) {
				out[names[i]], _ = strconv.ParseInt(v, 10, 64)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("/proc/%d/net/snmp: no Udp lines", pid)
}

// childAttr ties a child to this process: it gets SIGKILL when we die, however we die.
// `ip netns exec` execs the command in place, so the setting reaches the real program.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// procRunDelay is the time a process's threads spent runnable but waiting for a CPU
// (second field of /proc/PID/schedstat, summed over its threads: /proc/PID/task/*).
func procRunDelay(pid int) (time.Duration, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) >= 2 {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			sum += v
		}
	}
	return time.Duration(sum), nil
}
