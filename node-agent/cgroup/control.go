package cgroup

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// SetIdle puts the group in the idle scheduling class (on) or back to normal (off): v2
// and v1 cpu.idle (Linux 5.15+). Where cpu.idle is missing it falls back to the smallest
// weight: v1 cpu.shares 2 (normal 1024), v2 cpu.weight 1 (normal 100).
func (g *Group) SetIdle(on bool) error {
	d, err := g.ctrlDir("cpu", "idle class")
	if err != nil {
		return err
	}
	if exists(filepath.Join(d, "cpu.idle")) {
		return writeFile(filepath.Join(d, "cpu.idle"), boolString(on))
	}
	if g.h.version == V2 {
		w := "100"
		if on {
			w = "1"
		}
		return writeFile(filepath.Join(d, "cpu.weight"), w)
	}
	s := "1024"
	if on {
		s = "2"
	}
	return writeFile(filepath.Join(d, "cpu.shares"), s)
}

// Idle reports whether the group is in the idle class (cpu.idle 1, or the minimum weight
// where cpu.idle is missing).
func (g *Group) Idle() (bool, error) {
	d, err := g.ctrlDir("cpu", "idle class")
	if err != nil {
		return false, err
	}
	if exists(filepath.Join(d, "cpu.idle")) {
		s, err := readFile(filepath.Join(d, "cpu.idle"))
		return s == "1", err
	}
	file, min := filepath.Join(d, "cpu.shares"), "2"
	if g.h.version == V2 {
		file, min = filepath.Join(d, "cpu.weight"), "1"
	}
	s, err := readFile(file)
	return s == min, err
}

func boolString(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// SetCPUMax caps the group's CPU bandwidth at cpus CPUs per Period (v2 cpu.max, v1
// cpu.cfs_quota_us and cpu.cfs_period_us); cpus <= 0 removes the cap.
func (g *Group) SetCPUMax(cpus float64) error {
	d, err := g.ctrlDir("cpu", "CPU bandwidth")
	if err != nil {
		return err
	}
	if g.h.version == V2 {
		return writeFile(filepath.Join(d, "cpu.max"), FormatCPUMax(cpus))
	}
	quota := "-1"
	if q := QuotaFor(cpus); q > 0 {
		quota = strconv.FormatInt(q.Microseconds(), 10)
	}
	if err := writeFile(filepath.Join(d, "cpu.cfs_period_us"), strconv.FormatInt(Period.Microseconds(), 10)); err != nil {
		return err
	}
	return writeFile(filepath.Join(d, "cpu.cfs_quota_us"), quota)
}

// ClearCPUMax removes the cap: SetCPUMax(0).
func (g *Group) ClearCPUMax() error { return g.SetCPUMax(0) }

// CPUMax reads the cap back in CPUs (0: none).
func (g *Group) CPUMax() (float64, error) {
	d, err := g.ctrlDir("cpu", "CPU bandwidth")
	if err != nil {
		return 0, err
	}
	if g.h.version == V2 {
		f := filepath.Join(d, "cpu.max")
		s, err := readFile(f)
		if err != nil {
			return 0, err
		}
		v, err := ParseCPUMax(s)
		if err != nil {
			return 0, fmt.Errorf("cgroup: %s: %w", f, err)
		}
		return v, nil
	}
	q, err := readFile(filepath.Join(d, "cpu.cfs_quota_us"))
	if err != nil {
		return 0, err
	}
	p, err := readFile(filepath.Join(d, "cpu.cfs_period_us"))
	if err != nil {
		return 0, err
	}
	v, err := cpusFromV1(q, p)
	if err != nil {
		return 0, fmt.Errorf("cgroup: %s: %w", d, err)
	}
	return v, nil
}

// CPUUsage is the CPU time used by the group's processes (and groups below) since it was
// created: v2 cpu.stat usage_usec, v1 cpuacct.usage (or the hybrid cgroup2 cpu.stat when
// cpuacct is not mounted).
func (g *Group) CPUUsage() (time.Duration, error) {
	if g.h.version == V1 {
		if d := g.Dir("cpuacct"); d != "" {
			f := filepath.Join(d, "cpuacct.usage")
			s, err := readFile(f)
			if err != nil {
				return 0, err
			}
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("cgroup: %s: %q: %v", f, s, err)
			}
			return time.Duration(n), nil
		}
		if g.Dir(unifiedKey) == "" {
			return 0, fmt.Errorf("cgroup: CPU usage needs the v1 cpuacct controller, which is not mounted: %w", ErrNotSupported)
		}
	}
	f := filepath.Join(g.Dir(unifiedKey), "cpu.stat")
	s, err := readFile(f)
	if err != nil {
		return 0, err
	}
	u, _, err := ParseCPUStat(s)
	if err != nil {
		return 0, fmt.Errorf("cgroup: %s: %w", f, err)
	}
	if u < 0 {
		return 0, fmt.Errorf("cgroup: %s has no usage_usec", f)
	}
	return u, nil
}

