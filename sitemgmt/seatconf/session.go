package seatconf

import (
	"bytes"
	"fmt"

	"github.com/overtime-hpc/overtime/internal/translit"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// CourseVM is the course VM a host may start as a session now: its mode now is a
// course-vm mode whose VM can run there (the resolver's Assignment.CourseVM). The
// greeter offers it beside the Linux desktop, as the default.
type CourseVM struct {
	Mode  string       // the course-vm mode in force
	Image *model.Image // the mode's VM image (its name and description)
}

// SessionExec is the course-VM session's command (node-agent/coursevm/course-vm-session,
// in the overtime-agent package): a window manager, without which X honours nobody's
// full-screen request, then the player with SDL full screen; the session ends with the
// VM (docs/course-vms.md "The course VM as a session").
const SessionExec = "/usr/lib/overtime/course-vm-session"

// maxLabel bounds the session's name in the greeter's session list (one menu line).
const maxLabel = 60

// SessionLabel is the course VM's name in the greeter's session list: "Course VM: " and
// the image's description (else its name), transliterated to plain ASCII and one line.
func SessionLabel(im *model.Image) string {
	text := translit.ASCII(im.Description)
	if text == "" {
		text = im.Name
	}
	return translit.Cut("Course VM: "+text, maxLabel)
}

// sessionFiles are the course-VM session's X session entry and LightDM's default
// session. A desktop entry's value runs to the end of its line and '\' starts an
// escape: the label is printable ASCII (SessionLabel) without '\'.
func sessionFiles(c *CourseVM, host, pool string) []wire.SeatFile {
	var d bytes.Buffer
	header(&d, "#", host, pool, "schedule")
	fmt.Fprintf(&d, "# The course VM of mode %s (image %s), offered while the mode lasts.\n", c.Mode, c.Image.Name)
	d.WriteString("[Desktop Entry]\nType=Application\n")
	fmt.Fprintf(&d, "Name=%s\n", desktopValue(SessionLabel(c.Image)))
	d.WriteString("Comment=The lecture's course VM full screen; the session ends when the VM is shut down\n")
	fmt.Fprintf(&d, "Exec=%s\n", SessionExec)
	var l bytes.Buffer
	header(&l, "#", host, pool, "schedule")
	l.WriteString("# In a course slot the course VM is the session a student gets unless they pick another.\n")
	l.WriteString("[Seat:*]\nuser-session=overtime-course-vm\n")
	return []wire.SeatFile{
		{Path: wire.SeatCourseVMSession, Mode: 0o644, Content: d.Bytes()},
		{Path: wire.SeatDefaultSession, Mode: 0o644, Content: l.Bytes()},
	}
}

// desktopValue keeps a desktop entry's string value literal: '\' would start an escape
// (\n, \s), so it becomes '/' (names.Text refuses it in descriptions anyway).
func desktopValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\\' {
			b[i] = '/'
		}
	}
	return string(b)
}
