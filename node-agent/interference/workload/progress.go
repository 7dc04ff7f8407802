package workload

import (
	"strconv"
	"strings"
)

// ProgressPrefix starts a progress line of a guest workload. The line protocol, written by
// RunGuest and read by the runners (node-agent/interference/guestrun) from a pipe, a
// container's console log or a VM's serial console:
//
//	overtime-work <cumulative work> <unit>\n
//
// The work is a decimal or exponent float (strconv 'g' format), cumulative since the
// workload started, so a lost or garbled line costs nothing but resolution; the unit is
// one word (flop, bytes). A line is written at once when the workload starts (work 0: the
// guest is up) and then every ProgressInterval.
const ProgressPrefix = "overtime-work "

// FormatProgress is one progress line, newline included.
func FormatProgress(work float64, unit string) string {
	return ProgressPrefix + strconv.FormatFloat(work, 'g', -1, 64) + " " + unit + "\n"
}

// ParseProgress reads a progress line. The prefix may appear anywhere in the line: on a
// serial console, kernel messages and carriage returns can precede it. ok is false for any
// other line (or a garbled one).
func ParseProgress(line string) (work float64, unit string, ok bool) {
	i := strings.Index(line, ProgressPrefix)
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(line[i+len(ProgressPrefix):])
	if len(f) != 2 {
		return 0, "", false
	}
	w, err := strconv.ParseFloat(f[0], 64)
	if err != nil || w < 0 {
		return 0, "", false
	}
	return w, f[1], true
}
