package wire

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
)

// Slurm node states as the site manager wants them (GET /api/v1/slurm/nodes). The sync
// daemon (scheduler-plugin/sync) applies them through libslurm.
type SlurmNodeState string

const (
	// SlurmUp: the guest runs (full speed or throttled); jobs may run. Nodes that
	// Overtime itself drained or downed are resumed, jobs it suspended are resumed.
	SlurmUp SlurmNodeState = "up"
	// SlurmFrozen: the guest is frozen; its jobs are suspended (not failed) and the node
	// is drained so that no new work lands on it.
	SlurmFrozen SlurmNodeState = "frozen"
	// SlurmEvicted: the guest was stopped by the policy; its jobs are requeued.
	SlurmEvicted SlurmNodeState = "evicted"
	// SlurmDown: no guest (desktop off, agent silent, a mode without a guest, guest
	// crashed); jobs left on it are requeued and the node is down with a reason.
	SlurmDown SlurmNodeState = "down"
)

// Node features Overtime manages. Jobs select with constraints (the SPANK option
// --desktop turns into them through job_submit.lua).
const (
	FeatureOvertime    = "overtime"     // every Overtime node (the sync daemon's own marker)
	FeatureDedicated   = "dedicated"    // the host is in a cluster mode: the guest owns the machine
	FeatureDesktop     = "desktop"      // the host is a desktop: the guest harvests around its owner
	FeatureDeskEmpty   = "desk-empty"   // desktop with nobody active at it
	FeatureOwnerActive = "owner-active" // desktop whose owner is working now
)

// Node weights: Slurm allocates the lowest weight first, so jobs fill dedicated hosts,
// then empty desktops, and only then desktops whose owner is working. The one table of
// weights: the feed sets them, and the static node lines (sitemgmt/render) use them too.
const (
	WeightDedicated   = 1
	WeightDeskEmpty   = 10
	WeightOwnerActive = 100
	// WeightNoGuest is for static node lines of hosts whose mode runs no compute guest
	// (course-vm, local disk, maintenance): Slurm sees them DOWN anyway; should one
	// answer, it comes last.
	WeightNoGuest = 1000
)

// WeightPerPercent is the weight a desktop node gains per percent of calibrated desktop
// slowdown (InterferenceWeight).
const WeightPerPercent = 1

// InterferenceWeight is the weight of a desktop node of class base (WeightDeskEmpty or
// WeightOwnerActive) whose last calibration is p: among PCs of one class, jobs go first
// where they disturb the desktop least. The mapping is
//
//	base + min(round(WeightPerPercent × 100 × max(p.CPUSlowdown, p.MemorySlowdown)), next − base − 1)
//
// where next is the class above (WeightOwnerActive, WeightNoGuest): monotone in the
// slowdown, and never reaching the next class, so an empty desk always comes before an
// occupied one whatever the calibration says (a desk-empty PC spans 10-99, an
// owner-active one 100-999). The worse of the two slowdowns counts: a job's kind is not
// known when Slurm places it. A host without a calibration (p nil) keeps base: nothing is
// known against it, and its agent calibrates at the next idle cluster period. Other
// weights (dedicated, no guest) are returned unchanged: a dedicated PC has no desktop to
// disturb.
func InterferenceWeight(base int, p *InterferenceProfile) int {
	var next int
	switch base {
	case WeightDeskEmpty:
		next = WeightOwnerActive
	case WeightOwnerActive:
		next = WeightNoGuest
	default:
		return base
	}
	if p == nil {
		return base
	}
	s := max(p.CPUSlowdown, p.MemorySlowdown)
	if !(s > 0) { // also NaN
		return base
	}
	add := math.Round(WeightPerPercent * 100 * s)
	return base + int(min(add, float64(next-base-1)))
}

// SlurmNode is the desired Slurm state of one host's compute guest.
type SlurmNode struct {
	Name     string         `json:"name"` // Slurm NodeName = site manager host name
	State    SlurmNodeState `json:"state"`
	Features string         `json:"features"` // comma-separated, Slurm's syntax
	Weight   int            `json:"weight"`
	Reason   string         `json:"reason,omitempty"`  // for frozen, evicted, down; starts with "overtime:"
	Comment  string         `json:"comment,omitempty"` // the agent state behind it, for `scontrol show node`
	// The guest's size from the agent's last heartbeat (0 or absent: not reported), for
	// the node record the sync daemon declares (CPUs=, RealMemory=, Gres=gpu:N).
	CPUs     int `json:"cpus,omitempty"`
	MemoryMB int `json:"memoryMB,omitempty"`
	GPUs     int `json:"gpus,omitempty"`
}

