package model

import (
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/vocab/names"
)

// This file holds the parts of the site that the node agent acts on: the per-pool
// sharing policy and the compute guest a mode runs. Both are stored in LDAP (on the pool
// and mode entries) and edited like every other field; the documents the agent fetches
// and posts are in vocab/wire.

// OwnerState is what the node agent concludes about the person at the desk (and the
// schedule). Exactly one applies at a time.
type OwnerState string

const (
	StateNoUser      OwnerState = "no-user"      // nobody logged in (locally or remotely)
	StateOwnerIdle   OwnerState = "owner-idle"   // someone is logged in, no input for Policy.IdleAfter
	StateOwnerActive OwnerState = "owner-active" // input, remote activity or desktop load within IdleAfter
	StateAfterHours  OwnerState = "after-hours"  // the schedule puts the host in a cluster mode now
	StateMaintenance OwnerState = "maintenance"  // the schedule says maintenance (or the host has no guest)
)

// OwnerStates lists every state, in documentation order.
var OwnerStates = []OwnerState{StateNoUser, StateOwnerIdle, StateOwnerActive, StateAfterHours, StateMaintenance}

// GuestAction is what the agent does with the compute guest in a state.
type GuestAction string

const (
	ActionRun      GuestAction = "run"      // full speed (still in the idle cgroup)
	ActionThrottle GuestAction = "throttle" // CPU bandwidth capped (cgroup cpu.max) to Policy.ThrottleCPU
	ActionFreeze   GuestAction = "freeze"   // stopped in place (libvirt suspend / cgroup freezer); memory kept
	ActionEvict    GuestAction = "evict"    // stopped and discarded; Slurm requeues its job
)

// GuestActions lists every action, from least to most restrictive.
var GuestActions = []GuestAction{ActionRun, ActionThrottle, ActionFreeze, ActionEvict}

// Valid refuses a state this version does not know.
func (s OwnerState) Valid() error {
	if !oneOf(s, OwnerStates) {
		return invalid("unknown owner state %q (one of %s)", s, joinStrings(OwnerStates))
	}
	return nil
}

// Valid refuses an action this version does not know.
func (a GuestAction) Valid() error {
	if !oneOf(a, GuestActions) {
		return invalid("unknown action %q (one of %s)", a, joinStrings(GuestActions))
	}
	return nil
}

// Severity orders actions: a larger value restricts the guest more.
func (a GuestAction) Severity() int {
	for i, x := range GuestActions {
		if x == a {
			return i
		}
	}
	return -1
}

// Duration is a time.Duration written as Go duration text ("5m", "30s") in YAML, JSON and LDAP.
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).String() }

func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return invalid("invalid duration %q: use Go duration text like 30s, 5m, 1h", string(b))
	}
	*d = Duration(v)
	return nil
}

