// Package slurmnode decides what Slurm should think of each host's compute guest, from the
// node agent's last heartbeat and the mode it runs. It is pure: the API serves its result
// (GET /api/v1/slurm/nodes) and the sync daemon (scheduler-plugin/sync, C, libslurm)
// applies it. Keeping the mapping here, next to the schedule and the policy, means the
// daemon on the Slurm controller needs no knowledge of modes, pools or owner states.
package slurmnode

import (
	"fmt"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/model"
	"github.com/overtime-hpc/overtime/sitemgmt/wire"
)

// Desired maps one host to its Slurm node. st is the host's last heartbeat (nil: none since
// the site manager started); a stale heartbeat means the desktop is off or its agent is
// gone.
func Desired(site *model.Site, host *model.Host, st *wire.AgentStatus, now time.Time) wire.SlurmNode {
	n := wire.SlurmNode{Name: host.Name, Weight: wire.WeightOwnerActive}
	feat := []string{wire.FeatureOvertime}
	down := func(state wire.SlurmNodeState, why string) wire.SlurmNode {
		n.State = state
		n.Reason = "overtime: " + why
		n.Features = strings.Join(feat, ",")
		if n.Comment == "" {
			n.Comment = n.Reason
		}
		return n
	}
	if st == nil {
		return down(wire.SlurmDown, fmt.Sprintf("no heartbeat from %s's node agent (desktop off?)", host.Name))
	}
	if st.Stale {
		return down(wire.SlurmDown, fmt.Sprintf("no heartbeat from %s's node agent since %s (desktop off?)", host.Name, st.Received.UTC().Format(time.RFC3339)))
	}
	n.Comment = fmt.Sprintf("overtime: mode %s, owner %s, guest %s, %s (heartbeat %s)", st.Mode, st.OwnerState, st.Action, st.GuestState, st.Time.UTC().Format(time.RFC3339))
	kind := model.ModeKind("")
	if m := site.Mode(st.Mode); m != nil {
		kind = m.Kind
	}
	switch kind {
	case model.KindCluster:
		feat = append(feat, wire.FeatureDedicated)
	case model.KindDesktop:
		feat = append(feat, wire.FeatureDesktop)
	}
	if st.GuestState == "none" || (kind != model.KindCluster && kind != model.KindDesktop) {
		return down(wire.SlurmDown, fmt.Sprintf("%s is in mode %s, which runs no compute guest", host.Name, st.Mode))
	}
	switch st.Action {
	case model.ActionEvict:
		return down(wire.SlurmEvicted, fmt.Sprintf("guest on %s evicted: the owner needed the desktop (%s)", host.Name, st.OwnerState))
	case model.ActionFreeze:
		return down(wire.SlurmFrozen, fmt.Sprintf("guest on %s frozen: the owner needs the desktop", host.Name))
	}
	switch st.GuestState {
	case "running":
	case "paused":
		return down(wire.SlurmFrozen, fmt.Sprintf("guest on %s paused", host.Name))
	default:
		why := st.GuestState
		if st.GuestReason != "" {
			why += ": " + st.GuestReason
		}
		return down(wire.SlurmDown, fmt.Sprintf("guest on %s not running (%s)", host.Name, why))
	}
	switch {
	case kind == model.KindCluster:
		n.Weight = wire.WeightDedicated
	case st.OwnerState == model.StateOwnerActive:
		feat = append(feat, wire.FeatureOwnerActive)
		n.Weight = wire.WeightOwnerActive
	default:
		feat = append(feat, wire.FeatureDeskEmpty)
		n.Weight = wire.WeightDeskEmpty
	}
	n.State = wire.SlurmUp
	n.Features = strings.Join(feat, ",")
	return n
}
