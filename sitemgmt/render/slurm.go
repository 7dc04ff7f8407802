package render

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// SlurmPartition is the partition that holds every Overtime host; it is the default.
const SlurmPartition = "overtime"

// SlurmFeature is the node feature that says what a host's effective mode offers to jobs
// (sbatch --constraint=dedicated): the sync daemon's features (wire.Feature*), so that a
// constraint means the same on static and on dynamic nodes.
func SlurmFeature(k model.ModeKind) string {
	switch k {
	case model.KindCluster:
		return wire.FeatureDedicated
	case model.KindDesktop:
		return wire.FeatureDesktop
	}
	return string(k)
}

// SlurmWeight is the node weight of a host whose effective mode is of kind k. The
// weights are the sync daemon's (wire.Weight*); a static line cannot know whether a
// desktop's owner is at it, so a desktop gets the weight of one whose owner is active.
// The feed then refines a desktop's weight within its class from the host's calibration
// (wire.InterferenceWeight); a static line knows none and keeps the class's base.
func SlurmWeight(k model.ModeKind) int {
	switch k {
	case model.KindCluster:
		return wire.WeightDedicated
	case model.KindDesktop:
		return wire.WeightOwnerActive
	}
	return wire.WeightNoGuest
}

// SlurmNodes writes the node and partition lines of slurm.conf as an include file: one
// NodeName line per host (sorted), one partition per pool with hosts ("pool-POOL", the
// same name as the node feature and the dnsmasq tag, so a pool can never clash with the
// "overtime" partition), and the default partition "overtime" with every host.
//
// Every host is listed whatever its mode, so that slurm.conf does not change shape with
// the schedule; only Features and Weight follow the effective mode (the file is rendered
// again and slurmctld reconfigured when they change).
//
// No State= is written, so nodes start in Slurm's default UNKNOWN state: a PC whose mode
// runs slurmd registers and becomes IDLE, a PC booted into anything else never answers
// and slurmctld marks it DOWN (not responding), so no job is sent to it. Sites that let
// Slurm wake PCs (power saving) use dynamic nodes declared State=CLOUD instead of these
// lines (docs/slurm.md).
func SlurmNodes(out io.Writer, site *model.Site, modeOf func(h *model.Host) *model.Mode) error {
	if site == nil {
		return errorf("slurm: no site")
	}
	if modeOf == nil {
		return errorf("slurm: no modeOf function")
	}
	if err := checkName("site", site.Name); err != nil {
		return err
	}
	hosts := make([]*model.Host, len(site.Hosts))
	for i := range site.Hosts {
		hosts[i] = &site.Hosts[i]
	}
	sort.Slice(hosts, func(i, j int) bool { return hosts[i].Name < hosts[j].Name })

	w := &writer{}
	w.comment(generated)
	w.comment("Slurm nodes and partitions of Overtime site " + site.Name + ". Include it from slurm.conf,")
	w.comment("e.g. \"Include /etc/slurm/overtime-nodes.conf\", and run \"scontrol reconfigure\" after a change.")
	w.comment("Features: pool-POOL, and dedicated (cluster mode), desktop (desktop mode) or the mode kind.")
	w.comment(fmt.Sprintf("Weight: lowest first, dedicated %d, desktop %d, others %d.", SlurmWeight(model.KindCluster), SlurmWeight(model.KindDesktop), wire.WeightNoGuest))
	w.comment("State is Slurm's default: a PC that is not in a compute-capable mode does not answer and")
	w.comment("is marked DOWN; set ReturnToService=2 in slurm.conf so it returns once its slurmd registers.")
	w.comment("Overtime does not know CPUs and memory, so Slurm counts each node as 1 CPU and 1 MB.")
	w.line("")

	byPool := map[string][]string{}
	all := make([]string, 0, len(hosts))
	for _, h := range hosts {
		if err := checkHostname(h.Name); err != nil {
			return err
		}
		if err := checkName("pool", h.Pool); err != nil {
			return err
		}
		m := modeOf(h)
		if m == nil {
			return errorf("host %s: no effective mode", h.Name)
		}
		if err := checkMode(m); err != nil {
			return err
		}
		addr := ""
		if h.IP != "" {
			if err := checkIP("host "+h.Name, h.IP); err != nil {
				return err
			}
			// A fixed address saves slurmctld a DNS lookup per node; without one, the
			// node name must resolve.
			addr = " NodeAddr=" + h.IP
		}
		w.line("NodeName=%s%s Features=pool-%s,%s Weight=%d", h.Name, addr, h.Pool, SlurmFeature(m.Kind), SlurmWeight(m.Kind))
		byPool[h.Pool] = append(byPool[h.Pool], h.Name)
		all = append(all, h.Name)
	}

	pools := make([]string, 0, len(byPool))
	for p := range byPool {
		pools = append(pools, p)
	}
	sort.Strings(pools)
	w.line("")
	if len(all) == 0 {
		w.comment("No hosts: no partitions.")
		return w.flush(out)
	}
	for _, p := range pools {
		w.line("PartitionName=pool-%s Nodes=%s State=UP", p, SlurmHostlist(byPool[p]))
	}
	w.line("PartitionName=%s Nodes=%s Default=YES State=UP", SlurmPartition, SlurmHostlist(all))
	return w.flush(out)
}

// SlurmHostlist compresses host names into Slurm's hostlist syntax, e.g.
// pc-a01,pc-a02,pc-a03,pc-b7 -> pc-a[01-03],pc-b7, so that partition lines of large pools
// stay short. Names are grouped by their prefix before a trailing number and the width of
// that number (pc-a01 and pc-a1 are different hosts, so they never share a range); names
// without a trailing number are listed as they are. The result is sorted and deterministic.
func SlurmHostlist(names []string) string {
	type group struct {
		prefix string
		width  int
		nums   []int
	}
	groups := map[string]*group{}
	var keys, plain []string
	for _, n := range names {
		i := len(n)
		for i > 0 && n[i-1] >= '0' && n[i-1] <= '9' {
			i--
		}
		digits := n[i:]
		// Names without a trailing number, or with one too long for an int, stay plain.
		if digits == "" || len(digits) > 9 {
			plain = append(plain, n)
			continue
		}
		v, _ := strconv.Atoi(digits)
		key := n[:i] + "\x00" + strconv.Itoa(len(digits))
		g := groups[key]
		if g == nil {
			g = &group{prefix: n[:i], width: len(digits)}
			groups[key] = g
			keys = append(keys, key)
		}
		g.nums = append(g.nums, v)
	}
	sort.Strings(keys)
	sort.Strings(plain)

	var parts []string
	for _, k := range keys {
		g := groups[k]
		sort.Ints(g.nums)
		format := func(v int) string {
			s := strconv.Itoa(v)
			return strings.Repeat("0", g.width-len(s)) + s
		}
		if len(g.nums) == 1 {
			parts = append(parts, g.prefix+format(g.nums[0]))
			continue
		}
		var ranges []string
		for i := 0; i < len(g.nums); {
			j := i
			for j+1 < len(g.nums) && g.nums[j+1] <= g.nums[j]+1 {
				j++
			}
			if g.nums[j] == g.nums[i] {
				ranges = append(ranges, format(g.nums[i]))
			} else {
				ranges = append(ranges, format(g.nums[i])+"-"+format(g.nums[j]))
			}
			i = j + 1
		}
		parts = append(parts, g.prefix+"["+strings.Join(ranges, ",")+"]")
	}
	parts = append(parts, plain...)
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
