// Package powersave turns Slurm's power saving calls into schedule changes.
//
// slurmctld runs ResumeProgram with the nodes it wants for queued jobs and SuspendProgram
// with nodes that have been idle for SuspendTime. In Overtime those programs are
// `overtime slurm resume|suspend`, which call the site manager (POST
// /api/v1/slurm/resume|suspend) and send Wake-on-LAN packets. The site manager decides
// per host from its schedule:
//
//   - desktop or cluster mode with a compute guest: nothing to change, only wake the PC;
//   - a local-disk mode (the PC belongs to another OS now): add a power-save exception
//     that puts the host in a cluster mode for the coming slots, and wake it;
//   - anything else (a course VM, i.e. a lecture, maintenance, a mode without a guest):
//     refuse, with the reason.
//
// A power-save exception (model.ExceptionPowerSave) fills only slots the rest of the
// schedule gives to a local-disk mode (schedule.LevelPowerSave), so a lecture, an exam
// or desktop hours win over it, including ones an administrator adds later. Suspend
// removes the host's power-save exceptions: the host follows its schedule again.
package powersave

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/resolve"
	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
	"github.com/overtime-hpc/overtime/sitemgmt/wol"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// WakePort is the UDP port magic packets go to (the discard port, as etherwake and
// wakeonlan use).
const WakePort = 9

// ExceptionName is the name of the power-save exception resume makes for host.
func ExceptionName(host string) string {
	n := "slurm-" + host
	if len(n) <= 63 {
		return n
	}
	sum := sha256.Sum256([]byte(host))
	return "slurm-" + host[:48] + "-" + hex.EncodeToString(sum[:4])
}

// Plan is what a resume or suspend will do: per-host results (Host, Action, Reason) and
// the edit of the site that carries them out.
type Plan struct {
	Results []wire.PowerResult
	put     []model.Exception
	release map[string]bool // hosts whose power-save exceptions go
}

// Apply edits site (a clone being built by the service): removes the released hosts'
// power-save exceptions and adds the new ones.
func (p *Plan) Apply(site *model.Site) {
	if len(p.release) > 0 {
		kept := site.Exceptions[:0]
		for _, x := range site.Exceptions {
			if x.Kind == model.ExceptionPowerSave {
				x.Targets = slices.DeleteFunc(x.Targets, func(t model.Target) bool { return t.Host != "" && p.release[t.Host] })
				if len(x.Targets) == 0 {
					continue
				}
			}
			kept = append(kept, x)
		}
		site.Exceptions = kept
	}
	site.Exceptions = append(site.Exceptions, p.put...)
}

// Resume plans waking the requested hosts for Slurm at now, judged by what res (the site
// the change starts from) gives them. Errors concern the whole request (no usable
// cluster mode, bad request); per-host refusals are results.
func Resume(res *resolve.Resolver, req wire.PowerRequest, now time.Time) (*Plan, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	site := res.Site()
	cluster, err := clusterMode(site, req.Mode)
	if err != nil {
		return nil, err
	}
	loc := res.Location()
	start := slotFloor(now, loc)
	minutes := req.ForMinutes
	if minutes == 0 {
		minutes = wire.DefaultPowerSaveMinutes
	}
	end := start.Add(time.Duration((minutes+9)/10*10) * time.Minute)
	if !end.After(now) {
		end = end.Add(10 * time.Minute)
	}
	p := &Plan{release: map[string]bool{}}
	for _, name := range dedupe(req.Hosts) {
		r := wire.PowerResult{Host: name, Action: wire.PowerRefused}
		h := site.Host(name)
		if h == nil {
			r.Reason = fmt.Sprintf("%q is not a host of this site", name)
			p.Results = append(p.Results, r)
			continue
		}
		m, d := res.ModeAt(h, now)
		until := ""
		if !d.Next.IsZero() {
			until = " until " + d.Next.In(loc).Format("Mon 15:04")
		}
		switch {
		case d.Level == schedule.LevelPowerSave || m.Kind == model.KindLocalDisk:
			r.Action = wire.PowerCluster
		case (m.Kind == model.KindDesktop || m.Kind == model.KindCluster) && m.Guest != nil:
			r.Action = wire.PowerWake
		case m.Kind == model.KindCourseVM:
			r.Reason = fmt.Sprintf("host %s is in course VM mode %s (%s)%s: a lecture slot always wins", name, d.Mode, d.Rule, until)
		case m.Kind == model.KindMaintenance:
			r.Reason = fmt.Sprintf("host %s is in maintenance mode %s (%s)%s", name, d.Mode, d.Rule, until)
		default:
			r.Reason = fmt.Sprintf("host %s is in mode %s (%s)%s, which runs no compute guest", name, d.Mode, d.Rule, until)
		}
		if r.Action != wire.PowerRefused && localDiskAhead(res, h, now, end) {
			// The host's coming slots include local-disk ones, now or after desktop
			// hours: the exception keeps it in the cluster through them. Renewed from
			// now: the host's old power-save exceptions go.
			p.release[name] = true
			p.put = append(p.put, model.Exception{
				Name: ExceptionName(name), Kind: model.ExceptionPowerSave, Mode: cluster.Name,
				Description: fmt.Sprintf("Slurm power saving: woken for jobs at %s (overtime slurm resume)", now.In(loc).Format(time.RFC3339)),
				Start:       start, End: end, Targets: []model.Target{{Host: name}},
			})
		}
		p.Results = append(p.Results, r)
	}
	return p, nil
}

