package wire

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
)

// The node agent's side of the API (docs/agent-api.md): the configuration document an
// agent fetches, the heartbeat it posts, and what the site manager answers about them.

// AgentConfig is the document GET /api/v1/agent/config returns to a node agent: everything
// it needs to decide and act until the next change, resolved by the site manager (schedule
// evaluated, policy defaults filled, image version resolved).
type AgentConfig struct {
	Host       string         `json:"host"`
	MAC        string         `json:"mac"`
	Pool       string         `json:"pool"`
	Generated  time.Time      `json:"generated"`           // server time the document was made
	Mode       string         `json:"mode"`                // mode the schedule gives now
	Kind       model.ModeKind `json:"kind"`                // its kind
	NextChange time.Time      `json:"nextChange,omitzero"` // when the schedule changes next (absent: no change ahead)
	NextMode   string         `json:"nextMode,omitempty"`
	Policy     model.Policy   `json:"policy"`          // effective: every field set
	Guest      *AgentGuest    `json:"guest,omitempty"` // nil: this mode runs no guest
	// Interference is the host's last calibration (nil: never calibrated): the adaptive
	// controller starts from it.
	Interference *InterferenceProfile `json:"interference,omitempty"`
	// GuestUnavailable says why Guest is nil although the mode names a guest (its image
	// has no published version, no boot server serves the host). The agent treats it like
	// a mode without a guest; the text is for people (agent status, logs).
	GuestUnavailable string `json:"guestUnavailable,omitempty"`
	// CourseVM is the VM a course-vm mode starts full screen (the mode's vm, newest
	// version), located on the host's boot server; nil for other modes, and then
	// CourseVMUnavailable says why when a course-vm mode's VM cannot run (no published
	// version, no boot server).
	CourseVM            *AgentCourseVM `json:"courseVM,omitempty"`
	CourseVMUnavailable string         `json:"courseVMUnavailable,omitempty"`

	// The coming change at NextChange, when the PC must restart for it (docs/operations.md):
	// NextReboot says why ("" = the agent switches in place, as between desktop and
	// cluster on one image), NextSwitch what happens to a logged-in user (Policy.SwitchFor
	// of the next mode's and exception's kinds), NextLabel what users are told the PC
	// becomes (an exception's or mode's description, else the mode's name; inert text).
	NextReboot string           `json:"nextReboot,omitempty"`
	NextSwitch model.SwitchRule `json:"nextSwitch,omitempty"`
	NextLabel  string           `json:"nextLabel,omitempty"`
	// Reboot is set when the PC runs a boot that differs from what the schedule gives now
	// (its boundary passed, or someone picked another menu entry): why, as NextReboot.
	// RebootSwitch is what happens to a logged-in user (the rule for the mode in force),
	// Label what the PC becomes. Only when the agent said what it booted (?booted=).
	Reboot       string           `json:"reboot,omitempty"`
	RebootSwitch model.SwitchRule `json:"rebootSwitch,omitempty"`
	Label        string           `json:"label,omitempty"`
	// Exam: the mode in force comes from an exam exception. The agent runs no compute
	// guest and tells the desktop (/run/overtime/exam) so that the image can lock down.
	Exam bool `json:"exam,omitempty"`
	// ExamNetwork is what the PC may reach during the exam (set with Exam): the agent
	// loads it as the nftables table inet overtime_exam and deletes the table when the
	// exam is over. nil with Exam: a site manager that limits no network (older).
	ExamNetwork *ExamNetwork `json:"examNetwork,omitempty"`
	// Power is a pending request of an operator (overtime host reboot|poweroff) or of
	// Slurm's SuspendProgram for this PC; nil: none.
	Power *PowerCommand `json:"power,omitempty"`
	// SlurmctldVersion is the Slurm version of the site's controller as its sync daemon
	// last reported it (slurmcompat.Valid: 22.05.8; "": not known). The agent does not
	// start a compute guest whose slurmd would not join that controller
	// (vocab/slurmcompat), and says why in its heartbeat.
	SlurmctldVersion string `json:"slurmctldVersion,omitempty"`
}

// ExamNetwork is everything a PC in an exam may reach (docs/operations.md "Exam mode"):
// the exam's own allow list and what the PC needs to keep running, computed in one place
// by the site manager (sitemgmt/examallow). Loopback, answers to the PC's own
// connections, DHCP and the resolvers the PC was given are the agent's own rules.
type ExamNetwork struct {
	Allow []ExamEndpoint `json:"allow"`
}