// Policy is a pool's declarative rule for sharing its desktops with the compute guest.
// Zero fields take the value of DefaultPolicy (see Effective), so a pool states only what
// it changes.
type Policy struct {
	// Actions maps each owner state to what happens to the guest.
	Actions map[OwnerState]GuestAction `json:"actions,omitempty" yaml:"actions,omitempty"`
	// IdleAfter: a logged-in owner without input for this long is owner-idle.
	IdleAfter Duration `json:"idleAfter,omitempty" yaml:"idleAfter,omitempty"`
	// ThrottleCPU: while throttled the guest may use this percentage of the host's CPUs (1-100).
	ThrottleCPU int `json:"throttleCPU,omitempty" yaml:"throttleCPU,omitempty"`
	// FreezePressure: desktop pressure (PSI "some" avg10 of CPU, memory or I/O, percent)
	// at or above which a throttled guest is frozen.
	FreezePressure float64 `json:"freezePressure,omitempty" yaml:"freezePressure,omitempty"`
	// ThawPressure: pressure below which a guest frozen for pressure may run again
	// (hysteresis; must be below FreezePressure).
	ThawPressure float64 `json:"thawPressure,omitempty" yaml:"thawPressure,omitempty"`
	// EvictAfter: a guest frozen this long is evicted so that Slurm requeues its job before
	// SlurmdTimeout marks the node down. Keep it below SlurmdTimeout.
	EvictAfter Duration `json:"evictAfter,omitempty" yaml:"evictAfter,omitempty"`
	// Hold: minimum time before the agent loosens a restriction (owner-active → idle,
	// freeze → throttle, throttle → run). Tightening is immediate.
	Hold Duration `json:"hold,omitempty" yaml:"hold,omitempty"`
	// DesktopLoad: CPU use of processes outside the guest, in cores (averaged over 5 s),
	// that counts as an active owner even without input (a long compile, a render).
	DesktopLoad float64 `json:"desktopLoad,omitempty" yaml:"desktopLoad,omitempty"`
	// RemoteActive: whether remote (ssh) and text-console sessions count as a logged-in owner.
	RemoteActive *bool `json:"remoteActive,omitempty" yaml:"remoteActive,omitempty"`
	// GuestMemory: the guest's memory limit in percent of the host's RAM.
	GuestMemory int `json:"guestMemory,omitempty" yaml:"guestMemory,omitempty"`
	// DesktopMemoryMB: memory protected for the desktop (cgroup memory.low of its slice).
	DesktopMemoryMB int `json:"desktopMemoryMB,omitempty" yaml:"desktopMemoryMB,omitempty"`
	// Controller says what "throttle" means (docs/interference.md): ControllerAdaptive
	// (the default) lets the agent's feedback loop set the guest's CPU cap from what the
	// desktop measurably suffers, keeping its slowdown under SlowdownTarget;
	// ControllerFixed caps the guest at ThrottleCPU whatever the desktop does.
	Controller ControllerKind `json:"controller,omitempty" yaml:"controller,omitempty"`
	// SlowdownTarget: the desktop slowdown (percent) the adaptive controller keeps the
	// guest under while someone is at the desk (0.1-50; default 1).
	SlowdownTarget float64 `json:"slowdownTarget,omitempty" yaml:"slowdownTarget,omitempty"`

	// How a running PC follows a schedule change that needs a reboot (docs/operations.md).

	// Switch says, per kind of the coming change, what happens when someone is logged in:
	// SwitchForce reboots SwitchGrace after the boundary, SwitchWait when the last session
	// ends. Keys are mode kinds (course-vm, cluster, …) and exception kinds (exam, lecture,
	// …); an exception's kind decides before its mode's kind. Unnamed kinds: DefaultPolicy.
	Switch map[string]SwitchRule `json:"switch,omitempty" yaml:"switch,omitempty"`
	// SwitchWarn: logged-in users are told this long before the boundary (countdown).
	SwitchWarn Duration `json:"switchWarn,omitempty" yaml:"switchWarn,omitempty"`
	// SwitchGrace: after the boundary, a forced switch waits this long for users to save.
	SwitchGrace Duration `json:"switchGrace,omitempty" yaml:"switchGrace,omitempty"`
	// SwitchSpread: PCs nobody uses reboot at a random instant within this window after
	// the boundary, so that a room does not reach the boot server in one instant.
	SwitchSpread Duration `json:"switchSpread,omitempty" yaml:"switchSpread,omitempty"`
	// PowerOffIdle: in a cluster mode, with no job in the guest and nobody logged in for
	// this long, the agent switches the PC off (0: never). Woken again by the boot server
	// before a mode that needs the PC, or by Slurm's ResumeProgram.
	PowerOffIdle Duration `json:"powerOffIdle,omitempty" yaml:"powerOffIdle,omitempty"`
	// LogoutIdle: a graphical session with no keyboard or mouse input at the PC for this
	// long is logged out, after a warning (node-agent/idlelogout; 0: never), so that an
	// abandoned session holds neither a waiting switch nor the power policy.
	LogoutIdle Duration `json:"logoutIdle,omitempty" yaml:"logoutIdle,omitempty"`
}

// ControllerKind is how the agent throttles the guest while the owner is active.
type ControllerKind string

const (
	ControllerAdaptive ControllerKind = "adaptive" // feedback loop on measured desktop slowdown
	ControllerFixed    ControllerKind = "fixed"    // a constant cap of ThrottleCPU percent
)

// ControllerKinds lists every controller.
var ControllerKinds = []ControllerKind{ControllerAdaptive, ControllerFixed}

// SwitchRule is what a mode switch that needs a reboot does to a logged-in user.
type SwitchRule string

const (
	SwitchForce SwitchRule = "force" // countdown, then reboot SwitchGrace after the boundary
	SwitchWait  SwitchRule = "wait"  // reminder, reboot when the last session ends
)