// SlurmFeed is the answer of GET /api/v1/slurm/nodes: every host's desired node state
// and the job reports received since the caller's revision. Build names the replica's
// build of the node list the answer comes from; a caller that holds the nodes of build B
// may ask for base=B and then gets, with Delta, only the nodes whose Slurm node differs
// since B (the rest are as B had them, but for their comments, which quote the last
// heartbeat's time). Without Delta, Nodes is every host: the server answers a
// whole list when it cannot say what changed since the base (another replica's build,
// one it no longer remembers, a host removed since, or too many changes).
type SlurmFeed struct {
	Revision uint64          `json:"revision"`
	Build    uint64          `json:"build,omitempty"`
	Delta    bool            `json:"delta,omitempty"`
	Nodes    []SlurmNode     `json:"nodes"`
	Reports  []JobReportLine `json:"reports"`
}

// SlurmWindow is one coming stretch of time in which a host's compute guest will be
// stopped by its schedule (a mode without a guest: course VM, local disk, maintenance; or
// an exam exception), as GET /api/v1/slurm/reservations gives it. The sync daemon keeps
// one Slurm maintenance reservation per window, so that Slurm's scheduler never starts a
// job whose time limit crosses it, and warns and requeues jobs that run into a window
// anyway (one added at short notice).
type SlurmWindow struct {
	Node string `json:"node"` // Slurm NodeName = host name
	// Start and End in UTC, whole seconds. A window already in progress starts at the
	// answer's Now; one that reaches past the horizon ends at Now+horizon (the daemon
	// extends it as the horizon rolls on).
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Mode is the mode the window starts with; Exception the exception that decides it
	// ("" for the weekly schedule); Reason names the change for users and job comments,
	// e.g. "overtime: course-bio at 10:00" (site's time zone), always "overtime:"-prefixed.
	Mode      string `json:"mode"`
	Exception string `json:"exception,omitempty"`
	Reason    string `json:"reason"`
	// PowerSave: the whole window gives the host to a local-disk mode, slots Slurm's
	// power saving fills on demand (schedule.LevelPowerSave); a daemon running with
	// power saving leaves these unreserved, or Slurm would never wake the PC.
	PowerSave bool `json:"powerSave,omitempty"`
}

// SlurmReservations is the answer of GET /api/v1/slurm/reservations: every host's
// windows without a guest in [Now, Now+HorizonSeconds), sorted by node, then start.
type SlurmReservations struct {
	Now            time.Time     `json:"now"`
	HorizonSeconds int64         `json:"horizonSeconds"`
	Windows        []SlurmWindow `json:"windows"`
}

// Reservation horizon bounds: a week by default (what Slurm's backfill can use), at
// most a month (Slurm keeps every reservation in its state; more buys nothing).
const (
	DefaultReservationHorizon = 7 * 24 * time.Hour
	MaxReservationHorizon     = 31 * 24 * time.Hour
)

// JobReportLine is a job report as the Slurm feed lists it: every host's report, each
// with its host (the sync daemon parses them; the SPANK plugin writes the AdminComment
// from its own agent's answer).
type JobReportLine struct {
	Job     string `json:"job"`
	Host    string `json:"host"`
	Summary string `json:"summary"`
}

