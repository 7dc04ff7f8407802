package model

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// This file holds what the node agent (node-agent/) and the site manager exchange: the
// per-pool sharing policy, the compute guest a mode runs, the configuration document an
// agent fetches, and the heartbeat it posts. Policy and Guest are stored in LDAP (on the
// pool and mode entries) and edited like every other field; AgentConfig and Heartbeat are
// only API documents.

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
	return out
}

// Validate checks a (possibly partial) policy; the effective policy must be consistent too.
func (p Policy) Validate() error {
	for st, a := range p.Actions {
		if !oneOf(st, OwnerStates) {
			return invalid("policy: unknown owner state %q (one of %s)", st, joinStrings(OwnerStates))
		}
		if !oneOf(a, GuestActions) {
			return invalid("policy: unknown action %q for %s (one of %s)", a, st, joinStrings(GuestActions))
		}
	}
	for _, d := range []struct {
		name string
		v    Duration
		min  time.Duration
	}{{"idleAfter", p.IdleAfter, time.Second}, {"evictAfter", p.EvictAfter, time.Second}, {"hold", p.Hold, 0}} {
		if d.v != 0 && (time.Duration(d.v) < d.min || time.Duration(d.v) > 7*24*time.Hour) {
			return invalid("policy: %s %s out of range (%s to 168h)", d.name, d.v, d.min)
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
}

var portRE = regexp.MustCompile(`^([0-9]{1,5}):([0-9]{1,5})$`)

// Validate checks a guest definition's fields (the image reference is checked against the
// site in Site.Validate).
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
	if g.VCPUs < 0 || g.VCPUs > 1024 {
		return invalid("guest: vcpus %d out of range", g.VCPUs)
	}
	if g.MemoryMB < 0 || g.MemoryMB > 1<<22 {
		return invalid("guest: memoryMB %d out of range", g.MemoryMB)
	}
	if g.Bridge != "" && !ifaceRE.MatchString(g.Bridge) {
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

// AgentConfig is the document GET /api/v1/agent/config returns to a node agent: everything
// it needs to decide and act until the next change, resolved by the site manager (schedule
// evaluated, policy defaults filled, image version resolved).
type AgentConfig struct {
	Host       string      `json:"host"`
	MAC        string      `json:"mac"`
	Pool       string      `json:"pool"`
	Generated  time.Time   `json:"generated"`           // server time the document was made
	Mode       string      `json:"mode"`                // mode the schedule gives now
	Kind       ModeKind    `json:"kind"`                // its kind
	NextChange time.Time   `json:"nextChange,omitzero"` // when the schedule changes next (absent: no change ahead)
	NextMode   string      `json:"nextMode,omitempty"`
	Policy     Policy      `json:"policy"`          // effective: every field set
	Guest      *AgentGuest `json:"guest,omitempty"` // nil: this mode runs no guest
	// GuestUnavailable says why Guest is nil although the mode names a guest (its image
	// has no published version, no boot server serves the host). The agent treats it like
	// a mode without a guest; the text is for people (agent status, logs).
	GuestUnavailable string `json:"guestUnavailable,omitempty"`
}

// AgentGuest is a Guest with defaults filled and its image version resolved.
type AgentGuest struct {
	Guest
	Name      string       `json:"name"`      // libvirt domain / container name: overtime-<host>
	ImageKind ImageKind    `json:"imageKind"` // compute or course-vm
	Resolved  ImageVersion `json:"resolved"`  // the version to run; Path is relative to the image root
	// ImageURL is the HTTP base of the version's directory on the host's boot server
	// (kernel, initrd, root image); NFS is "server:/export/path" of the same directory.
	ImageURL string `json:"imageURL"`
	NFS      string `json:"nfs"`
}

// Heartbeat is what a node agent posts to POST /api/v1/agent/heartbeat.
type Heartbeat struct {
	Host            string      `json:"host"`
	Time            time.Time   `json:"time"`       // agent's clock
	Mode            string      `json:"mode"`       // mode of the configuration in force
	ConfigFrom      string      `json:"configFrom"` // "api" or "cache" (site manager unreachable)
	OwnerState      OwnerState  `json:"ownerState"`
	Action          GuestAction `json:"action"`     // in force
	GuestState      string      `json:"guestState"` // backend's view: running, paused, shut off, absent, crashed, unavailable
	GuestReason     string      `json:"guestReason,omitempty"`
	Backend         string      `json:"backend,omitempty"`
	Pressure        float64     `json:"pressure"` // max desktop PSI some avg10, percent
	GuestCPUSeconds float64     `json:"guestCPUSeconds"`
	Restarts        int         `json:"restarts"` // guest restarts after crashes since agent start
	Version         string      `json:"version,omitempty"`
}

// HostStatus is the site manager's record of a host's last heartbeat (GET /api/v1/agent/status).
type HostStatus struct {
	Heartbeat
	Received time.Time `json:"received"` // server time
	Remote   string    `json:"remote"`   // source address
}

func joinStrings[T ~string](v []T) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}

// MarshalPolicy and UnmarshalPolicy are the LDAP encoding of a policy (compact JSON, one
// attribute value). Unknown fields are refused so a typo does not silently keep a default.
func MarshalPolicy(p Policy) (string, error) {
	b, err := json.Marshal(p)
	return string(b), err
}

func UnmarshalPolicy(s string) (Policy, error) {
	var p Policy
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Policy{}, fmt.Errorf("policy: %w", err)
	}
	if dec.More() {
		return Policy{}, fmt.Errorf("policy: trailing data after the JSON object")
	}
	return p, p.Validate()
}

// MarshalGuest and UnmarshalGuest are the LDAP encoding of a mode's guest (compact JSON,
// one attribute value), strict like the policy's.
func MarshalGuest(g Guest) (string, error) {
	b, err := json.Marshal(g)
	return string(b), err
}

func UnmarshalGuest(s string) (Guest, error) {
	var g Guest
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return Guest{}, fmt.Errorf("guest: %w", err)
	}
	if dec.More() {
		return Guest{}, fmt.Errorf("guest: trailing data after the JSON object")
	}
	return g, g.Validate()
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
	return &c
}

