// Package agentreact measures the node agent as a desktop user would feel it: the time
// from a key press in a logged-in session to the compute guest being throttled (its CPU
// cap written to the cgroup), over many presses, for the QEMU (libvirt) and the container
// backend side by side; and the agent's own CPU and memory while nothing happens.
// Run by `make bench`:
//
//	go test -run '^$' -bench AgentReaction -benchtime 1x ./test/bench/agentreact -args -out docs/benchmarks
//
// The key press is real: a line written to a pseudo-terminal's master and read by the
// session's "shell" on the slave (what the agent's utmp sensor sees through inotify, the
// same path as a key typed over ssh). The throttle is observed from outside the agent by
// polling the guest's cgroup file every 0.5 ms, so each sample includes the sensor, the
// agent's decision and the backend call (libvirt: one virsh schedinfo; container: a
// cgroup write), plus up to 0.5 ms of polling.
package agentreact

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/agentlab"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/vocab/model"
)

var (
	out     = flag.String("out", "", "directory for agent.json and agent.md (empty: only log)")
	presses = flag.Int("presses", 200, "key presses per backend")
	idleFor = flag.Duration("idle", 60*time.Second, "how long the agent's idle CPU is measured")
)

// Result is one backend's measurement.
type Result struct {
	Backend     string    `json:"backend"`
	Presses     int       `json:"presses"`
	LatencyMS   []float64 `json:"latencyMs"` // sorted
	P50, P90    float64   `json:"-"`
	Stats       Stats     `json:"stats"`
	AgentMeanMS float64   `json:"agentMeanMs"` // the agent's own histogram: signal time → backend call returned
	IdleCPUPct  float64   `json:"idleCpuPercentOfOneCore"`
	IdleSeconds float64   `json:"idleSeconds"`
	RSSMiB      float64   `json:"rssMiB"`
	PeakRSSMiB  float64   `json:"peakRssMiB"`
	Misses      int       `json:"misses"` // presses with no throttle within 5 s
}

// Stats of a sorted sample.
type Stats struct {
	Min, P10, P50, P90, P99, Max float64
}

func stats(s []float64) Stats {
	q := func(p float64) float64 {
		if len(s) == 0 {
			return 0
		}
		i := int(p*float64(len(s)-1) + 0.5)
		return s[i]
	}
	return Stats{Min: q(0), P10: q(0.1), P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: q(1)}
}

var cpuRE = regexp.MustCompile(`(?m)^\d+:cpu:(/\S*)$`)

// cpuGroups are the cpu cgroups (v1) of a process and its ancestors up to the root.
func cpuGroups(pid int) []string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	m := cpuRE.FindSubmatch(b)
	if m == nil {
		return nil
	}
	var out []string
	for p := string(m[1]); p != "/" && p != "."; p = filepath.Dir(p) {
		out = append(out, p)
	}
	return out
}

// capped reports whether any of the groups has a CFS quota.
func capped(groups []string) bool {
	for _, g := range groups {
		if v := agentlab.ReadCgroupInt("cpu", g, "cpu.cfs_quota_us"); v > 0 {
			return true
		}
	}
	return false
}

