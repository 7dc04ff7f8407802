package wire

import "time"

// Power commands and the audit trail (docs/operations.md, "Power: reboot, wake, power
// off"): what `overtime host reboot|wake|poweroff` sends, what the site manager answers
// and lists, what boot servers fetch to send Wake-on-LAN, and the audit entries.

// HostPowerRequest is the body of POST /api/v1/power.
type HostPowerRequest struct {
	Op     PowerOp `json:"op"`
	Hosts  string  `json:"hosts"` // a Slurm hostlist expression: pc[01-20],lab-b3
	Force  bool    `json:"force,omitempty"`
	Reason string  `json:"reason,omitempty"` // inert free text (names.Text)
}

// HostPowerResult is one host's answer to a power request: accepted (with the command's
// ID, to follow in GET /api/v1/power) or refused with the reason.
type HostPowerResult struct {
	Host     string `json:"host"`
	Accepted bool   `json:"accepted"`
	ID       string `json:"id,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// HostPowerResponse answers POST /api/v1/power, one result per host in the list's order.
type HostPowerResponse struct {
	Op    PowerOp           `json:"op"`
	Hosts []HostPowerResult `json:"hosts"`
}

// CommandSent is the state of a wake command whose magic packets a boot server sent;
// wakes have no agent to confirm them, so it is final like CommandDone.
const CommandSent CommandState = "sent"

// PowerRecord is a power command as the site manager keeps and lists it (GET
// /api/v1/power): the command, its host, and how far it got.
type PowerRecord struct {
	PowerCommand
	Host    string       `json:"host"`
	State   CommandState `json:"state"`
	Result  string       `json:"result,omitempty"` // why refused, who sent a wake, ...
	Updated time.Time    `json:"updated"`
	// Instance is the host's agent instance when the command was made: a reboot or
	// power-off counts as done once another instance has started after it.
	Instance string `json:"instance,omitempty"`
}

// Final reports whether the command is finished (done, refused or sent).
func (r PowerRecord) Final() bool { return r.State != CommandPending }

// Wake is one Wake-on-LAN packet a boot server is to send (GET
// /api/v1/bootservers/{name}/wakes): for a wake command, or scheduled before a mode
// that needs the PC (ID "sched-HOST-UNIX", By "schedule").
type Wake struct {
	ID     string    `json:"id"`
	Host   string    `json:"host"`
	MAC    string    `json:"mac"`
	Addr   string    `json:"addr"` // UDP "ip:port": the boot server subnet's broadcast, port 9
	By     string    `json:"by"`
	Reason string    `json:"reason,omitempty"`
	Due    time.Time `json:"due"`
}

// Wakes answers GET /api/v1/bootservers/{name}/wakes.
type Wakes struct {
	Server string `json:"server"`
	Wakes  []Wake `json:"wakes"`
}

// WakesSent is the body of POST /api/v1/bootservers/{name}/wakes: the IDs whose packets
// left the boot server, and those it could not send (error by ID).
type WakesSent struct {
	Sent   []string          `json:"sent"`
	Failed map[string]string `json:"failed,omitempty"`
}

// Audit entry kinds.
const (
	AuditPower = "power" // a power command: requested (per host accepted or refused), then its result
	AuditSite  = "site"  // a successful write of the site (Service.Update): the change list
)

// AuditEntry is one line of the audit trail (GET /api/v1/audit). One type for every
// kind, so that later kinds (issue 17: site changes with their diffs) extend Detail, not
// the format: Target names what it concerns (hosts, an entity), Summary is one line for
// people, Detail the items (per-host results, the diff's changes).
type AuditEntry struct {
	ID      string    `json:"id"`
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	User    string    `json:"user"`
	Target  string    `json:"target,omitempty"`
	Hosts   []string  `json:"hosts,omitempty"` // the hosts it concerns (for ?host=)
	Summary string    `json:"summary"`
	Detail  []string  `json:"detail,omitempty"`
}