// ExamEndpoint is one entry: where (names.ParseEndpoint's form: a host name, address or
// network, optionally :port; no port is every port and protocol, a port is TCP and UDP)
// and why.
type ExamEndpoint struct {
	Endpoint string      `json:"endpoint"`
	For      ExamPurpose `json:"for"`
}

// ExamPurpose says why a PC in an exam may reach an endpoint; the agent writes it as the
// rule's comment (a word of this fixed list, never text from the site).
type ExamPurpose string

const (
	ExamForExam        ExamPurpose = "exam"         // the exam exception's allow list
	ExamForBootServer  ExamPurpose = "boot-server"  // NFS root and images, DHCP, TFTP (every port)
	ExamForSiteManager ExamPurpose = "site-manager" // the agent's configuration and heartbeats
	ExamForDNS         ExamPurpose = "dns"          // the resolvers the boot server hands out
	ExamForLogin       ExamPurpose = "login"        // the seat's login directory (desktopLogin)
	ExamForKDC         ExamPurpose = "kdc"          // its Kerberos KDCs
	ExamForPrint       ExamPurpose = "print"        // the seat's print server
)

// ExamPurposes lists every purpose.
var ExamPurposes = []ExamPurpose{ExamForExam, ExamForBootServer, ExamForSiteManager, ExamForDNS, ExamForLogin, ExamForKDC, ExamForPrint}

// MaxExamEndpoints bounds an ExamNetwork: the exam's 32 (model.MaxExamAllow) and what a
// seat needs, with room to spare; a document beyond it is refused, not cut.
const MaxExamEndpoints = 128

// Check refuses a document the agent must not turn into a ruleset: too many entries, an
// endpoint that does not parse, an unknown purpose.
func (n *ExamNetwork) Check() error {
	if len(n.Allow) > MaxExamEndpoints {
		return fmt.Errorf("exam network: %d endpoints, at most %d", len(n.Allow), MaxExamEndpoints)
	}
	for i, e := range n.Allow {
		if _, err := names.ParseEndpoint(e.Endpoint); err != nil {
			return fmt.Errorf("exam network: allow[%d]: %w", i, err)
		}
		if !slices.Contains(ExamPurposes, e.For) {
			return fmt.Errorf("exam network: allow[%d]: unknown purpose %q", i, e.For)
		}
	}
	return nil
}

// PowerOp is what a power command asks of a PC.
type PowerOp string

const (
	OpReboot   PowerOp = "reboot"   // the agent restarts the PC (it boots what the schedule gives)
	OpPowerOff PowerOp = "poweroff" // the agent switches the PC off; never with a user logged in
	OpWake     PowerOp = "wake"     // the host's boot server sends Wake-on-LAN
)

// PowerOps lists every operation.
var PowerOps = []PowerOp{OpReboot, OpPowerOff, OpWake}

// PowerCommand is one request to reboot, switch off or wake a PC (overtime host
// reboot|poweroff|wake, Slurm's SuspendProgram), as the site manager records it (audit
// trail) and hands it to the agent (reboot, poweroff) or the boot server (wake).
type PowerCommand struct {
	ID        string    `json:"id"` // unique; the agent reports it back when done or refused
	Op        PowerOp   `json:"op"`
	Requested time.Time `json:"requested"`
	By        string    `json:"by"`               // user, or "slurm" for SuspendProgram
	Reason    string    `json:"reason,omitempty"` // shown to logged-in users; inert text
	// Force: a reboot goes ahead with users logged in, after the pool's SwitchGrace
	// countdown. A power-off is refused while anyone is logged in, forced or not.
	Force bool `json:"force,omitempty"`
}

// CommandState is how far the agent got with a power command.
type CommandState string

const (
	CommandPending CommandState = "pending" // accepted, waiting (a countdown, a logout)
	CommandDone    CommandState = "done"    // carried out (sent just before the restart or power-off)
	CommandRefused CommandState = "refused" // not carried out; Reason says why
)

// CommandStatus is what the agent reports of the last power command it saw.
type CommandStatus struct {
	ID     string       `json:"id"`
	State  CommandState `json:"state"`
	Reason string       `json:"reason,omitempty"`
}

// AgentCourseVM is a course-vm mode's VM image version and where it is: Resolved.Path
// below the image root (the agent's read-only image export), ImageURL over HTTP, NFS the
// same directory on the boot server's export. The directory holds the disk, vm.json and
// SHA256SUMS (docs/course-vms.md).
type AgentCourseVM struct {
	Image    string             `json:"image"`
	Resolved model.ImageVersion `json:"resolved"`
	ImageURL string             `json:"imageURL"`
	NFS      string             `json:"nfs"`
}