// SwitchRules lists every rule.
var SwitchRules = []SwitchRule{SwitchForce, SwitchWait}

// SwitchKeys are the kinds a policy's Switch map may name: the mode kinds and the
// exception kinds (an exception's kind decides before its mode's).
func SwitchKeys() []string {
	var k []string
	for _, m := range ModeKinds {
		k = append(k, string(m))
	}
	for _, e := range ExceptionKinds {
		k = append(k, string(e))
	}
	return k
}

// SwitchFor is the rule for a change to a mode of kind mode, made by an exception of
// kind exception ("" when a weekly rule makes it). p must be effective.
func (p Policy) SwitchFor(mode ModeKind, exception ExceptionKind) SwitchRule {
	if r, ok := p.Switch[string(exception)]; ok && exception != "" {
		return r
	}
	if r, ok := p.Switch[string(mode)]; ok {
		return r
	}
	return SwitchWait
}

// DefaultPolicy is what a pool without a policy gets: the guest runs when no one is
// logged in or the owner is idle, is throttled to a quarter of the CPUs at the first input
// event, frozen when the desktop shows pressure, and evicted after 10 minutes frozen
// (Slurm's default SlurmdTimeout is 300 s, but a frozen guest's slurmd still answers pings
// from the host's point of view only if it runs; an evicted job is requeued at once).
func DefaultPolicy() Policy {
	yes := true
	return Policy{
		Actions: map[OwnerState]GuestAction{
			StateNoUser:      ActionRun,
			StateOwnerIdle:   ActionRun,
			StateOwnerActive: ActionThrottle,
			StateAfterHours:  ActionRun,
			StateMaintenance: ActionEvict,
		},
		IdleAfter:       Duration(5 * time.Minute),
		ThrottleCPU:     25,
		FreezePressure:  20,
		ThawPressure:    5,
		EvictAfter:      Duration(10 * time.Minute),
		Hold:            Duration(30 * time.Second),
		DesktopLoad:     0.5,
		RemoteActive:    &yes,
		GuestMemory:     50,
		DesktopMemoryMB: 1024,
		Controller:      ControllerAdaptive,
		SlowdownTarget:  1,
		// A lecture, an exam or a course VM starts on time; a room's switch to the cluster
		// or back to the desktop waits for the student to leave.
		Switch: map[string]SwitchRule{
			string(KindCourseVM): SwitchForce, string(KindMaintenance): SwitchForce,
			"exam": SwitchForce, "lecture": SwitchForce,
			string(KindDesktop): SwitchWait, string(KindCluster): SwitchWait, string(KindLocalDisk): SwitchWait,
		},
		SwitchWarn:   Duration(10 * time.Minute),
		SwitchGrace:  Duration(5 * time.Minute),
		SwitchSpread: Duration(2 * time.Minute),
	}
}

// Effective returns p with every unset field taken from DefaultPolicy.
func (p Policy) Effective() Policy {
	d := DefaultPolicy()
	out := d
	out.Actions = map[OwnerState]GuestAction{}
	for k, v := range d.Actions {
		out.Actions[k] = v
	}
	for k, v := range p.Actions {
		out.Actions[k] = v
	}
	if p.IdleAfter != 0 {
		out.IdleAfter = p.IdleAfter
	}
	if p.ThrottleCPU != 0 {
		out.ThrottleCPU = p.ThrottleCPU
	}
	if p.FreezePressure != 0 {
		out.FreezePressure = p.FreezePressure
	}
	if p.ThawPressure != 0 {
		out.ThawPressure = p.ThawPressure
	}
	if p.EvictAfter != 0 {
		out.EvictAfter = p.EvictAfter
	}
	if p.Hold != 0 {
		out.Hold = p.Hold
	}
	if p.DesktopLoad != 0 {
		out.DesktopLoad = p.DesktopLoad
	}
	if p.RemoteActive != nil {
		v := *p.RemoteActive
		out.RemoteActive = &v
	}
	if p.GuestMemory != 0 {
		out.GuestMemory = p.GuestMemory
	}
	if p.DesktopMemoryMB != 0 {
		out.DesktopMemoryMB = p.DesktopMemoryMB
	}
	if p.Controller != "" {
		out.Controller = p.Controller
	}
	if p.SlowdownTarget != 0 {
		out.SlowdownTarget = p.SlowdownTarget
	}
	out.Switch = map[string]SwitchRule{}
	for k, v := range d.Switch {
		out.Switch[k] = v
	}
	for k, v := range p.Switch {
		out.Switch[k] = v
	}
	if p.SwitchWarn != 0 {
		out.SwitchWarn = p.SwitchWarn
	}
	if p.SwitchGrace != 0 {
		out.SwitchGrace = p.SwitchGrace
	}
	if p.SwitchSpread != 0 {
		out.SwitchSpread = p.SwitchSpread
	}
	out.PowerOffIdle = p.PowerOffIdle
	out.LogoutIdle = p.LogoutIdle
	return out
}