// IsZero reports whether the policy sets nothing (it then means DefaultPolicy).
func (p Policy) IsZero() bool {
	if len(p.Actions) > 0 {
		return false
	}
	p.Actions = nil
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
		return c
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// Clone returns a deep copy (Ports is not shared).
func (g *Guest) Clone() *Guest {
	if g == nil {
		return nil
	}
	c := *g
	c.Ports = append([]string(nil), g.Ports...)
	if len(c.Ports) == 0 {
		c.Ports = nil
	}
	return &c
}

// SameGuest compares two (possibly nil) guests by content (no ports and an empty list
// are the same).
func SameGuest(a, b *Guest) bool {
	return reflect.DeepEqual(a.Clone(), b.Clone())
}

// HeartbeatInterval is how often a node agent posts a heartbeat; a host whose last
// heartbeat is older than StaleAfter is shown stale.
const (
	HeartbeatInterval = 30 * time.Second
	StaleAfter        = 3 * HeartbeatInterval
)

// ConfigFrom values of a heartbeat.
const (
	ConfigFromAPI   = "api"   // the configuration in force was fetched from the site manager
	ConfigFromCache = "cache" // the site manager was unreachable; the agent uses its last copy
)

// Validate checks a heartbeat before the site manager keeps it: known states and actions,
// bounded one-line strings, finite non-negative numbers. Empty fields are allowed (an
// agent that does not know yet).
func (h Heartbeat) Validate() error {
	if h.Host != "" {
		if err := ValidHostname(h.Host); err != nil {
			return invalid("heartbeat: %v", err)
		}
	}
	if h.Mode != "" {
		if err := ValidName("mode", h.Mode); err != nil {
			return invalid("heartbeat: %v", err)
		}
	}
	if h.ConfigFrom != "" && h.ConfigFrom != ConfigFromAPI && h.ConfigFrom != ConfigFromCache {
		return invalid("heartbeat: configFrom %q must be %q or %q", h.ConfigFrom, ConfigFromAPI, ConfigFromCache)
	}
	if h.OwnerState != "" && !oneOf(h.OwnerState, OwnerStates) {
		return invalid("heartbeat: unknown owner state %q (one of %s)", h.OwnerState, joinStrings(OwnerStates))
	}
	if h.Action != "" && !oneOf(h.Action, GuestActions) {
		return invalid("heartbeat: unknown action %q (one of %s)", h.Action, joinStrings(GuestActions))
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"guestState", h.GuestState, 64}, {"guestReason", h.GuestReason, 200}, {"backend", h.Backend, 64}, {"version", h.Version, 64}} {
		if len(f.v) > f.max {
			return invalid("heartbeat: %s too long (%d bytes, at most %d)", f.name, len(f.v), f.max)
		}
		if !utf8.ValidString(f.v) || strings.ContainsFunc(f.v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return invalid("heartbeat: %s %q is not one line of text", f.name, f.v)
		}
	}
	if !(h.Pressure >= 0 && h.Pressure <= 100) {
		return invalid("heartbeat: pressure %g out of range (0-100 percent)", h.Pressure)
	}
	if !(h.GuestCPUSeconds >= 0 && h.GuestCPUSeconds < 1e15) {
		return invalid("heartbeat: guestCPUSeconds %g out of range", h.GuestCPUSeconds)
	}
	if h.Restarts < 0 {
		return invalid("heartbeat: negative restarts")
	}
	return nil
}

// AgentStatus is one entry of GET /api/v1/agent/status: a host's last heartbeat as the
// site manager received it, and whether it is stale (older than StaleAfter).
type AgentStatus struct {
	HostStatus
	Stale bool `json:"stale"`
}

// HostCredential is the answer of POST /api/v1/hosts/{name}/credential: the host's new
// bearer token, shown this once (the directory keeps only its SHA-256).
type HostCredential struct {
	Host    string    `json:"host"`
	Token   string    `json:"token"`
	Created time.Time `json:"created"`
}