// AgentGuest is a mode's model.Guest with defaults filled and its image version resolved.
type AgentGuest struct {
	model.Guest
	Name      string             `json:"name"`      // libvirt domain / container name: overtime-<host>
	ImageKind model.ImageKind    `json:"imageKind"` // compute or course-vm
	Resolved  model.ImageVersion `json:"resolved"`  // the version to run; Path is relative to the image root
	// ImageURL is the HTTP base of the version's directory on the host's boot server
	// (kernel, initrd, root image); NFS is "server:/export/path" of the same directory.
	ImageURL string `json:"imageURL"`
	NFS      string `json:"nfs"`
}

// GuestSecrets is what GET /api/v1/agent/guest-secrets gives a host's agent for its
// compute guest: secrets that must never be baked into a published image. The agent hands
// them to the guest read-only in /run/secrets/ (munge.key).
type GuestSecrets struct {
	MungeKey []byte `json:"mungeKey"` // the cluster's munge key (base64 in JSON)
}

// Heartbeat is what a node agent posts to POST /api/v1/agent/heartbeat.
//
// The site manager orders a host's heartbeats by (Instance, Seq), never by Time: an
// agent's clock can jump by hours (a PC whose clock runs in local time until NTP steps
// it). Both are optional, so that older agents keep working (their heartbeats are ordered
// as service.MaxHeartbeatReorder describes).
type Heartbeat struct {
	Host string    `json:"host"`
	Time time.Time `json:"time"` // agent's clock: shown, never trusted for order or staleness
	// Instance is a random id of the agent process, new at every agent start; Seq counts
	// the heartbeat documents that process made (a document resent unchanged keeps its
	// number). A higher Seq of the same Instance is newer.
	Instance        string            `json:"instance,omitempty"`
	Seq             uint64            `json:"seq,omitempty"`
	Mode            string            `json:"mode"`       // mode of the configuration in force
	ConfigFrom      string            `json:"configFrom"` // "api" or "cache" (site manager unreachable)
	OwnerState      model.OwnerState  `json:"ownerState"`
	Action          model.GuestAction `json:"action"`     // in force
	GuestState      string            `json:"guestState"` // backend's view: running, paused, shut off, absent, crashed, unavailable
	GuestReason     string            `json:"guestReason,omitempty"`
	Backend         string            `json:"backend,omitempty"`
	Pressure        float64           `json:"pressure"` // max desktop PSI some avg10, percent
	GuestCPUSeconds float64           `json:"guestCPUSeconds"`
	Restarts        int               `json:"restarts"` // guest restarts after crashes since agent start
	Version         string            `json:"version,omitempty"`

	// Sessions counts logged-in sessions (local and remote): power-offs are refused while
	// it is not 0. Jobs counts the Slurm jobs the guest's SPANK plugin reported running.
	Sessions int `json:"sessions,omitempty"`
	Jobs     int `json:"jobs,omitempty"`
	// The guest's size as Slurm should record it: CPUs and memory the guest may use, and
	// GPUs passed through (0: none).
	CPUs     int `json:"cpus,omitempty"`
	MemoryMB int `json:"memoryMB,omitempty"`
	GPUs     int `json:"gpus,omitempty"`
	// BootSeconds: from the kernel's start to the agent's first configuration in this
	// boot (the measured boot time the site manager wakes PCs ahead by).
	BootSeconds float64 `json:"bootSeconds,omitempty"`
	// Switch describes a pending mode switch that needs a reboot ("" = none), e.g.
	// "reboot at 10:00:37 for lecture (forced)" or "waiting for logout to switch to cluster".
	Switch string `json:"switch,omitempty"`
	// Power is the agent's answer to the last power command it saw.
	Power *CommandStatus `json:"power,omitempty"`
	// Interference is a new calibration's result (sent until the site manager's
	// AgentConfig carries it back); Slowdown is the adaptive controller's current estimate
	// of the desktop's slowdown (fraction) and Cap the guest's CPU cap it set (fraction
	// of the host's CPUs, 0 = none).
	Interference *InterferenceProfile `json:"interference,omitempty"`
	Slowdown     float64              `json:"slowdown,omitempty"`
	Cap          float64              `json:"cap,omitempty"`
}

