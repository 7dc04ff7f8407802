package cgroup

import (
	"bufio"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Period is the CFS bandwidth period SetCPUMax uses (100 ms, the kernel's default).
const Period = 100 * time.Millisecond

// minQuota is the kernel's smallest accepted CFS quota (1 ms).
const minQuota = time.Millisecond

// QuotaFor converts a CPU count to a quota per Period (rounded to the microsecond, at
// least 1 ms); cpus <= 0 means no limit and returns 0.
func QuotaFor(cpus float64) time.Duration {
	if cpus <= 0 || math.IsNaN(cpus) {
		return 0
	}
	q := time.Duration(math.Round(cpus*float64(Period/time.Microsecond))) * time.Microsecond
	if q < minQuota {
		q = minQuota
	}
	return q
}

// FormatCPUMax is the cgroup v2 cpu.max value for cpus CPUs: "QUOTA PERIOD" in
// microseconds, "max 100000" for no limit (cpus <= 0).
func FormatCPUMax(cpus float64) string {
	q := QuotaFor(cpus)
	if q == 0 {
		return fmt.Sprintf("max %d", Period.Microseconds())
	}
	return fmt.Sprintf("%d %d", q.Microseconds(), Period.Microseconds())
}

// ParseCPUMax parses a cgroup v2 cpu.max value ("max", "max 100000", "50000 100000",
// "50000") into CPUs (0: no limit).
func ParseCPUMax(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) < 1 || len(f) > 2 {
		return 0, fmt.Errorf("cpu.max %q: want \"QUOTA PERIOD\"", s)
	}
	period := int64(Period.Microseconds())
	if len(f) == 2 {
		p, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || p <= 0 {
			return 0, fmt.Errorf("cpu.max %q: bad period", s)
		}
		period = p
	}
	if f[0] == "max" {
		return 0, nil
	}
	q, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || q <= 0 {
		return 0, fmt.Errorf("cpu.max %q: bad quota", s)
	}
	return float64(q) / float64(period), nil
}

// cpusFromV1 converts cpu.cfs_quota_us and cpu.cfs_period_us to CPUs (quota -1: no limit).
func cpusFromV1(quota, period string) (float64, error) {
	q, err := strconv.ParseInt(strings.TrimSpace(quota), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cpu.cfs_quota_us %q: %v", quota, err)
	}
	if q < 0 {
		return 0, nil
	}
	p, err := strconv.ParseInt(strings.TrimSpace(period), 10, 64)
	if err != nil || p <= 0 {
		return 0, fmt.Errorf("cpu.cfs_period_us %q: bad period", period)
	}
	return float64(q) / float64(p), nil
}

// ParseKeyValues parses flat keyed files (cpu.stat, memory.events, cgroup.events): one
// "key value" pair per line.
func ParseKeyValues(s string) (map[string]int64, error) {
	out := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("line %q: want \"key value\"", sc.Text())
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %q: %v", sc.Text(), err)
		}
		out[f[0]] = v
	}
	return out, sc.Err()
}

// Throttling is CFS bandwidth control's account (cpu.stat): how many periods had a
// runnable group, in how many it ran out of quota, and for how long it waited in total.
type Throttling struct {
	Periods   int64
	Throttled int64
	Time      time.Duration
}

// ParseCPUStat reads usage and throttling from cpu.stat text: v2 (usage_usec,
// throttled_usec) or v1 (no usage: v1 keeps it in cpuacct.usage; throttled_time in ns).
// usage is -1 when the text has none.
func ParseCPUStat(s string) (usage time.Duration, th Throttling, err error) {
	kv, err := ParseKeyValues(s)
	if err != nil {
		return 0, Throttling{}, fmt.Errorf("cpu.stat: %v", err)
	}
	usage = -1
	if v, ok := kv["usage_usec"]; ok {
		usage = time.Duration(v) * time.Microsecond
	}
	th.Periods = kv["nr_periods"]
	th.Throttled = kv["nr_throttled"]
	if v, ok := kv["throttled_usec"]; ok {
		th.Time = time.Duration(v) * time.Microsecond
	} else {
		th.Time = time.Duration(kv["throttled_time"])
	}
	return usage, th, nil
}

// PressureLine is one line of a PSI file: the share of wall time (percent) in which some
// (or all) tasks were stalled, over 10 s, 60 s and 300 s, and the total stall time.
type PressureLine struct {
	Avg10, Avg60, Avg300 float64
	Total                time.Duration
}

// PressureStat is one PSI file (cpu, memory or io).
type PressureStat struct {
	Some PressureLine
	Full PressureLine // zero when the file has no "full" line (system cpu before 5.13)
}

// Pressure is the PSI of CPU, memory and I/O, of a group or of the whole system.
type Pressure struct {
	CPU, Memory, IO PressureStat
}

// MaxSome is the largest "some avg10" of the three: what Policy.FreezePressure compares.
func (p Pressure) MaxSome() float64 {
	return math.Max(p.CPU.Some.Avg10, math.Max(p.Memory.Some.Avg10, p.IO.Some.Avg10))
}

// ParsePressure parses a PSI file:
//
//	some avg10=0.00 avg60=0.00 avg300=0.00 total=0
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
func ParsePressure(s string) (PressureStat, error) {
	var ps PressureStat
	seenSome := false
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		var l *PressureLine
		switch f[0] {
		case "some":
			l = &ps.Some
			seenSome = true
		case "full":
			l = &ps.Full
		default:
			return ps, fmt.Errorf("pressure line %q: want some or full", sc.Text())
		}
		for _, kv := range f[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return ps, fmt.Errorf("pressure line %q: bad field %q", sc.Text(), kv)
			}
			switch k {
			case "avg10", "avg60", "avg300":
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return ps, fmt.Errorf("pressure line %q: %v", sc.Text(), err)
				}
				switch k {
				case "avg10":
					l.Avg10 = x
				case "avg60":
					l.Avg60 = x
				default:
					l.Avg300 = x
				}
			case "total":
				x, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return ps, fmt.Errorf("pressure line %q: %v", sc.Text(), err)
				}
				l.Total = time.Duration(x) * time.Microsecond
			}
		}
	}
	if err := sc.Err(); err != nil {
		return ps, err
	}
	if !seenSome {
		return ps, fmt.Errorf("pressure: no \"some\" line in %q", s)
	}
	return ps, nil
}