func guestPID(backend model.GuestBackend) int {
	if backend == model.BackendQEMU {
		return agentlab.QEMUPID(agentlab.GuestName)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		if strings.HasPrefix(string(b), "/bin/busybox\x00md5sum\x00/dev/zero") {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	return 0
}

func procStat(pid int) (cpu time.Duration, rss, hwm float64) {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i > 0 {
		f := strings.Fields(s[i+2:])
		u, _ := strconv.ParseInt(f[11], 10, 64)
		k, _ := strconv.ParseInt(f[12], 10, 64)
		cpu = time.Duration(u+k) * 10 * time.Millisecond
	}
	st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, line := range strings.Split(string(st), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			v, _ := strconv.ParseFloat(f[1], 64)
			switch f[0] {
			case "VmRSS:":
				rss = v / 1024
			case "VmHWM:":
				hwm = v / 1024
			}
		}
	}
	return
}

func measure(b *testing.B, backend model.GuestBackend) Result {
	args := ""
	if backend == model.BackendContainer {
		args = "/bin/busybox md5sum /dev/zero" // a busy guest
	}
	l := agentlab.Start(b, agentlab.Options{Backend: backend, GuestArgs: args,
		Policy: "{idleAfter: 1s, hold: 1ms, throttleCPU: 20, desktopLoad: 100, freezePressure: 100}"})
	ag := l.StartAgent()
	var groups []string
	bootlab.Eventually(b, "guest running", 90*time.Second, func() bool {
		if pid := guestPID(backend); pid > 0 {
			groups = cpuGroups(pid)
		}
		return len(groups) > 0 && l.Metric(`overtime_agent_owner_state{state="owner-idle"}`) == "1" && !capped(groups)
	})
	r := Result{Backend: string(backend), Presses: *presses}
	for i := 0; i < *presses; i++ {
		bootlab.Eventually(b, "guest uncapped", 10*time.Second, func() bool { return !capped(groups) })
		t0, err := l.Session.Key()
		if err != nil {
			b.Fatal(err)
		}
		// A fine interval: the wait is the measured latency.
		if !poll.WaitEvery(time.Until(t0.Add(5*time.Second)), 500*time.Microsecond, func() bool { return capped(groups) }) {
			r.Misses++
			continue
		}
		r.LatencyMS = append(r.LatencyMS, float64(time.Since(t0).Microseconds())/1000)
	}
	sort.Float64s(r.LatencyMS)
	r.Stats = stats(r.LatencyMS)
	sum, _ := strconv.ParseFloat(l.Metric(`overtime_agent_reaction_seconds_sum{action="throttle"}`), 64)
	cnt, _ := strconv.ParseFloat(l.Metric(`overtime_agent_reaction_seconds_count{action="throttle"}`), 64)
	if cnt > 0 {
		r.AgentMeanMS = sum / cnt * 1000
	}
	// Idle: the owner left, the guest runs; only the agent's own process is counted (its
	// status checks run virsh every 30 s, counted in virsh's processes).
	bootlab.Eventually(b, "idle", 10*time.Second, func() bool { return !capped(groups) })
	pid := ag.Cmd.Process.Pid
	c0, _, _ := procStat(pid)
	start := time.Now()
	time.Sleep(*idleFor) // the measurement window itself, not synchronisation
	c1, rss, hwm := procStat(pid)
	r.IdleSeconds = time.Since(start).Seconds()
	r.IdleCPUPct = (c1 - c0).Seconds() / r.IdleSeconds * 100
	r.RSSMiB, r.PeakRSSMiB = rss, hwm
	return r
}

func BenchmarkAgentReaction(b *testing.B) {
	var results []Result
	for _, be := range []model.GuestBackend{model.BackendContainer, model.BackendQEMU} {
		// A sub-benchmark each, so that one backend's lab (and busy guest) is gone before
		// the next is measured.
		var r Result
		b.Run(string(be), func(b *testing.B) { r = measure(b, be) })
		b.Logf("%s: n=%d p50 %.1f ms p99 %.1f ms max %.1f ms misses %d; agent mean %.1f ms; idle CPU %.3f%% RSS %.1f MiB",
			be, len(r.LatencyMS), r.Stats.P50, r.Stats.P99, r.Stats.Max, r.Misses, r.AgentMeanMS, r.IdleCPUPct, r.RSSMiB)
		results = append(results, r)
	}
	if *out != "" {
		if err := write(*out, results); err != nil {
			b.Fatal(err)
		}
	}
}

func write(dir string, rs []Result) error {
	j, err := json.MarshalIndent(map[string]any{
		"what":    "key press in a logged-in session -> guest CPU cap in its cgroup (ms); agent idle CPU and memory",
		"date":    time.Now().UTC().Format(time.RFC3339),
		"results": rs,
	}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	var md strings.Builder
	md.WriteString("# Node agent: reaction to the owner, and its own footprint\n\n")
	md.WriteString("`make bench` (test/bench/agentreact). Each sample: a key press in a logged-in session (a line\n" +
		"read by the session's shell from a real pseudo-terminal) until the guest's CPU cap appears in its\n" +
		"cgroup, observed from outside the agent (0.5 ms polling). Both backends in one run, one after the\n" +
		"other, on the same 2-core machine; QEMU guests run under TCG here. Target p99 <= 250 ms\n" +
		"(HTCondor's desktop policy polls every 5 s).\n\n")
	md.WriteString("| backend | presses | min | p10 | p50 | p90 | p99 | max | missed | agent's own mean |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		s := r.Stats
		fmt.Fprintf(&md, "| %s | %d | %.1f ms | %.1f ms | **%.1f ms** | %.1f ms | **%.1f ms** | %.1f ms | %d | %.1f ms |\n",
			r.Backend, len(r.LatencyMS), s.Min, s.P10, s.P50, s.P90, s.P99, s.Max, r.Misses, r.AgentMeanMS)
	}
	md.WriteString("\nIdle footprint (owner away, guest running, no input), the agent process only:\n\n" +
		"| backend | window | CPU (% of one core) | RSS | peak RSS |\n|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&md, "| %s | %.0f s | %.3f %% | %.1f MiB | %.1f MiB |\n", r.Backend, r.IdleSeconds, r.IdleCPUPct, r.RSSMiB, r.PeakRSSMiB)
	}
	md.WriteString("\nTargets: CPU under 0.5 % of a core, RSS under 30 MiB. The QEMU backend's status check every 30 s\n" +
		"runs `virsh` (a separate process, not counted above).\n")
	return os.WriteFile(filepath.Join(dir, "agent.md"), []byte(md.String()), 0o644)
}
