// Package guest is the node agent's one interface to the compute guest, whatever runs it:
// libvirt QEMU/KVM or Xen (guest/libvirt), VMware Workstation/Player (guest/vmware), or an
// OS-level container (guest/container).
//
// A guest is always transient: the base image is read-only (from the NFS image export),
// everything the guest writes goes to an overlay in the agent's tmpfs state directory, and
// Stop discards it. Backends keep the guest's limits in the cgroup (and in libvirt's live
// domain), not in the agent, so they hold while the agent is dead; a restarted agent finds
// the running guest again through Status.
//
// What the agent relies on from every backend (start, throttle, freeze, adopt, evict,
// crash reason, or a clear "backend unavailable") is checked by one conformance suite,
// guest/guesttest, which each backend's tests run against the real thing.
package guest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// State is a backend's view of a guest.
type State string

const (
	StateAbsent  State = "absent"  // no such guest
	StateRunning State = "running" // running (possibly throttled)
	StatePaused  State = "paused"  // frozen: libvirt suspend or cgroup freezer
	StateShutoff State = "shutoff" // defined but not running (exited by itself)
	StateCrashed State = "crashed" // died: QEMU crashed, container init exited non-zero
)

// Spec is everything a backend needs to start one guest. The agent fills it from the site
// manager's wire.AgentGuest and the host's facts.
type Spec struct {
	Name     string // domain / container name, e.g. overtime-pc-a01; [a-z0-9-]
	VCPUs    int    // >= 1
	MemoryMB int    // >= 16; hard limit of the guest (and of its cgroup, plus overhead)

	// VM backends: when Kernel is set the guest boots it directly (with Initrd and
	// Cmdline); BaseImage is then its root disk. Otherwise BaseImage is a bootable disk.
	Kernel  string
	Initrd  string
	Cmdline string

	// BaseImage is the read-only base: a file (raw, qcow2 or squashfs; VM disk or container
	// root image) or, for containers, a directory tree. It is never written.
	BaseImage  string
	BaseFormat string // raw | qcow2 | squashfs | dir

	// StateDir is this guest's directory on tmpfs (e.g. /run/overtime/guest/NAME): transient
	// overlay, console log, pid files. Created by Start, removed by Stop.
	StateDir string

	Network model.GuestNetwork
	Bridge  string        // bridged: the host bridge
	Ports   []PortForward // nat: TCP forwards from the host
	MAC     string        // guest NIC, locally administered (see GuestMAC)

	// CPUIdle puts the guest in an idle-class cgroup (cgroup v2 cpu.idle=1 / v1 cpu.idle,
	// cpu.shares=2) with its threads at nice 19 + SCHED_IDLE. Always set by the agent; a
	// field so that tests can compare.
	CPUIdle bool
	// CPULimit, when > 0, caps the guest at this many CPUs from the start (cpu.max).
	CPULimit float64

	// Host is the desktop's host name in the site manager (the guest's Slurm NodeName);
	// AgentURL is where the guest reaches this agent (job start/end calls of the SPANK
	// plugin). Containers get them as OVERTIME_HOST and OVERTIME_AGENT_URL in their init's
	// environment.
	Host, AgentURL string

	// JobUIDs and JobGIDs are the site's users' ids the guest maps unchanged, so that a
	// job runs as its user (model.GuestJobUsers). The container backend adds them to the
	// guest's user namespace; a VM's kernel has every id.
	JobUIDs, JobGIDs []model.IDRange
	// Storage are the cluster's NFS file systems mounted for the guest's jobs, in the
	// guest only. The container backend mounts them in the guest's private mount
	// namespace (the desktop's kernel is the NFS client, in the desktop's network).
	Storage []model.GuestStorage

	// Secrets are files the guest needs and no image may carry (the munge key of a
	// compute guest), by file name. Container guests see them read-only in
	// /run/secrets, owned by their root; libvirt's VM guests on their configuration
	// disk (libvirt/guestconfig.go).
	// Never marshalled (specs are compared as JSON and may be logged).
	Secrets map[string][]byte `json:"-"`
}

// PortForward is one NAT TCP forward host:HostPort -> guest:GuestPort.
type PortForward struct {
	HostPort, GuestPort int
}