// Validate checks a (possibly partial) policy; the effective policy must be consistent too.
func (p Policy) Validate() error {
	for st, a := range p.Actions {
		if err := st.Valid(); err != nil {
			return invalid("policy: %v", err)
		}
		if !oneOf(a, GuestActions) {
			return invalid("policy: unknown action %q for %s (one of %s)", a, st, joinStrings(GuestActions))
		}
	}
	for _, d := range []struct {
		name string
		v    Duration
		min  time.Duration
	}{{"idleAfter", p.IdleAfter, time.Second}, {"evictAfter", p.EvictAfter, time.Second}, {"hold", p.Hold, 0},
		{"switchWarn", p.SwitchWarn, 0}, {"switchGrace", p.SwitchGrace, 0}, {"switchSpread", p.SwitchSpread, 0},
		{"powerOffIdle", p.PowerOffIdle, time.Minute}, {"logoutIdle", p.LogoutIdle, 2 * time.Minute}} {
		if d.v != 0 && (time.Duration(d.v) < d.min || time.Duration(d.v) > 7*24*time.Hour) {
			return invalid("policy: %s %s out of range (%s to 168h)", d.name, d.v, d.min)
		}
	}
	for k, r := range p.Switch {
		if !slices.Contains(SwitchKeys(), k) {
			return invalid("policy: switch: unknown kind %q (one of %s)", k, strings.Join(SwitchKeys(), ", "))
		}
		if !oneOf(r, SwitchRules) {
			return invalid("policy: switch: unknown rule %q for %s (one of %s)", r, k, joinStrings(SwitchRules))
		}
	}
	if p.ThrottleCPU < 0 || p.ThrottleCPU > 100 {
		return invalid("policy: throttleCPU %d out of range (1-100 percent)", p.ThrottleCPU)
	}
	if p.GuestMemory < 0 || p.GuestMemory > 100 {
		return invalid("policy: guestMemory %d out of range (1-100 percent)", p.GuestMemory)
	}
	if p.DesktopMemoryMB < 0 || p.DesktopMemoryMB > 1<<20 {
		return invalid("policy: desktopMemoryMB %d out of range", p.DesktopMemoryMB)
	}
	// Written as !(in range) so that NaN (YAML .nan) is out of range too.
	for _, f := range []struct {
		name string
		v    float64
	}{{"freezePressure", p.FreezePressure}, {"thawPressure", p.ThawPressure}} {
		if !(f.v >= 0 && f.v <= 100) {
			return invalid("policy: %s %g out of range (0-100 percent)", f.name, f.v)
		}
	}
	if p.Controller != "" && !oneOf(p.Controller, ControllerKinds) {
		return invalid("policy: unknown controller %q (one of %s)", p.Controller, joinStrings(ControllerKinds))
	}
	if p.SlowdownTarget != 0 && !(p.SlowdownTarget >= 0.1 && p.SlowdownTarget <= 50) {
		return invalid("policy: slowdownTarget %g out of range (0.1-50 percent)", p.SlowdownTarget)
	}
	if !(p.DesktopLoad >= 0 && p.DesktopLoad <= 4096) {
		return invalid("policy: desktopLoad %g out of range (0-4096 cores)", p.DesktopLoad)
	}
	e := p.Effective()
	if e.ThawPressure >= e.FreezePressure {
		return invalid("policy: thawPressure %g must be below freezePressure %g (hysteresis)", e.ThawPressure, e.FreezePressure)
	}
	return nil
}

// GuestBackend is how the node agent runs the compute guest.
type GuestBackend string

