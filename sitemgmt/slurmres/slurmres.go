// Package slurmres computes the coming windows in which a host's compute guest will be
// stopped by its schedule, for Slurm reservations (GET /api/v1/slurm/reservations,
// docs/slurm.md). It is pure: (resolver, host, instant, horizon) → windows. The sync
// daemon (scheduler-plugin/sync) turns each window into a maintenance reservation on the
// host's node, so that Slurm never starts a job whose time limit crosses a lecture, and
// warns and requeues the jobs that one added at short notice hits anyway.
//
// A window is time in which the schedule gives the host a mode without a compute guest
// (course VM, local disk, maintenance, a mode the site does not have) or an exam
// exception decides the host's mode (the agent runs no guest in an exam, whatever the
// mode). Unlike slurmnode, which judges the mode the agent reports running, this looks
// ahead at the schedule: it is about what will happen, not what runs.
package slurmres

import (
	"fmt"
	"sort"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/resolve"
	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// maxSteps bounds the walk over next-change instants per host: a week of 10-minute
// slots that all alternate is 1008 changes; a walk longer than that means data the
// engine's own bound does not cover, and the windows found so far are returned.
const maxSteps = 4096

// segment is the schedule between two consecutive candidate instants: constant mode and
// constant deciding exception.
type segment struct {
	start     time.Time
	noGuest   bool
	localDisk bool // a local-disk mode outside an exam: power saving may fill it
	mode      string
	exc       *model.Exception
}

// Windows is host h's windows without a guest in [from, from+horizon), in order, with
// adjacent ones merged (a course VM followed by maintenance is one window: the guest
// does not come back in between). A window in progress at from starts at from; one that
// reaches past the horizon ends at it. Times are in UTC, whole seconds (from is
// truncated), the form the C daemon parses.
func Windows(r *resolve.Resolver, h *model.Host, from time.Time, horizon time.Duration) []wire.SlurmWindow {
	from = from.UTC().Truncate(time.Second)
	end := from.Add(horizon)
	if horizon <= 0 {
		return nil
	}
	site := r.Site()
	excs := exceptionsOf(site, h)

	// Candidate instants: where the mode changes (the engine's next-change walk) and
	// where an exception affecting h starts or ends. The second set matters for exams: an
	// exam in the mode the host has anyway changes no mode but stops the guest.
	cand := []time.Time{from}
	t := from
	for step := 0; step < maxSteps; step++ {
		_, d := r.ModeAt(h, t)
		if d.Next.IsZero() || !d.Next.Before(end) || !d.Next.After(t) {
			break
		}
		t = d.Next.UTC()
		cand = append(cand, t)
	}
	for _, x := range excs {
		for _, b := range []time.Time{x.Start, x.End} {
			if b.After(from) && b.Before(end) {
				cand = append(cand, b.UTC())
			}
		}
	}
	sort.Slice(cand, func(i, j int) bool { return cand[i].Before(cand[j]) })

	var segs []segment
	for i, c := range cand {
		if i > 0 && c.Equal(cand[i-1]) {
			continue
		}
		segs = append(segs, at(r, h, excs, c))
	}

	var out []wire.SlurmWindow
	loc := r.Location()
	for i := 0; i < len(segs); i++ {
		if !segs[i].noGuest {
			continue
		}
		j := i
		for j+1 < len(segs) && segs[j+1].noGuest {
			j++
		}
		w := wire.SlurmWindow{Node: h.Name, Start: segs[i].start, End: end, Mode: segs[i].mode, PowerSave: true}
		for k := i; k <= j; k++ {
			w.PowerSave = w.PowerSave && segs[k].localDisk
		}
		if j+1 < len(segs) {
			w.End = segs[j+1].start
		}
		if x := segs[i].exc; x != nil {
			w.Exception = x.Name
		}
		w.Reason = Reason(segs[i].mode, w.Exception, segs[i].start, from, loc)
		out = append(out, w)
		i = j
	}
	return out
}

// Reason is the text a window's reservation and job comments carry: the change and when
// it happens on the site's clock, e.g. "overtime: course-bio at 10:00" (on from's day),
// "overtime: desktop (exception exam-1) at Wed 08:00", or "overtime: local now".
func Reason(mode, exception string, start, from time.Time, loc *time.Location) string {
	what := mode
	if exception != "" {
		what = fmt.Sprintf("%s (exception %s)", mode, exception)
	}
	s, f := start.In(loc), from.In(loc)
	when := s.Format("15:04")
	if s.YearDay() != f.YearDay() || s.Year() != f.Year() {
		when = s.Format("Mon 15:04")
	}
	// A window in progress is clipped at from: its real start is not known here, and
	// "since" the clipped instant would be wrong.
	if !start.After(from) {
		return fmt.Sprintf("overtime: %s now", what)
	}
	return fmt.Sprintf("overtime: %s at %s", what, when)
}

// at describes the schedule of h at t.
func at(r *resolve.Resolver, h *model.Host, excs []*model.Exception, t time.Time) segment {
	m, d := r.ModeAt(h, t)
	s := segment{start: t, mode: d.Mode}
	switch d.Level {
	case schedule.LevelHostException:
		s.exc = covering(excs, t, func(x *model.Exception) bool { return targetsHost(x, h.Name) })
	case schedule.LevelPoolException:
		s.exc = covering(excs, t, func(x *model.Exception) bool { return targetsPool(x, h.Pool) })
	}
	exam := d.ExceptionKind == model.ExceptionExam
	s.noGuest = m == nil || m.Guest == nil || exam
	s.localDisk = m != nil && m.Kind == model.KindLocalDisk && !exam
	return s
}

// exceptionsOf is every ordinary (not power-save) exception that names h or its pool.
func exceptionsOf(site *model.Site, h *model.Host) []*model.Exception {
	var out []*model.Exception
	for i := range site.Exceptions {
		x := &site.Exceptions[i]
		if x.Kind == model.ExceptionPowerSave {
			continue
		}
		if targetsHost(x, h.Name) || (h.Pool != "" && targetsPool(x, h.Pool)) {
			out = append(out, x)
		}
	}
	return out
}

func targetsHost(x *model.Exception, host string) bool {
	for _, tg := range x.Targets {
		if tg.Host == host {
			return true
		}
	}
	return false
}

func targetsPool(x *model.Exception, pool string) bool {
	for _, tg := range x.Targets {
		if tg.Pool == pool && tg.Host == "" {
			return true
		}
	}
	return false
}

// covering is the exception of excs that covers t ([start, end)) and matches; the
// compiler refuses overlapping exceptions at one target, so there is at most one.
func covering(excs []*model.Exception, t time.Time, match func(*model.Exception) bool) *model.Exception {
	for _, x := range excs {
		if !t.Before(x.Start) && t.Before(x.End) && match(x) {
			return x
		}
	}
	return nil
}

// All is every host's windows, sorted by node, then start: the body of
// GET /api/v1/slurm/reservations.
func All(r *resolve.Resolver, now time.Time, horizon time.Duration) wire.SlurmReservations {
	now = now.UTC().Truncate(time.Second)
	out := wire.SlurmReservations{Now: now, HorizonSeconds: int64(horizon / time.Second), Windows: []wire.SlurmWindow{}}
	site := r.Site()
	for i := range site.Hosts {
		out.Windows = append(out.Windows, Windows(r, &site.Hosts[i], now, horizon)...)
	}
	sort.SliceStable(out.Windows, func(i, j int) bool {
		a, b := out.Windows[i], out.Windows[j]
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		return a.Start.Before(b.Start)
	})
	return out
}
