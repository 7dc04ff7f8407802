package web

import (
	"fmt"
	"strings"

	"github.com/overtime-hpc/overtime/sitemgmt/slurmnode"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
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

// AgentClass is the cheap part of ViewAgent, for counting every host of a large site:
// the state class ("running", "throttled", "frozen", "evicted", "down", "none",
// "offline"), the CPUs the guest may use now and whether someone is at the desk.
func AgentClass(st *wire.AgentStatus) (class string, harvest float64, owner bool) {
	if st == nil || st.Stale {
		return "offline", 0, false
	}
	owner = st.OwnerState == model.StateOwnerActive
	switch {
	case st.GuestState == "none" || st.GuestState == "" || st.GuestState == "absent":
		return "none", 0, owner
	case st.Action == model.ActionEvict:
		return "evicted", 0, owner
	case st.Action == model.ActionFreeze || st.GuestState == "paused":
		return "frozen", 0, owner
	case st.GuestState != "running":
		return "down", 0, owner
	case st.Action == model.ActionThrottle:
		return "throttled", float64(st.CPUs) * capOf(st), owner
	}
	return "running", float64(st.CPUs), owner
}

// capOf is a throttled guest's cap (1 when the heartbeat carries none).
func capOf(st *wire.AgentStatus) float64 {
	if c := st.Cap; c > 0 && c <= 1 {
		return c
	}
	return 1
}

// ViewAgent describes a host's last heartbeat (st nil: none since the site manager started).
func ViewAgent(st *wire.AgentStatus) AgentView {
	class, harvest, owner := AgentClass(st)
	v := AgentView{Class: class, Harvest: harvest, Owner: owner}
	switch {
	case st == nil:
		v.Label, v.Class, v.Title = "no agent", "offline", "no heartbeat received"
		return v
	case st.Stale:
		v.Label, v.Title = "offline", "last heartbeat "+st.Received.UTC().Format("2006-01-02 15:04 UTC")
		return v
	}
	v.Title = fmt.Sprintf("owner %s, guest %s (%s)", st.OwnerState, st.Action, st.GuestState)
	if st.GuestReason != "" {
		v.Title += ": " + st.GuestReason
	}
	switch class {
	case "none":
		v.Label = "no guest"
	case "evicted", "frozen":
		v.Label = class
	case "down":
		v.Label = "guest " + st.GuestState
	case "throttled":
		v.Label = fmt.Sprintf("throttled %.0f%%", 100*capOf(st))
	default:
		v.Label = "harvesting"
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
func (u *UI) statusMap(q *Req) map[string]*wire.AgentStatus {
	return u.svc.Agents.StatusesByHost(q.Now)
}
