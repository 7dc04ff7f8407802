package render

import "github.com/overtime-hpc/overtime/vocab/model"

// Exam lockdown (Boot.Exam). A PC in an exam boots its scheduled mode and nothing else:
// the script a student's PC runs has no menu to pick another entry from, no local disk
// to fall back to (an installed system is a way out of the exam), no iPXE shell and no
// PXELINUX boot: prompt. When the mode cannot boot, the PC says so and tries again, so
// that a fix on the boot server (the image published, the server back) reaches it
// without anyone touching it.
//
// What the boot loader itself offers before it runs our script (iPXE's Ctrl-B banner,
// the firmware's boot menu and setup keys) is the loader build's and the firmware's, not
// the script's: docs/operations.md ("Exam mode") says what an administrator has to set.

// ExamKernelArg is on the kernel command line of an exam boot: the booted desktop reads
// it (docs/boot.md). It is fixed text; nothing of the exception's is rendered into it.
const ExamKernelArg = "overtime.exam=1"

// examRetrySeconds is how long an exam PC waits before asking the boot server again after
// a failure: long enough not to load a boot server a whole room is failing against, short
// enough that the exam starts soon after the fix.
const examRetrySeconds = 30

// syslinuxReboot is the module an exam PXELINUX configuration runs when its mode cannot
// be loaded: a reboot asks DHCP and the boot server again (served beside menu.c32).
const syslinuxReboot = "reboot.c32"

// writeIPXEExam writes an exam host's iPXE script after the header: the scheduled entry's
// commands without menu or choose. Every command that can fail (including a sleep the
// user cuts short with Ctrl-C) is followed by "||", because a failing command without
// one ends the script, and the firmware would then boot its next device.
func writeIPXEExam(w *writer, p *bootPlan) {
	e := &p.entries[0]
	switch {
	case e.localDisk:
		// The exam itself is on the local disk: boot it straight away.
		w.line("echo Overtime: %s mode %s (exam)", p.who, e.mode.Name)
		w.line("goto %s", labelLocalDisk)
	case e.missing != "":
		w.line("echo Overtime: %s mode %s (exam) unavailable: %s", p.who, e.mode.Name, ipxeText(e.missing))
		w.line("goto %s", labelFailed)
	default:
		w.line("echo Overtime: %s mode %s (exam)", p.who, e.mode.Name)
		if e.initrd != "" {
			w.line("kernel %s initrd=%s %s || goto %s", e.kernel, model.ImageInitrd, e.cmdline, labelFailed)
			w.line("initrd --name %s %s || goto %s", model.ImageInitrd, e.initrd, labelFailed)
		} else {
			w.line("kernel %s %s || goto %s", e.kernel, e.cmdline, labelFailed)
		}
		w.line("boot || goto %s", labelFailed)
	}
	w.line("")
	w.line(":%s", labelFailed)
	w.line("echo Overtime: %s cannot start exam mode %s now, asking the boot server again in %d seconds", p.who, e.mode.Name, examRetrySeconds)
	w.line("imgfree ||")
	w.line("sleep %d ||", examRetrySeconds)
	// The script is asked for anew, not re-run: the exam may have ended or the image been
	// fixed in the meantime. A chain that fails (server down, Ctrl-C) comes back here.
	w.line("chain --replace --autofree %s || goto %s", p.retryURL, labelFailed)
	w.line("goto %s", labelFailed)
	if e.localDisk {
		w.line("")
		writeIPXELocalBoot(w)
	}
}

// writePXELinuxExam writes an exam host's PXELINUX configuration after the header: no
// UI module (so no menu), PROMPT 0 and NOESCAPE 1 (no boot: prompt, not even with Shift
// or Alt held, where any kernel name could be typed), ALLOWOPTIONS 0 (no edited command
// line), and one LABEL, the default. A mode that cannot be loaded reboots the PC
// (ONERROR), never the local disk.
func writePXELinuxExam(w *writer, p *bootPlan) {
	e := &p.entries[0]
	w.comment("Exam: no menu, no boot: prompt (not even with Shift or Alt), no edited command line.")
	w.line("PROMPT 0")
	w.line("NOESCAPE 1")
	w.line("ALLOWOPTIONS 0")
	w.line("DEFAULT %s", e.label)
	if e.missing != "" {
		w.line("SAY Overtime: %s mode %s (exam) unavailable: %s", p.who, e.mode.Name, pxelinuxText(e.missing))
	} else {
		w.line("SAY Overtime: %s mode %s (exam)", p.who, e.mode.Name)
	}
	if !e.localDisk {
		w.comment("A kernel or initrd that cannot be loaded reboots the PC, which asks the boot server again.")
		w.line("ONERROR %s", syslinuxReboot)
	}
	w.line("")
	w.line("LABEL %s", e.label)
	switch {
	case e.localDisk:
		w.line("  LOCALBOOT 0")
	case e.missing != "":
		w.line("  COM32 %s", syslinuxReboot)
	default:
		w.line("  KERNEL %s", e.kernel)
		if e.initrd != "" {
			w.line("  INITRD %s", e.initrd)
		}
		w.line("  APPEND %s", e.cmdline)
	}
}
