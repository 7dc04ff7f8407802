// Package hostinfo answers what the desktop itself has (memory), for the node agent's
// guest limits and the course-VM player's caps.
package hostinfo

import (
	"os"
	"strconv"
	"strings"
)

// MemTotalMB is the machine's memory in MiB from /proc/meminfo (0 if unreadable).
func MemTotalMB() int {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kb / 1024
		}
	}
	return 0
}