// Throttled reads CFS bandwidth throttling from cpu.stat (v2 nr_throttled and
// throttled_usec; v1 nr_throttled and throttled_time).
func (g *Group) Throttled() (Throttling, error) {
	d, err := g.ctrlDir("cpu", "throttling statistics")
	if err != nil {
		return Throttling{}, err
	}
	f := filepath.Join(d, "cpu.stat")
	s, err := readFile(f)
	if err != nil {
		return Throttling{}, err
	}
	_, th, err := ParseCPUStat(s)
	if err != nil {
		return Throttling{}, fmt.Errorf("cgroup: %s: %w", f, err)
	}
	return th, nil
}

// v1Unlimited is what v1 memory files read when no limit is set (PAGE_COUNTER_MAX pages).
const v1Unlimited = int64(1) << 62

func parseBytes(file, s string) (int64, error) {
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cgroup: %s: %q: %v", file, s, err)
	}
	if n >= v1Unlimited || n < 0 {
		return 0, nil
	}
	return n, nil
}

func v2Bytes(b int64) string {
	if b <= 0 {
		return "max"
	}
	return strconv.FormatInt(b, 10)
}

// SetMemoryMax sets the hard memory limit (v2 memory.max, v1 memory.limit_in_bytes);
// bytes <= 0 removes it. On v1 the swap allowance set with SetSwapMax is kept (the
// memory+swap limit moves with it).
func (g *Group) SetMemoryMax(bytes int64) error {
	d, err := g.ctrlDir("memory", "memory limit")
	if err != nil {
		return err
	}
	if g.h.version == V2 {
		return writeFile(filepath.Join(d, "memory.max"), v2Bytes(bytes))
	}
	lim := filepath.Join(d, "memory.limit_in_bytes")
	memsw := filepath.Join(d, "memory.memsw.limit_in_bytes")
	val := "-1"
	if bytes > 0 {
		val = strconv.FormatInt(bytes, 10)
	}
	if !exists(memsw) {
		return writeFile(lim, val)
	}
	oldLim, err := g.readBytes(lim)
	if err != nil {
		return err
	}
	oldSw, err := g.readBytes(memsw)
	if err != nil {
		return err
	}
	if oldSw == 0 || oldLim == 0 { // no memory+swap limit in force, or none to keep
		if oldSw != 0 && bytes <= 0 {
			if err := writeFile(memsw, "-1"); err != nil {
				return err
			}
		}
		return writeFile(lim, val)
	}
	// v1 requires memory.limit <= memory.memsw.limit at every step.
	swap := oldSw - oldLim
	newSw := "-1"
	if bytes > 0 {
		newSw = strconv.FormatInt(bytes+swap, 10)
	}
	if bytes <= 0 || bytes > oldLim {
		if err := writeFile(memsw, newSw); err != nil {
			return err
		}
		return writeFile(lim, val)
	}
	if err := writeFile(lim, val); err != nil {
		return err
	}
	return writeFile(memsw, newSw)
}

func (g *Group) readBytes(file string) (int64, error) {
	s, err := readFile(file)
	if err != nil {
		return 0, err
	}
	return parseBytes(file, s)
}

// MemoryMax reads the hard memory limit back (0: none).
func (g *Group) MemoryMax() (int64, error) {
	d, err := g.ctrlDir("memory", "memory limit")
	if err != nil {
		return 0, err
	}
	if g.h.version == V2 {
		return g.readBytes(filepath.Join(d, "memory.max"))
	}
	return g.readBytes(filepath.Join(d, "memory.limit_in_bytes"))
}

