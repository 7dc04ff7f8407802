package resolve

import (
	"fmt"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Switch is what the coming change of a host's schedule asks of a running PC: whether it
// must restart for it and why, what a logged-in user gets, and what they are told the PC
// becomes. The node agent carries it out (docs/operations.md).
type Switch struct {
	At     time.Time        // the boundary (Decision.Next)
	Mode   string           // the mode from At on
	Reboot string           // why the PC must restart; "" = the agent switches in place
	Rule   model.SwitchRule // for a logged-in user (the pool policy's rule for the next kind)
	Label  string           // what users are told the PC becomes (one line of inert text)
}

// Exception is the exception whose slot decided d for h at t (an exception level), or nil
// (a weekly rule, the default, an unknown host). Exceptions of one target do not overlap,
// so at most one of the host's and one of its pool's cover t, and d's level says which.
func (r *Resolver) Exception(h *model.Host, t time.Time, d schedule.Decision) *model.Exception {
	if h == nil {
		return nil
	}
	for i := range r.site.Exceptions {
		x := &r.site.Exceptions[i]
		if x.Mode != d.Mode || t.Before(x.Start) || !t.Before(x.End) {
			continue
		}
		for _, tg := range x.Targets {
			switch {
			case d.Level == schedule.LevelHostException && tg.Host == h.Name,
				d.Level == schedule.LevelPoolException && tg.Pool == h.Pool && tg.Host == "",
				d.Level == schedule.LevelPowerSave && tg.Host == h.Name && x.Kind == model.ExceptionPowerSave:
				return x
			}
		}
	}
	return nil
}

// nextExamBoundary is the first start or end of an exam exception targeting h (or its
// pool) after t; zero if none.
func (r *Resolver) nextExamBoundary(h *model.Host, t time.Time) time.Time {
	var next time.Time
	for i := range r.site.Exceptions {
		x := &r.site.Exceptions[i]
		if x.Kind != model.ExceptionExam || !x.End.After(t) || !targets(x, h) {
			continue
		}
		b := x.End
		if x.Start.After(t) {
			b = x.Start
		}
		if next.IsZero() || b.Before(next) {
			next = b
		}
	}
	return next
}

func targets(x *model.Exception, h *model.Host) bool {
	for _, tg := range x.Targets {
		if tg.Host == h.Name || (tg.Host == "" && tg.Pool == h.Pool) {
			return true
		}
	}
	return false
}

// Running is what a running PC booted, as its agent reports it (the kernel command line's
// overtime.mode= and whether the boot was an exam's).
type Running struct {
	Mode string
	Exam bool
}

// RebootFrom is what the schedule's state in a asks of a PC that booted b: the switch it
// must still make (At is a.At), or nil when what it runs is what a gives (or b names no
// mode of the site: the agent cannot judge then, and the PC follows at its next boot).
// Image versions are compared as the site gives them now: publishing a new version
// changes what PCs boot next, it does not restart a room.
func (r *Resolver) RebootFrom(a *Assignment, b Running, q Query) *Switch {
	if a.Host == nil || a.Mode == nil || b.Mode == "" {
		return nil
	}
	bm := r.site.Mode(b.Mode)
	if bm == nil {
		return nil
	}
	booted := *a
	booted.Mode = bm
	booted.Image, _, _ = r.imageFor(bm, a.Server, q.Held)
	why := rebootReason(&booted, a, b.Exam, a.Exam)
	if why == "" {
		return nil
	}
	return &Switch{At: a.At, Mode: a.Mode.Name, Reboot: why, Rule: a.Policy.SwitchFor(a.Mode.Kind, a.Decision.ExceptionKind),
		Label: label(a.Mode, r.Exception(a.Host, a.At, a.Decision))}
}

// NextSwitch is the switch a's host makes at its next change (nil: no change ahead, or an
// unknown host). The next state is resolved with the same query at the boundary, so the
// comparison sees what the boot script will give then: image version, kernel, initrd,
// kernel arguments.
//
// An exam's start and end are changes even where the exam keeps the mode the weekly rule
// gives (the schedule engine sees only modes): the boot differs (no menu) and the desktop
// locks down, so the PC must restart there too.
func (r *Resolver) NextSwitch(a *Assignment, q Query) *Switch {
	if a.Host == nil || a.Mode == nil {
		return nil
	}
	at := a.Decision.Next
	if e := r.nextExamBoundary(a.Host, a.At); !e.IsZero() && (at.IsZero() || e.Before(at)) {
		at = e.In(a.Loc)
	}
	if at.IsZero() {
		return nil
	}
	q.At = at
	n := r.For(a.Host, q)
	if n.Mode == nil {
		return nil
	}
	sw := &Switch{At: at, Mode: n.Mode.Name}
	sw.Rule = a.Policy.SwitchFor(n.Mode.Kind, n.Decision.ExceptionKind)
	sw.Reboot = rebootReason(a, n, a.Exam, n.Exam)
	sw.Label = label(n.Mode, r.Exception(a.Host, n.At, n.Decision))
	return sw
}

// rebootReason says why going from assignment a to n needs the PC to restart, "" if the
// agent can switch in place. A restart is needed when the boot itself differs (another
// image or version, kernel, initrd or kernel arguments; the local disk; the maintenance
// system), and also when the PC must be pristine for what comes: a course VM or an exam
// starts on a freshly booted desktop, and an exam's lockdown ends only with a restart.
func rebootReason(a, n *Assignment, examNow, examNext bool) string {
	am, nm := a.Mode, n.Mode
	switch {
	case am.Name == nm.Name && examNow == examNext && versionOf(a.Image) == versionOf(n.Image):
		return ""
	case nm.Kind == model.KindLocalDisk && am.Kind != model.KindLocalDisk:
		return "the PC boots its local disk (" + nm.Name + ")"
	case nm.Kind == model.KindMaintenance && am.Kind != model.KindMaintenance:
		return "the PC boots the maintenance system (" + nm.Name + ")"
	case examNext && !examNow:
		return "an exam starts on a freshly booted PC"
	case examNow && !examNext:
		return "the exam's lockdown ends"
	case nm.Kind == model.KindCourseVM && am.Kind != model.KindCourseVM:
		return "the course VM starts on a freshly booted desktop"
	case am.Kind == model.KindLocalDisk || am.Kind == model.KindMaintenance:
		// Nothing of Overtime's runs there; the PC only follows if something restarts it.
		return "the PC leaves " + string(am.Kind) + " for " + nm.Name
	}
	var why []string
	switch {
	case am.Image != nm.Image:
		why = append(why, "image "+am.Image+" → "+nm.Image)
	case versionOf(a.Image) != versionOf(n.Image):
		why = append(why, fmt.Sprintf("image %s %s → %s", nm.Image, versionOf(a.Image), versionOf(n.Image)))
	}
	if am.Kernel != nm.Kernel || am.Initrd != nm.Initrd {
		why = append(why, "kernel or initrd")
	}
	if am.KernelArgs != nm.KernelArgs || bridgeOf(am) != bridgeOf(nm) {
		// The guest's bridge is made in the initramfs (overtime.bridge=), so it is a
		// kernel argument too.
		why = append(why, "kernel arguments")
	}
	return strings.Join(why, ", ")
}

func bridgeOf(m *model.Mode) string {
	if m.Guest == nil {
		return ""
	}
	if g := m.Guest.WithDefaults(); g.Network == model.NetBridged {
		return g.Bridge
	}
	return ""
}

func versionOf(v *model.ImageVersion) string {
	if v == nil {
		return "(none)"
	}
	return v.Version
}

// label is what a user is told the PC becomes: the exception's description, else the
// mode's, else the mode's name; one line, so that it is inert in a notification or wall.
func label(m *model.Mode, x *model.Exception) string {
	s := m.Name
	switch {
	case x != nil && x.Description != "":
		s = x.Description
	case m.Description != "":
		s = m.Description
	}
	return wire.OneLine(s, wire.MaxGuestReason)
}