// Status is what a backend reports about a guest.
type Status struct {
	State   State
	Reason  string        // why (crash reason, "frozen by policy", ...)
	PID     int           // main process (QEMU, container init); 0 when not running
	CPUTime time.Duration // CPU time used by the guest since it started
	Cgroup  string        // the guest's cgroup (relative path), where limits live
	// CPULimit is the cap in force in CPUs (0: none), read back from the cgroup.
	CPULimit float64
}

// Backend runs guests. Every method is safe to call again (idempotent where it makes
// sense: Stop on an absent guest, Thaw on a running one, SetCPULimit to the same value).
type Backend interface {
	// Kind is the model backend this implements.
	Kind() model.GuestBackend
	// Available reports whether guests can run here; a non-nil error is an *UnavailableError.
	Available(ctx context.Context) error
	// Start creates and starts a transient guest. It fails if one of that name runs.
	Start(ctx context.Context, s Spec) error
	// Status reports the guest; StateAbsent if there is none (not an error).
	Status(ctx context.Context, name string) (Status, error)
	// Freeze stops the guest in place (memory kept); Thaw resumes it.
	Freeze(ctx context.Context, name string) error
	Thaw(ctx context.Context, name string) error
	// SetCPULimit caps the guest's CPU bandwidth at cpus CPUs (cpu.max); cpus <= 0 removes the cap.
	SetCPULimit(ctx context.Context, name string, cpus float64) error
	// Stop ends the guest at once (evict: the job is requeued by Slurm, nothing to save)
	// and discards its transient state.
	Stop(ctx context.Context, name string) error
}

// UnavailableError says why a backend cannot run guests on this machine. It prints as
// "backend unavailable: <backend>: <reason>".
type UnavailableError struct {
	Backend model.GuestBackend
	Reason  string
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("backend unavailable: %s: %s", e.Backend, e.Reason)
}

// Unavailable builds an *UnavailableError.
func Unavailable(b model.GuestBackend, format string, a ...any) error {
	return &UnavailableError{Backend: b, Reason: fmt.Sprintf(format, a...)}
}

// IsUnavailable reports whether err (or one it wraps) is an *UnavailableError.
func IsUnavailable(err error) bool {
	var u *UnavailableError
	return errors.As(err, &u)
}

// ErrNotFound is returned by Freeze, Thaw and SetCPULimit when the guest does not exist.
var ErrNotFound = errors.New("guest not found")

// ErrUnsupported is wrapped by the error of Freeze, Thaw or SetCPULimit of a backend that
// cannot do that to any guest (a missing feature, not a problem of this machine, which is
// an *UnavailableError). Every backend in this tree does all three; the conformance suite
// (guest/guesttest) asserts this error for a backend that declares it cannot.
var ErrUnsupported = errors.New("not supported by this guest backend")

// Event is a change of a guest's state that the backend noticed by itself (the guest
// powered off, crashed, was paused by someone else).
type Event struct {
	Name   string
	State  State
	Reason string
}

// Watcher is implemented by backends that can report guest state changes as they happen
// (libvirt lifecycle events, the container's init exiting). The agent also checks Status
// periodically, so a backend without events still gets crashes noticed, only later.
type Watcher interface {
	// Watch sends events until ctx is done; it closes the channel when it returns.
	Watch(ctx context.Context) (<-chan Event, error)
}

// Reasserter is implemented by backends with limits that are set after the guest started
// (libvirt: cpu.idle on the domain's cgroup, the memory cap). An agent that adopts a guest
// calls it, in case its predecessor died between starting the guest and setting them.
type Reasserter interface {
	Reassert(ctx context.Context, s Spec) error
}

// LastWords is implemented by backends that keep a guest's console: why a guest that
// stopped by itself stopped, in its init's own words (InitError), "" when it gave none.
// The agent asks before Stop discards the console with the rest of the guest's state.
type LastWords interface {
	LastWords(name string) string
}

// InitErrorPrefix starts the line the compute guest's init writes before it gives up
// (die in scheduler-plugin/guest/guest-init); the rest of the line is the reason, e.g.
// "cluster storage nfs:/export/home at /home: mount failed: ...".
const InitErrorPrefix = "guest-init: ERROR: "

// InitError is the last reason a guest's init gave on its console ("" if none).
func InitError(console []byte) string {
	i := bytes.LastIndex(console, []byte(InitErrorPrefix))
	if i < 0 {
		return ""
	}
	line := console[i+len(InitErrorPrefix):]
	if j := bytes.IndexAny(line, "\r\n"); j >= 0 {
		line = line[:j]
	}
	return strings.TrimSpace(string(line))
}