// SetSwapMax limits the group's swap use (v2 memory.swap.max; v1 memory.memsw.limit_in_bytes
// set to the memory limit plus bytes); bytes < 0 removes the limit, 0 forbids swap. The
// file is missing where the kernel does not account swap (ErrNotSupported).
func (g *Group) SetSwapMax(bytes int64) error {
	d, err := g.ctrlDir("memory", "swap limit")
	if err != nil {
		return err
	}
	if g.h.version == V2 {
		v := "max"
		if bytes >= 0 {
			v = strconv.FormatInt(bytes, 10)
		}
		return writeFile(filepath.Join(d, "memory.swap.max"), v)
	}
	memsw := filepath.Join(d, "memory.memsw.limit_in_bytes")
	if bytes < 0 {
		return writeFile(memsw, "-1")
	}
	lim, err := g.readBytes(filepath.Join(d, "memory.limit_in_bytes"))
	if err != nil {
		return err
	}
	if lim == 0 {
		return fmt.Errorf("cgroup: swap limit on v1 needs a memory limit first (memory.memsw.limit_in_bytes is memory plus swap): %w", ErrNotSupported)
	}
	return writeFile(memsw, strconv.FormatInt(lim+bytes, 10))
}

// SetMemoryLow protects bytes of the group's memory from reclaim (v2 memory.low; 0
// removes the protection).
//
// V1 has no equivalent: this writes memory.soft_limit_in_bytes, which works the other way
// round (under global memory pressure, groups above their soft limit are reclaimed
// first). On v1, protect a group by setting soft limits on the others (the guest), not
// on the group to protect.
func (g *Group) SetMemoryLow(bytes int64) error {
	d, err := g.ctrlDir("memory", "memory protection")
	if err != nil {
		return err
	}
	if g.h.version == V2 {
		v := "0"
		if bytes > 0 {
			v = strconv.FormatInt(bytes, 10)
		}
		return writeFile(filepath.Join(d, "memory.low"), v)
	}
	v := "-1"
	if bytes > 0 {
		v = strconv.FormatInt(bytes, 10)
	}
	return writeFile(filepath.Join(d, "memory.soft_limit_in_bytes"), v)
}

