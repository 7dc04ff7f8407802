// Package slurmnode decides what Slurm should think of each host's compute guest, from the
// node agent's last heartbeat and the mode it runs. It is pure: the service assembles the
// feed (GET /api/v1/slurm/nodes) and the sync daemon (scheduler-plugin/sync, C, libslurm)
// applies it. Keeping the mapping here, next to the schedule and the policy, means the
// daemon on the Slurm controller needs no knowledge of modes, pools or owner states.
//
// It judges the mode the agent reports running, not the one the schedule gives now
// (sitemgmt/resolve): the node's state must describe the guest that exists, and the agent
// switches modes at the schedule's change instants by itself (its configuration names
// the next change).
package slurmnode

import (
	"fmt"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Desired maps one host to its Slurm node. st is the host's last heartbeat (nil: none since
// the site manager started); a stale heartbeat means the desktop is off or its agent is
// gone. running is the site's mode of the name the heartbeat reports (nil: none, or a
// mode the site no longer has).
func Desired(host string, st *wire.AgentStatus, running *model.Mode) wire.SlurmNode {
	n := wire.SlurmNode{Name: host, Weight: wire.WeightOwnerActive}
	if st != nil {
		// The size is the PC's, not the guest's state: a stale or downed host's last
		// report still says what the node is when the daemon declares it.
		n.CPUs, n.MemoryMB, n.GPUs = st.CPUs, st.MemoryMB, st.GPUs
	}
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
		return down(wire.SlurmDown, fmt.Sprintf("no heartbeat from %s's node agent (desktop off?)", host))
	}
	if st.Stale {
		return down(wire.SlurmDown, fmt.Sprintf("no heartbeat from %s's node agent since %s (desktop off?)", host, st.Received.UTC().Format(time.RFC3339)))
	}
	// The server's receive time: the agent's clock may be hours off.
	n.Comment = fmt.Sprintf("overtime: mode %s, owner %s, guest %s, %s (heartbeat %s)", st.Mode, st.OwnerState, st.Action, st.GuestState, st.Received.UTC().Format(time.RFC3339))
	kind := model.ModeKind("")
	if running != nil {
		kind = running.Kind
	}
	switch kind {
	case model.KindCluster:
		feat = append(feat, wire.FeatureDedicated)
	case model.KindDesktop:
		feat = append(feat, wire.FeatureDesktop)
	}
	if st.GuestState == "none" || (kind != model.KindCluster && kind != model.KindDesktop) {
		return down(wire.SlurmDown, fmt.Sprintf("%s is in mode %s, which runs no compute guest", host, st.Mode))
	}
	switch st.Action {
	case model.ActionEvict:
		return down(wire.SlurmEvicted, fmt.Sprintf("guest on %s evicted: the owner needed the desktop (%s)", host, st.OwnerState))
	case model.ActionFreeze:
		return down(wire.SlurmFrozen, fmt.Sprintf("guest on %s frozen: the owner needs the desktop", host))
	}
	switch st.GuestState {
	case "running":
	case "paused":
		return down(wire.SlurmFrozen, fmt.Sprintf("guest on %s paused", host))
	default:
		why := st.GuestState
		if st.GuestReason != "" {
			why += ": " + st.GuestReason
		}
		return down(wire.SlurmDown, fmt.Sprintf("guest on %s not running (%s)", host, why))
	}
	switch {
	case kind == model.KindCluster:
		n.Weight = wire.WeightDedicated
	case st.OwnerState == model.StateOwnerActive:
		feat = append(feat, wire.FeatureOwnerActive)
		n.Weight = wire.InterferenceWeight(wire.WeightOwnerActive, st.Interference)
	default:
		feat = append(feat, wire.FeatureDeskEmpty)
		n.Weight = wire.InterferenceWeight(wire.WeightDeskEmpty, st.Interference)
	}
	if p := st.Interference; p != nil && kind == model.KindDesktop {
		// Why this weight, for `scontrol show node`.
		n.Comment += fmt.Sprintf(", calibrated desktop slowdown cpu %.1f%% memory %.1f%%", 100*p.CPUSlowdown, 100*p.MemorySlowdown)
	}
	n.State = wire.SlurmUp
	n.Features = strings.Join(feat, ",")
	return n
}