const (
	BackendQEMU      GuestBackend = "qemu"      // libvirt QEMU/KVM (TCG when /dev/kvm is unusable)
	BackendXen       GuestBackend = "xen"       // libvirt libxl
	BackendVMware    GuestBackend = "vmware"    // VMware Workstation/Player, .vmx with independent-nonpersistent disks
	BackendContainer GuestBackend = "container" // OS-level container (namespaces + cgroup), Linux-VServer lineage
)

var GuestBackends = []GuestBackend{BackendQEMU, BackendXen, BackendVMware, BackendContainer}

// GuestNetwork is how the guest reaches the network.
type GuestNetwork string

const (
	NetBridged GuestNetwork = "bridged" // own DHCP address on the pool segment (Slurm reaches slurmd directly)
	NetNAT     GuestNetwork = "nat"     // host's address, port forwards only (saves addresses)
	NetNone    GuestNetwork = "none"    // no network (tests, isolated course VMs)
)

var GuestNetworks = []GuestNetwork{NetBridged, NetNAT, NetNone}

// Guest is the compute guest (or course VM) a mode runs on the desktop.
type Guest struct {
	Image    string       `json:"image" yaml:"image"`                         // a compute or course-vm image
	Version  string       `json:"version,omitempty" yaml:"version,omitempty"` // pinned; empty = newest
	Backend  GuestBackend `json:"backend,omitempty" yaml:"backend,omitempty"` // default qemu
	VCPUs    int          `json:"vcpus,omitempty" yaml:"vcpus,omitempty"`     // default: the host's CPU count
	MemoryMB int          `json:"memoryMB,omitempty" yaml:"memoryMB,omitempty"`
	Network  GuestNetwork `json:"network,omitempty" yaml:"network,omitempty"` // default bridged
	Bridge   string       `json:"bridge,omitempty" yaml:"bridge,omitempty"`   // bridged: host bridge, default br0
	// Ports are NAT port forwards "HOSTPORT:GUESTPORT" (TCP), e.g. "6818:6818" for slurmd.
	Ports []string `json:"ports,omitempty" yaml:"ports,omitempty"`
	// KernelArgs are appended to the guest kernel command line (VM backends booting the
	// image's kernel directly).
	KernelArgs string `json:"kernelArgs,omitempty" yaml:"kernelArgs,omitempty"`
	// JobUsers are the ids of the site's users that a compute guest runs jobs as
	// (container backend; a VM's kernel has every id). None: jobs run as the guest's own
	// accounts only (guestjobs.go).
	JobUsers *GuestJobUsers `json:"jobUsers,omitempty" yaml:"jobUsers,omitempty"`
	// Storage are the cluster's NFS file systems the guest mounts for its jobs.
	Storage []GuestStorage `json:"storage,omitempty" yaml:"storage,omitempty"`
}

var portRE = regexp.MustCompile(`^([0-9]{1,5}):([0-9]{1,5})$`)

// Validate checks a guest definition's fields (the image reference is checked against the
// site in Site.Validate).
// The largest guest a mode may give and a node agent may report (wire.Heartbeat): beyond
// any pool PC, and within what Slurm declares for a node (its CPU count is 16 bits).
const (
	MaxGuestVCPUs    = 1024
	MaxGuestMemoryMB = 1 << 22 // 4 TiB
	MaxGuestGPUs     = 64
)