// localDiskAhead reports whether the schedule gives h a local-disk mode (or has it in a
// power-save slot) at some point in [from, to).
func localDiskAhead(res *resolve.Resolver, h *model.Host, from, to time.Time) bool {
	for t, step := from, 0; t.Before(to) && step < 1000; step++ {
		m, d := res.ModeAt(h, t)
		if d.Level == schedule.LevelPowerSave || m.Kind == model.KindLocalDisk {
			return true
		}
		if d.Next.IsZero() {
			return false
		}
		t = d.Next
	}
	return false
}

// Suspend plans giving the requested hosts back to their schedule.
func Suspend(res *resolve.Resolver, req wire.PowerRequest) (*Plan, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	p := &Plan{release: map[string]bool{}}
	for _, name := range dedupe(req.Hosts) {
		r := wire.PowerResult{Host: name, Action: wire.PowerReleased}
		if res.Site().Host(name) == nil {
			r.Action, r.Reason = wire.PowerRefused, fmt.Sprintf("%q is not a host of this site", name)
		} else {
			p.release[name] = true
		}
		p.Results = append(p.Results, r)
	}
	return p, nil
}

// Describe fills what res (the changed site) now says about each result's host: its mode
// until when, and for hosts to wake their MAC and Wake-on-LAN address. The magic packet
// goes to the subnet of the boot server named for the host (its own or its pool's): a
// fallback boot server's subnet says nothing about the host's network, so then it is
// the local broadcast of the machine that sends it.
func Describe(res *resolve.Resolver, results []wire.PowerResult, now time.Time) {
	for i := range results {
		r := &results[i]
		h := res.Site().Host(r.Host)
		if h == nil {
			continue
		}
		_, d := res.ModeAt(h, now)
		r.Mode, r.Until = d.Mode, d.Next
		if r.Action == wire.PowerWake || r.Action == wire.PowerCluster {
			r.MAC = h.MAC
			r.WakeAddr = fmt.Sprintf("255.255.255.255:%d", WakePort)
			if bs, from := res.BootServer(h, resolve.Query{At: now}); from.Homed() {
				if a, err := wol.BroadcastAddr(bs.Subnet, WakePort); err == nil {
					r.WakeAddr = a
				}
			}
		}
	}
}

// clusterMode is the mode resume puts local-disk hosts in: the named one, or the site's
// only cluster mode with a compute guest.
func clusterMode(site *model.Site, name string) (*model.Mode, error) {
	if name != "" {
		m := site.Mode(name)
		switch {
		case m == nil:
			return nil, model.Invalid("mode %q: no such mode", name)
		case m.Kind != model.KindCluster || m.Guest == nil:
			return nil, model.Invalid("mode %q is not a cluster mode with a compute guest", name)
		}
		return m, nil
	}
	var found []*model.Mode
	for i := range site.Modes {
		if m := &site.Modes[i]; m.Kind == model.KindCluster && m.Guest != nil {
			found = append(found, m)
		}
	}
	switch len(found) {
	case 0:
		return nil, model.Conflict("the site has no cluster mode with a compute guest to wake hosts into; add one")
	case 1:
		return found[0], nil
	}
	return nil, model.Invalid("the site has %d cluster modes with a compute guest; name one (mode)", len(found))
}

// slotFloor is the start of the 10-minute slot holding t, in the site's zone.
func slotFloor(t time.Time, loc *time.Location) time.Time {
	lt := t.In(loc)
	return time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), lt.Minute()/10*10, 0, 0, loc)
}

func dedupe(names []string) []string {
	seen := make(map[string]bool, len(names))
	out := names[:0:0]
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
