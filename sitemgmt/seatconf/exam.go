package seatconf

import (
	"bytes"

	"github.com/overtime-hpc/overtime/vocab/wire"
)

// examFiles lock the graphical seat for an exam, from the boot into it (an exam starts
// with a restart, so the files written at boot hold for the exam; the agent's
// exam-lockdown takes the kernel's and logind's keys, examfw the network):
//   - X: no switching to a text console (Ctrl-Alt-Fn: DontVTSwitch) and no killing the
//     X server (Ctrl-Alt-Backspace: DontZap), for the greeter and the session alike;
//   - LightDM: no user switching (Xfce's "Switch User" asks LightDM, which refuses; its
//     seats report CanSwitch=false) and no guest.
func examFiles(host, pool string) []wire.SeatFile {
	var x bytes.Buffer
	header(&x, "#", host, pool, "schedule (an exam)")
	x.WriteString("# An exam: no switching to a text console, no killing the X server.\n")
	x.WriteString("Section \"ServerFlags\"\n    Option \"DontVTSwitch\" \"true\"\n    Option \"DontZap\" \"true\"\nEndSection\n")
	var l bytes.Buffer
	header(&l, "#", host, pool, "schedule (an exam)")
	l.WriteString("# An exam: one person per seat, no switching to another user's session.\n")
	l.WriteString("[Seat:*]\nallow-user-switching=false\nallow-guest=false\n")
	return []wire.SeatFile{
		{Path: wire.SeatExamXorg, Mode: 0o644, Content: x.Bytes()},
		{Path: wire.SeatExamLightDM, Mode: 0o644, Content: l.Bytes()},
	}
}
