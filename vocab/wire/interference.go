package wire

import (
	"math"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// InterferenceProfile is what a host's calibration run measured (node-agent/interference/
// calibrate, docs/interference.md): how much a compute guest at full speed disturbs this
// PC's desktop, and where the adaptive controller should start. The agent sends it in its
// heartbeat once after each calibration; the site manager keeps the last one per host,
// hands it back in the host's AgentConfig (a stateless PC forgets it at every reboot)
// and derives the host's Slurm node weight from it.
type InterferenceProfile struct {
	Measured time.Time `json:"measured"`
	// The environment the numbers hold for; a change (new kernel, other CPU, other
	// backend) makes the agent calibrate again.
	Kernel   string `json:"kernel"`
	CPUModel string `json:"cpuModel"`
	CPUs     int    `json:"cpus"`
	Cgroup   string `json:"cgroup"`  // "v1" or "v2"
	Backend  string `json:"backend"` // guest backend the run used (container, qemu, process)
	// CanaryNs: the memory canary's median time with the guest stopped (nanoseconds); the
	// controller's and the job reports' baseline for memory interference.
	CanaryNs float64 `json:"canaryNs"`
	// Slowdowns (fractions) of a CPU-bound and of a memory-bound desktop next to a guest of
	// the same kind running at full speed in the idle class.
	CPUSlowdown    float64 `json:"cpuSlowdown"`
	MemorySlowdown float64 `json:"memorySlowdown"`
	// Wake-up latency p99 of a desktop thread (microseconds), alone and next to the guest.
	WakeupP99AloneUs float64 `json:"wakeupP99AloneUs"`
	WakeupP99GuestUs float64 `json:"wakeupP99GuestUs"`
	// StartCap: the guest's CPU cap (fraction of the host's CPUs, 0-1] under which the
	// memory-bound desktop stayed within the pool's slowdown target; the controller
	// starts there when the owner becomes active.
	StartCap float64 `json:"startCap"`
	// Harvest: the guest's work at StartCap next to the busy desktop, as a fraction of
	// what it does on the desktop's idle share alone.
	Harvest float64 `json:"harvest"`
}

// Validate checks a profile an agent sent.
func (p InterferenceProfile) Validate() error {
	for name, v := range map[string]float64{"canaryNs": p.CanaryNs, "wakeupP99AloneUs": p.WakeupP99AloneUs,
		"wakeupP99GuestUs": p.WakeupP99GuestUs} {
		if !(v >= 0 && v < 1e12) {
			return model.Invalid("interference profile: %s %v out of range", name, v)
		}
	}
	for name, v := range map[string]float64{"cpuSlowdown": p.CPUSlowdown, "memorySlowdown": p.MemorySlowdown,
		"startCap": p.StartCap, "harvest": p.Harvest} {
		if !(v >= 0 && v <= 10) || math.IsNaN(v) {
			return model.Invalid("interference profile: %s %v out of range", name, v)
		}
	}
	if p.CPUs < 0 || p.CPUs > 1<<16 {
		return model.Invalid("interference profile: cpus %d out of range", p.CPUs)
	}
	for name, v := range map[string]string{"kernel": p.Kernel, "cpuModel": p.CPUModel, "cgroup": p.Cgroup, "backend": p.Backend} {
		if len(v) > 200 || OneLine(v, 200) != v {
			return model.Invalid("interference profile: %s must be one line of at most 200 bytes", name)
		}
	}
	return nil
}