// JobReport is the per-job interference record: what the desktop and the guest did to
// each other while one Slurm job ran on the guest. The node agent computes it from its
// own counters between the SPANK plugin's job start and end calls.
type JobReport struct {
	Job     string    `json:"job"` // Slurm job id
	Host    string    `json:"host"`
	Mode    string    `json:"mode,omitempty"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Seconds float64   `json:"seconds"` // wall time between start and end
	// ThrottledSeconds and FrozenSeconds: time the guest spent capped / frozen.
	ThrottledSeconds float64 `json:"throttledSeconds"`
	FrozenSeconds    float64 `json:"frozenSeconds"`
	// OwnerActiveFraction: share of the job's time the desk's owner was active.
	OwnerActiveFraction float64 `json:"ownerActiveFraction"`
	// GuestCPUSeconds: CPU the guest used (all its processes).
	GuestCPUSeconds float64 `json:"guestCPUSeconds"`
	// StealSeconds: time the guest's threads were runnable but waited for a CPU (the
	// desktop had it): what the job lost to the desktop, as a guest sees steal time.
	StealSeconds float64 `json:"stealSeconds"`
	// DesktopSlowdown: estimated slowdown of the desktop's work caused by the guest during
	// the job (fraction: 0.01 = the desktop's work took 1% longer), by the estimator
	// SlowdownMethod names (node-agent/interference/estimate, calibrated against the
	// interference matrix). SlowdownLow..SlowdownHigh is its interval: the estimate's
	// calibrated error around it (docs/interference.md).
	DesktopSlowdown float64 `json:"desktopSlowdown"`
	SlowdownLow     float64 `json:"slowdownLow,omitempty"`
	SlowdownHigh    float64 `json:"slowdownHigh,omitempty"`
	SlowdownMethod  string  `json:"slowdownMethod,omitempty"`
	// GuestSlowdown: share of the job's time its threads lost waiting for the desktop
	// (steal / (guest CPU + steal)), fraction.
	GuestSlowdown float64 `json:"guestSlowdown,omitempty"`
	// Actions counts the policy's transitions into throttle, freeze and evict.
	Actions map[model.GuestAction]int `json:"actions,omitempty"`
	Summary string                    `json:"summary"`
	// Received is set by the site manager.
	Received time.Time `json:"received,omitzero"`
}

// JobReports is every host's report of one job (GET /api/v1/jobs/{id} without ?host=),
// sorted by host, each naming its host. The site manager cannot tell which nodes Slurm
// ran a job on, so it shows all of them side by side: a job requeued onto another host
// has a report from each, and a host that did not run the job can add its own report but
// never replace or hide another's (docs/slurm.md).
type JobReports struct {
	Job     string      `json:"job"`
	Reports []JobReport `json:"reports"`
}

// ValidJobID accepts Slurm job ids (and array task ids like 123_4), as an
// *model.InvalidError (names.JobID).
func ValidJobID(id string) error {
	if err := names.JobID(id); err != nil {
		return model.Invalid("%v", err)
	}
	return nil
}

// Validate checks a report posted by an agent.
func (r JobReport) Validate() error {
	if err := ValidJobID(r.Job); err != nil {
		return err
	}
	if r.Host != "" {
		if err := model.ValidHostname(r.Host); err != nil {
			return model.Invalid("job report: %v", err)
		}
	}
	if r.End.Before(r.Start) {
		return model.Invalid("job report: end %s before start %s", r.End, r.Start)
	}
	for name, v := range map[string]float64{"seconds": r.Seconds, "throttledSeconds": r.ThrottledSeconds,
		"frozenSeconds": r.FrozenSeconds, "guestCPUSeconds": r.GuestCPUSeconds, "stealSeconds": r.StealSeconds} {
		if v < 0 || v != v {
			return model.Invalid("job report: %s %v must be a non-negative number", name, v)
		}
	}
	for name, v := range map[string]float64{"ownerActiveFraction": r.OwnerActiveFraction, "desktopSlowdown": r.DesktopSlowdown,
		"slowdownLow": r.SlowdownLow, "slowdownHigh": r.SlowdownHigh, "guestSlowdown": r.GuestSlowdown} {
		if !(v >= 0 && v <= 1) {
			return model.Invalid("job report: %s %v must be a fraction within 0..1", name, v)
		}
	}
	if r.hasInterval() && !(r.SlowdownLow <= r.DesktopSlowdown && r.DesktopSlowdown <= r.SlowdownHigh) {
		return model.Invalid("job report: desktop slowdown %g outside its interval %g..%g (slowdownLow <= desktopSlowdown <= slowdownHigh)",
			r.DesktopSlowdown, r.SlowdownLow, r.SlowdownHigh)
	}
	if len(r.SlowdownMethod) > MaxSlowdownMethod || OneLine(r.SlowdownMethod, MaxSlowdownMethod) != r.SlowdownMethod {
		return model.Invalid("job report: slowdownMethod must be one line of at most %d bytes", MaxSlowdownMethod)
	}
	if len(r.Summary) > MaxSummary || strings.ContainsAny(r.Summary, "\n\r") {
		return model.Invalid("job report: summary must be one line of at most %d bytes", MaxSummary)
	}
	return nil
}

// MaxSlowdownMethod bounds JobReport.SlowdownMethod (one line).
const MaxSlowdownMethod = 80

// MaxSummary bounds JobReport.Summary (one line): Slurm's AdminComment carries it.
const MaxSummary = 400

// hasInterval: the report gives the estimate's interval (an agent with the calibrated
// estimator; an older one sends only DesktopSlowdown).
func (r JobReport) hasInterval() bool { return r.SlowdownLow != 0 || r.SlowdownHigh != 0 }

// SlowdownText says the desktop slowdown estimate with what backs it, e.g.
// "0.4% (0.1-0.9%, run-queue wait + memory canary)"; a report of an older agent, without
// interval or method, gives "~2%" (a rough estimate from CPU pressure).
func (r JobReport) SlowdownText() string {
	est := fmt.Sprintf("%.1f%%", 100*r.DesktopSlowdown)
	var why []string
	if r.hasInterval() {
		why = append(why, fmt.Sprintf("%.1f-%.1f%%", 100*r.SlowdownLow, 100*r.SlowdownHigh))
	}
	if r.SlowdownMethod != "" {
		why = append(why, r.SlowdownMethod)
	}
	if len(why) == 0 {
		return fmt.Sprintf("~%.0f%%", 100*r.DesktopSlowdown)
	}
	return est + " (" + strings.Join(why, ", ") + ")"
}

// ReportSummary is the one-line text of a report (AdminComment, logs), at most
// MaxSummary bytes.
func ReportSummary(r JobReport) string {
	steal := fmt.Sprintf("steal %.1f s", r.StealSeconds)
	if r.GuestSlowdown > 0 {
		steal += fmt.Sprintf(" (guest slowdown %.1f%%)", 100*r.GuestSlowdown)
	}
	return OneLine(fmt.Sprintf("overtime: job %s on %s %.0f s: throttled %.0f s, frozen %.0f s, owner active %.0f%%, guest CPU %.0f s, %s, desktop slowdown %s",
		r.Job, r.Host, r.Seconds, r.ThrottledSeconds, r.FrozenSeconds, 100*r.OwnerActiveFraction,
		r.GuestCPUSeconds, steal, r.SlowdownText()), MaxSummary)
}

// Slurm power saving (POST /api/v1/slurm/resume and /suspend, `overtime slurm resume|
// suspend`, called by slurmctld as ResumeProgram and SuspendProgram).

// PowerRequest names the hosts Slurm wants woken or given back.
type PowerRequest struct {
	Hosts []string `json:"hosts"`
	// Mode is the cluster mode a resume puts local-disk hosts in; empty: the site's
	// only cluster mode with a compute guest.
	Mode string `json:"mode,omitempty"`
	// ForMinutes bounds a resume's power-save exception (default DefaultPowerSaveMinutes).
	// Slurm's SuspendProgram normally ends it sooner; the bound gives a host back if the
	// controller never does.
	ForMinutes int `json:"forMinutes,omitempty"`
}

// Power saving bounds.
const (
	DefaultPowerSaveMinutes = 12 * 60
	MaxPowerSaveMinutes     = 7 * 24 * 60
	MaxPowerHosts           = 10000
)

// PowerAction is what a resume or suspend did to one host.
type PowerAction string

const (
	// PowerWake: the schedule already runs a compute guest (desktop or cluster mode);
	// the host only needs to be switched on.
	PowerWake PowerAction = "wake"
	// PowerCluster: the schedule gave the host to its local disk; a power-save exception
	// now puts it in a cluster mode, and it is to be switched on.
	PowerCluster PowerAction = "cluster"
	// PowerRefused: the host stays as it is (unknown host, a lecture or maintenance slot,
	// a mode without a guest); Reason says why.
	PowerRefused PowerAction = "refused"
	// PowerReleased: the host's power-save exceptions are gone; it follows its schedule.
	PowerReleased PowerAction = "released"
)

// PowerResult is one host's outcome.
type PowerResult struct {
	Host   string      `json:"host"`
	Action PowerAction `json:"action"`
	Reason string      `json:"reason,omitempty"`
	// After the change: the mode the schedule gives the host now, until when.
	Mode  string    `json:"mode,omitempty"`
	Until time.Time `json:"until,omitzero"`
	// Wake-on-LAN: the host's MAC and the UDP address to send the magic packet to (the
	// directed broadcast of its boot server's subnet, port 9). Set for wake and cluster.
	MAC      string `json:"mac,omitempty"`
	WakeAddr string `json:"wakeAddr,omitempty"`
}

// PowerResponse answers a resume or suspend, one result per requested host, in order.
type PowerResponse struct {
	Hosts []PowerResult `json:"hosts"`
}

// Validate checks the request's shape; host names are looked up by the caller.
func (r *PowerRequest) Validate() error {
	if len(r.Hosts) == 0 {
		return model.Invalid("no hosts given")
	}
	if len(r.Hosts) > MaxPowerHosts {
		return model.Invalid("%d hosts in one request; at most %d", len(r.Hosts), MaxPowerHosts)
	}
	if r.ForMinutes < 0 || r.ForMinutes > MaxPowerSaveMinutes {
		return model.Invalid("forMinutes %d out of range 0..%d", r.ForMinutes, MaxPowerSaveMinutes)
	}
	return nil
}
