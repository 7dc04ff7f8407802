package web

import (
	"fmt"
	"strings"

	"github.com/overtime-hpc/overtime/sitemgmt/model"
	"github.com/overtime-hpc/overtime/sitemgmt/slurmnode"
	"github.com/overtime-hpc/overtime/sitemgmt/wire"
)

// AgentView is how one host's agent state is shown: a short label, a CSS class and a
// longer title.
type AgentView struct {
	Label, Class, Title string
	// Harvest is the CPUs the guest may use now (0: none): the host's CPUs, times its
	// cap when throttled; frozen, evicted and offline guests harvest nothing.
	Harvest float64
	Owner   bool // someone at the desk
}

// ViewAgent describes a host's last heartbeat (st nil: none since the site manager started).
func ViewAgent(st *wire.AgentStatus) AgentView {
	if st == nil {
		return AgentView{Label: "no agent", Class: "offline", Title: "no heartbeat received"}
	}
	if st.Stale {
		return AgentView{Label: "offline", Class: "offline", Title: "last heartbeat " + st.Received.UTC().Format("2006-01-02 15:04 UTC")}
	}
	v := AgentView{Owner: st.OwnerState == model.StateOwnerActive}
	v.Title = fmt.Sprintf("owner %s, guest %s (%s)", st.OwnerState, st.Action, st.GuestState)
	if st.GuestReason != "" {
		v.Title += ": " + st.GuestReason
	}
	switch {
	case st.GuestState == "none" || st.GuestState == "" || st.GuestState == "absent":
		v.Label, v.Class = "no guest", "none"
	case st.Action == model.ActionEvict:
		v.Label, v.Class = "evicted", "evicted"
	case st.Action == model.ActionFreeze || st.GuestState == "paused":
		v.Label, v.Class = "frozen", "frozen"
	case st.GuestState != "running":
		v.Label, v.Class = "guest "+st.GuestState, "down"
	case st.Action == model.ActionThrottle:
		c := st.Cap
		if c <= 0 || c > 1 {
			c = 1
		}
		v.Label, v.Class = fmt.Sprintf("throttled %.0f%%", 100*c), "throttled"
		v.Harvest = float64(st.CPUs) * c
	default:
		v.Label, v.Class = "harvesting", "running"
		v.Harvest = float64(st.CPUs)
	}
	if v.Owner {
		v.Label = "owner active · " + v.Label
	}
	return v
}

// HostRow is one host as the overview and pool tables show it.
type HostRow struct {
	Name, Pool, MAC, IP, BootServer string
	Mode, Rule                      string
	NextMode, Next                  string
	Agent                           AgentView
	Heartbeat                       string // "3m ago", "never"
	Slurm                           string // the node state Overtime asks of Slurm, with its reason
	Exception                       string // kind of exception deciding now
}

// hostRows builds the rows for hosts (in the given order), with their agents' states.
func hostRows(q *Req, hosts []*model.Host, statuses map[string]*wire.AgentStatus) []HostRow {
	snap := q.Snap
	rows := make([]HostRow, 0, len(hosts))
	for _, h := range hosts {
		d := snap.Engine.AtHost(h, q.Now)
		r := HostRow{Name: h.Name, Pool: h.Pool, MAC: h.MAC, IP: h.IP, BootServer: h.BootServer,
			Mode: d.Mode, Rule: d.Rule, NextMode: d.NextMode, Exception: string(d.ExceptionKind)}
		if !d.Next.IsZero() {
			r.Next = d.Next.In(snap.Engine.Location()).Format("Mon 15:04")
		}
		st := statuses[h.Name]
		r.Agent = ViewAgent(st)
		r.Heartbeat = "never"
		if st != nil {
			r.Heartbeat = humanDuration(q.Now.Sub(st.Received)) + " ago"
		}
		var running *model.Mode
		if st != nil {
			running = snap.Site.Mode(st.Mode)
		}
		n := slurmnode.Desired(h.Name, st, running)
		r.Slurm = string(n.State)
		if n.Reason != "" {
			r.Slurm += ": " + strings.TrimPrefix(n.Reason, "overtime: ")
		}
		rows = append(rows, r)
	}
	return rows
}

// statusMap is the agents' last heartbeats by host.
func (u *UI) statusMap(q *Req) map[string]*wire.AgentStatus { return u.svc.AgentStatusesByHost(q.Now) }
