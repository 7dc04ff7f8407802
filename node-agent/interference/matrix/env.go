package matrix

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
)

// Env is where the numbers were measured.
type Env struct {
	// Kernel is the release (uname -r, as wire.InterferenceProfile and calibrate.Env
	// have it), KernelVersion the build (uname -v).
	Kernel        string `json:"kernel"`
	KernelVersion string `json:"kernelVersion"`
	CPUModel      string `json:"cpuModel"`
	Cores         int    `json:"cores"`
	// SMT: /sys/devices/system/cpu/smt/active ("1", "0", or "" when absent).
	SMT string `json:"smt"`
	// Cgroup: "v1" (with "hybrid" when a cgroup2 mount sits next to it) or "v2";
	// CPUIdle: the cpu controller has cpu.idle (else SetIdle falls back to the least weight).
	Cgroup   string   `json:"cgroup"`
	CPUIdle  bool     `json:"cpuIdle"`
	Backends []string `json:"backends"`
	// Sched: /proc/sys/kernel/sched_* and, when readable, /sys/kernel/debug/sched/* (files
	// of one line).
	Sched    map[string]string `json:"sched"`
	Governor string            `json:"governor,omitempty"`
	// PSI: system pressure files present (/proc/pressure).
	PSI       bool     `json:"psi"`
	LoadAvg   string   `json:"loadavg"`
	GoVersion string   `json:"goVersion"`
	Placement string   `json:"placement"` // this process's cgroup (/proc/self/cgroup, cpu line)
	Notes     []string `json:"notes,omitempty"`
}

// CaptureEnv reads the environment (best effort: what cannot be read stays empty).
func CaptureEnv(backends []string) Env {
	e := Env{Cores: runtime.NumCPU(), Backends: backends, GoVersion: runtime.Version(), Sched: map[string]string{}}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		e.Kernel, e.KernelVersion = unix.ByteSliceToString(u.Release[:]), unix.ByteSliceToString(u.Version[:])
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				e.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	e.SMT = readLine("/sys/devices/system/cpu/smt/active")
	e.Governor = readLine("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
	e.LoadAvg = readLine("/proc/loadavg")
	_, err := os.Stat("/proc/pressure/cpu")
	e.PSI = err == nil
	if h, err := cgroup.Detect(); err == nil {
		e.Cgroup = h.Version().String()
		if h.Version() == cgroup.V1 && h.UnifiedMount() != "" {
			e.Cgroup += " hybrid"
		}
		if g, err := h.Self(); err == nil {
			e.Placement = g.Path()
			if d := g.Dir("cpu"); d != "" {
				_, err := os.Stat(filepath.Join(d, "cpu.idle"))
				e.CPUIdle = err == nil
			}
		}
	}
	files, _ := filepath.Glob("/proc/sys/kernel/sched_*")
	dbg, _ := filepath.Glob("/sys/kernel/debug/sched/*")
	for _, f := range append(files, dbg...) {
		if st, err := os.Stat(f); err != nil || st.IsDir() {
			continue
		}
		if v := readLine(f); v != "" {
			e.Sched[strings.TrimPrefix(strings.TrimPrefix(f, "/proc/sys/kernel/"), "/sys/kernel/debug/")] = v
		}
	}
	if len(dbg) == 0 {
		e.Notes = append(e.Notes, "/sys/kernel/debug/sched not readable (debugfs not mounted or no permission)")
	}
	return e
}

// readLine is the first line of a small file ("" on error or when longer than 200 bytes).
func readLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 4096 {
		return ""
	}
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return ""
	}
	if len(s) > 200 {
		return ""
	}
	return s
}