// MemoryUsage is the group's current memory use (v2 memory.current, v1
// memory.usage_in_bytes).
func (g *Group) MemoryUsage() (int64, error) {
	d, err := g.ctrlDir("memory", "memory usage")
	if err != nil {
		return 0, err
	}
	f := filepath.Join(d, "memory.current")
	if g.h.version == V1 {
		f = filepath.Join(d, "memory.usage_in_bytes")
	}
	s, err := readFile(f)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

// SetIOWeight sets the group's proportional I/O weight, w on the v2 io.weight scale
// (1-10000, default 100). It writes every weight file the kernel offers: v2 io.weight
// ("default W") and io.bfq.weight, v1 blkio.weight and blkio.bfq.weight (these take
// 1-1000 resp. 10-1000: w is clamped). Weights only work with a proportional I/O
// scheduler (BFQ, or io.cost on v2); when no file exists it sets nothing and says so in
// note, without an error.
func (g *Group) SetIOWeight(w int) (note string, err error) {
	if w < 1 {
		w = 1
	}
	if w > 10000 {
		w = 10000
	}
	ctrl := "blkio"
	if g.h.version == V2 {
		ctrl = "io"
	}
	d, err := g.ctrlDir(ctrl, "I/O weight")
	if err != nil {
		return "", err
	}
	clamp := func(lo, hi int) string { return strconv.Itoa(min(max(w, lo), hi)) }
	type wf struct{ name, val string }
	var files []wf
	if g.h.version == V2 {
		files = []wf{{"io.weight", "default " + strconv.Itoa(w)}, {"io.bfq.weight", clamp(1, 1000)}}
	} else {
		files = []wf{{"blkio.weight", clamp(10, 1000)}, {"blkio.bfq.weight", clamp(1, 1000)}}
	}
	var wrote []string
	var missing []string
	for _, f := range files {
		p := filepath.Join(d, f.name)
		if !exists(p) {
			missing = append(missing, f.name)
			continue
		}
		if err := writeFile(p, f.val); err != nil {
			return "", err
		}
		wrote = append(wrote, f.name)
	}
	if len(wrote) == 0 {
		return fmt.Sprintf("I/O weight not applied: %s has none of %s (no proportional I/O scheduler)", d, strings.Join(missing, ", ")), nil
	}
	if len(missing) > 0 {
		return fmt.Sprintf("I/O weight set in %s only (%s missing)", strings.Join(wrote, ", "), strings.Join(missing, ", ")), nil
	}
	return "", nil
}

// Freeze stops every process of the group in place and waits until the kernel reports
// the group frozen (v2 cgroup.freeze and cgroup.events "frozen 1"; v1 freezer.state
// FROZEN), or ctx ends (DefaultWait without a deadline). The group stays freezing then.
func (g *Group) Freeze(ctx context.Context) error {
	if err := g.writeFreeze(true); err != nil {
		return err
	}
	ctx, cancel := withDefaultWait(ctx)
	defer cancel()
	return poll(ctx, "cgroup "+g.Path()+" frozen", func() (bool, error) {
		st, err := g.freezerState()
		return st == "frozen", err
	})
}

// Thaw lets the group run again and waits until it is no longer frozen.
func (g *Group) Thaw(ctx context.Context) error {
	if err := g.writeFreeze(false); err != nil {
		return err
	}
	ctx, cancel := withDefaultWait(ctx)
	defer cancel()
	return poll(ctx, "cgroup "+g.Path()+" thawed", func() (bool, error) {
		st, err := g.freezerState()
		return st == "thawed", err
	})
}

// Frozen reports whether the group is completely frozen (a group still freezing is not).
func (g *Group) Frozen() (bool, error) {
	st, err := g.freezerState()
	return st == "frozen", err
}

func (g *Group) writeFreeze(on bool) error {
	d, err := g.ctrlDir("freezer", "freezing")
	if err != nil {
		return err
	}
	if g.h.version == V2 {
		return writeFile(filepath.Join(d, "cgroup.freeze"), boolString(on))
	}
	v := "THAWED"
	if on {
		v = "FROZEN"
	}
	return writeFile(filepath.Join(d, "freezer.state"), v)
}

// freezerState is "thawed", "freezing" or "frozen".
func (g *Group) freezerState() (string, error) {
	d, err := g.ctrlDir("freezer", "freezing")
	if err != nil {
		return "", err
	}
	if g.h.version == V2 {
		f := filepath.Join(d, "cgroup.events")
		s, err := readFile(f)
		if err != nil {
			return "", err
		}
		kv, err := ParseKeyValues(s)
		if err != nil {
			return "", fmt.Errorf("cgroup: %s: %w", f, err)
		}
		if kv["frozen"] == 1 {
			return "frozen", nil
		}
		want, err := readFile(filepath.Join(d, "cgroup.freeze"))
		if err != nil {
			return "", err
		}
		if want == "1" {
			return "freezing", nil
		}
		return "thawed", nil
	}
	s, err := readFile(filepath.Join(d, "freezer.state"))
	if err != nil {
		return "", err
	}
	switch s {
	case "FROZEN":
		return "frozen", nil
	case "FREEZING":
		return "freezing", nil
	case "THAWED":
		return "thawed", nil
	}
	return "", fmt.Errorf("cgroup: %s: unknown state %q", filepath.Join(d, "freezer.state"), s)
}

// Pressure reads the group's PSI (cpu.pressure, memory.pressure, io.pressure). It needs
// cgroup2: on V2, or on a hybrid V1 host through the group's cgroup2 directory (groups
// made with Hierarchy.Group span it). Otherwise the error wraps ErrNotSupported.
func (g *Group) Pressure() (Pressure, error) {
	d := g.Dir(unifiedKey)
	if d == "" {
		return Pressure{}, fmt.Errorf("cgroup: per-group pressure needs cgroup2 (none mounted): %w", ErrNotSupported)
	}
	return readPressureDir(d, ".pressure")
}

// PressureFromProc reads the system-wide PSI from /proc/pressure.
func PressureFromProc() (Pressure, error) {
	return readPressureDir("/proc/pressure", "")
}

func readPressureDir(dir, suffix string) (Pressure, error) {
	var p Pressure
	var errs []error
	for _, x := range []struct {
		file string
		dst  *PressureStat
	}{{"cpu", &p.CPU}, {"memory", &p.Memory}, {"io", &p.IO}} {
		f := filepath.Join(dir, x.file+suffix)
		s, err := readFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ps, err := ParsePressure(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("cgroup: %s: %w", f, err))
			continue
		}
		*x.dst = ps
	}
	return p, errors.Join(errs...)
}

// CPUs converts a CPU time delta over a wall-clock window to a number of CPUs.
func CPUs(used, window time.Duration) float64 {
	if window <= 0 {
		return math.NaN()
	}
	return float64(used) / float64(window)
}