// HostStatus is the site manager's record of a host's last heartbeat (GET /api/v1/agent/status).
// Its Interference is the host's last calibration, whichever heartbeat carried it: the
// site manager keeps it from heartbeat to heartbeat (the agent sends a profile only until
// its AgentConfig carries it back), and a later-measured profile replaces it.
type HostStatus struct {
	Heartbeat
	Received time.Time `json:"received"` // server time
	Remote   string    `json:"remote"`   // source address
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
		if err := model.ValidHostname(h.Host); err != nil {
			return model.Invalid("heartbeat: %v", err)
		}
	}
	if h.Mode != "" {
		if err := model.ValidName("mode", h.Mode); err != nil {
			return model.Invalid("heartbeat: %v", err)
		}
	}
	if h.ConfigFrom != "" && h.ConfigFrom != ConfigFromAPI && h.ConfigFrom != ConfigFromCache {
		return model.Invalid("heartbeat: configFrom %q must be %q or %q", h.ConfigFrom, ConfigFromAPI, ConfigFromCache)
	}
	if h.OwnerState != "" {
		if err := h.OwnerState.Valid(); err != nil {
			return model.Invalid("heartbeat: %v", err)
		}
	}
	if h.Action != "" {
		if err := h.Action.Valid(); err != nil {
			return model.Invalid("heartbeat: %v", err)
		}
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"guestState", h.GuestState, 64}, {"guestReason", h.GuestReason, MaxGuestReason}, {"backend", h.Backend, 64}, {"version", h.Version, 64}, {"instance", h.Instance, 64},
		{"switch", h.Switch, MaxGuestReason}, {"power.id", h.Power.id(), 64}, {"power.reason", h.Power.reason(), MaxGuestReason}} {
		if len(f.v) > f.max {
			return model.Invalid("heartbeat: %s too long (%d bytes, at most %d)", f.name, len(f.v), f.max)
		}
		if !utf8.ValidString(f.v) || strings.ContainsFunc(f.v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return model.Invalid("heartbeat: %s %q is not one line of text", f.name, f.v)
		}
	}
	if !(h.Pressure >= 0 && h.Pressure <= 100) {
		return model.Invalid("heartbeat: pressure %g out of range (0-100 percent)", h.Pressure)
	}
	if !(h.GuestCPUSeconds >= 0 && h.GuestCPUSeconds < 1e15) {
		return model.Invalid("heartbeat: guestCPUSeconds %g out of range", h.GuestCPUSeconds)
	}
	if h.Restarts < 0 {
		return model.Invalid("heartbeat: negative restarts")
	}
	// The guest's size is declared to Slurm as the node's (slurmnode): a PC claiming a
	// thousand-fold machine would draw every job of the cluster onto itself, so the sizes
	// are bounded by what a mode's guest may be given (model.Guest.Validate).
	for _, n := range []struct {
		name string
		v    int
		max  int
	}{{"sessions", h.Sessions, 1 << 30}, {"jobs", h.Jobs, 1 << 30}, {"cpus", h.CPUs, model.MaxGuestVCPUs},
		{"memoryMB", h.MemoryMB, model.MaxGuestMemoryMB}, {"gpus", h.GPUs, model.MaxGuestGPUs}} {
		if n.v < 0 || n.v > n.max {
			return model.Invalid("heartbeat: %s %d out of range (0-%d)", n.name, n.v, n.max)
		}
	}
	if !(h.BootSeconds >= 0 && h.BootSeconds < 1e9) {
		return model.Invalid("heartbeat: bootSeconds %g out of range", h.BootSeconds)
	}
	if h.Power != nil && h.Power.State != CommandPending && h.Power.State != CommandDone && h.Power.State != CommandRefused {
		return model.Invalid("heartbeat: power.state %q must be %s, %s or %s", h.Power.State, CommandPending, CommandDone, CommandRefused)
	}
	if !(h.Slowdown >= 0 && h.Slowdown <= 10) {
		return model.Invalid("heartbeat: slowdown %g out of range (0-10, a fraction)", h.Slowdown)
	}
	if !(h.Cap >= 0 && h.Cap <= 1) {
		return model.Invalid("heartbeat: cap %g out of range (0-1, a fraction of the host's CPUs)", h.Cap)
	}
	if h.Interference != nil {
		if err := h.Interference.Validate(); err != nil {
			return model.Invalid("heartbeat: %v", err)
		}
	}
	return nil
}

func (p *CommandStatus) id() string {
	if p == nil {
		return ""
	}
	return p.ID
}