func (g Guest) Validate() error {
	if err := ValidName("image", g.Image); err != nil {
		return invalid("guest: %v", err)
	}
	if g.Backend != "" && !oneOf(g.Backend, GuestBackends) {
		return invalid("guest: unknown backend %q (one of %s)", g.Backend, joinStrings(GuestBackends))
	}
	if g.Network != "" && !oneOf(g.Network, GuestNetworks) {
		return invalid("guest: unknown network %q (one of %s)", g.Network, joinStrings(GuestNetworks))
	}
	if g.VCPUs < 0 || g.VCPUs > MaxGuestVCPUs {
		return invalid("guest: vcpus %d out of range", g.VCPUs)
	}
	if g.MemoryMB < 0 || g.MemoryMB > MaxGuestMemoryMB {
		return invalid("guest: memoryMB %d out of range", g.MemoryMB)
	}
	if g.Bridge != "" && names.Interface(g.Bridge) != nil {
		return invalid("guest: invalid bridge name %q", g.Bridge)
	}
	if len(g.Ports) > 64 {
		return invalid("guest: %d port forwards (at most 64)", len(g.Ports))
	}
	if len(g.Ports) > 0 && g.Network != NetNAT {
		return invalid("guest: port forwards need network nat")
	}
	for _, p := range g.Ports {
		m := portRE.FindStringSubmatch(p)
		if m == nil {
			return invalid("guest: invalid port forward %q: use HOSTPORT:GUESTPORT", p)
		}
		for _, n := range m[1:] {
			if v, _ := strconv.Atoi(n); v < 1 || v > 65535 {
				return invalid("guest: port %s out of range in %q", n, p)
			}
		}
	}
	if g.KernelArgs != "" {
		if err := ValidKernelArgs(g.KernelArgs); err != nil {
			return invalid("guest: %v", err)
		}
	}
	if g.JobUsers != nil {
		if err := g.JobUsers.Validate(); err != nil {
			return invalid("guest: %v", err)
		}
	}
	if err := ValidateGuestStorage(g.Storage); err != nil {
		return invalid("guest: %v", err)
	}
	// A container's file systems are mounted by its agent, a VM guest's by its own kernel
	// (guest-init, from the configuration disk); VMware's backend passes no configuration.
	if len(g.Storage) > 0 && g.Backend == BackendVMware {
		return invalid("guest: storage needs the container, qemu or xen backend (the vmware backend gives its guest no configuration disk)")
	}
	return nil
}

// WithDefaults fills the defaults of unset fields.
func (g Guest) WithDefaults() Guest {
	if g.Backend == "" {
		g.Backend = BackendQEMU
	}
	if g.Network == "" {
		g.Network = NetBridged
	}
	if g.Network == NetBridged && g.Bridge == "" {
		g.Bridge = "br0"
	}
	return g
}

func joinStrings[T ~string](v []T) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}

// Clone returns a deep copy (the actions map and RemoteActive are not shared).
func (p *Policy) Clone() *Policy {
	if p == nil {
		return nil
	}
	c := *p
	if p.Actions != nil {
		c.Actions = make(map[OwnerState]GuestAction, len(p.Actions))
		for k, v := range p.Actions {
			c.Actions[k] = v
		}
	}
	if p.RemoteActive != nil {
		v := *p.RemoteActive
		c.RemoteActive = &v
	}
	if p.Switch != nil {
		c.Switch = make(map[string]SwitchRule, len(p.Switch))
		for k, v := range p.Switch {
			c.Switch[k] = v
		}
	}
	return &c
}

// IsZero reports whether the policy sets nothing (it then means DefaultPolicy).
func (p Policy) IsZero() bool {
	if len(p.Actions) > 0 || len(p.Switch) > 0 {
		return false
	}
	p.Actions, p.Switch = nil, nil
	return reflect.ValueOf(p).IsZero()
}

// SamePolicy compares two (possibly nil) policies by content; nil and an empty policy
// are the same (both mean DefaultPolicy), as are no actions and an empty actions map.
func SamePolicy(a, b *Policy) bool {
	norm := func(p *Policy) *Policy {
		if p == nil || p.IsZero() {
			return nil
		}
		c := p.Clone()
		if len(c.Actions) == 0 {
			c.Actions = nil
		}
		if len(c.Switch) == 0 {
			c.Switch = nil
		}
		return c
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// Clone returns a deep copy (Ports, JobUsers and Storage are not shared).
func (g *Guest) Clone() *Guest {
	if g == nil {
		return nil
	}
	c := *g
	c.Ports = append([]string(nil), g.Ports...)
	if len(c.Ports) == 0 {
		c.Ports = nil
	}
	if g.JobUsers != nil {
		u := GuestJobUsers{UIDs: append([]string(nil), g.JobUsers.UIDs...), GIDs: append([]string(nil), g.JobUsers.GIDs...)}
		c.JobUsers = &u
	}
	c.Storage = append([]GuestStorage(nil), g.Storage...)
	if len(c.Storage) == 0 {
		c.Storage = nil
	}
	return &c
}

// SameGuest compares two (possibly nil) guests by content (no ports and an empty list
// are the same).
func SameGuest(a, b *Guest) bool {
	return reflect.DeepEqual(a.Clone(), b.Clone())
}