func (p *CommandStatus) reason() string {
	if p == nil {
		return ""
	}
	return p.Reason
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
	Host  string `json:"host"`
	Token string `json:"token"`
	// CAPin is the pin of the site manager's TLS CA (vocab/capin) the PC is to trust,
	// when the server serves TLS with its CA: the credential file's second line.
	CAPin   string    `json:"caPin,omitempty"`
	Created time.Time `json:"created"`
}

// CredentialRevoked is the answer of DELETE /api/v1/hosts/{name}/credential.
type CredentialRevoked struct {
	Host    string `json:"host"`
	Revoked bool   `json:"revoked"` // false: the host had no credential
}

// MaxGuestReason is the longest Heartbeat.GuestReason the site manager keeps.
const MaxGuestReason = 200

// OneLine makes s a heartbeat string: control characters (newlines of a console tail)
// become spaces, runs of blanks one, and it is cut to at most max bytes at a character
// boundary, ending in "…" when cut.
func OneLine(s string, max int) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == ' ' }), " ")
	if len(s) <= max {
		return s
	}
	cut := max - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// SeatConfig is what GET /api/v1/agent/seat gives a desktop before its display
// manager starts: the files of its login stack (sssd.conf, krb5.conf, the directory's
// CA, its keytab), its printing, and the sessions its greeter offers now (a course-vm
// mode's course VM), rendered by the site manager for this host only
// (sitemgmt/seatconf). With Unavailable set, logins with university accounts cannot
// work on this PC and Files holds no login file: the desktop shows the reason, in plain
// words, where people log in.
type SeatConfig struct {
	Unavailable string     `json:"unavailable,omitempty"`
	Files       []SeatFile `json:"files,omitempty"`
	// Directory is the directory's servers as host:port (its LDAP URIs with their
	// default ports), for the agent to check that one answers from this PC: if none
	// does, it says so at the login screen instead of letting every login fail.
	Directory []string `json:"directory,omitempty"`
	// Secret: Files hold a secret (the directory's bind password, the PC's keytab), so
	// the site manager sends them over TLS only. Never sent: the server's own note.
	Secret bool `json:"-"`
}

// SeatFile is one file of a SeatConfig. Path is one of SeatFiles; an agent writes
// nothing else.
type SeatFile struct {
	Path    string `json:"path"`
	Mode    uint32 `json:"mode"`    // 0600 for files that hold secrets, else 0644
	Content []byte `json:"content"` // base64 in JSON (a keytab is binary)
}

// The files of a desktop's login stack. sssd reads sssd.conf only when it is root's and
// 0600; the CA and the keytab live beside it so that one directory holds all of
// Overtime's login files.
const (
	SeatSSSDConf = "/etc/sssd/sssd.conf"
	SeatCACert   = "/etc/sssd/overtime-ca.pem"
	SeatKeytab   = "/etc/sssd/overtime.keytab"
	SeatKrb5Conf = "/etc/krb5.conf"
	// CUPS clients' server and default queue (the PC runs no cupsd).
	SeatCUPSClient = "/etc/cups/client.conf"
	SeatLPOptions  = "/etc/cups/lpoptions"
	// pam_mount's configuration: the volume of the user's home (docs/desktop.md
	// "Homes"). It replaces the image's, which has no volume.
	SeatPamMount = "/etc/security/pam_mount.conf.xml"
	// The course VM as a session the greeter offers (an X session entry), and LightDM's
	// default session, which makes it what a student gets in a course slot unless they
	// pick the Linux desktop. Only in a course-vm mode.
	SeatCourseVMSession = "/usr/share/xsessions/overtime-course-vm.desktop"
	SeatDefaultSession  = "/etc/lightdm/lightdm.conf.d/60-overtime-session.conf"
	// An exam's seat: X without console switching or zapping, LightDM without user
	// switching (docs/desktop.md "Exams"). Only while an exam holds the PC.
	SeatExamXorg    = "/etc/X11/xorg.conf.d/50-overtime-exam.conf"
	SeatExamLightDM = "/etc/lightdm/lightdm.conf.d/70-overtime-exam.conf"
)

// SeatFiles are every path a SeatConfig may name. An agent writes these only, and
// removes the ones an answer leaves out (a site that stopped using Kerberos leaves no
// stale krb5.conf behind).
var SeatFiles = []string{SeatSSSDConf, SeatCACert, SeatKeytab, SeatKrb5Conf, SeatCUPSClient, SeatLPOptions, SeatPamMount,
	SeatCourseVMSession, SeatDefaultSession, SeatExamXorg, SeatExamLightDM}
