package render

import (
	"io"
)

// PXELinux renders the PXELINUX configuration that lpxelinux.0 fetches over HTTP as
// pxelinux.cfg/01-MAC (see Dnsmasq.Config: DHCP option 210 points lpxelinux at the boot
// server's HTTP base). It uses menu.c32: MENU DEFAULT marks the scheduled mode, which boots
// after TIMEOUT; kernel and initrd are full http:// URLs; local disk entries use
// LOCALBOOT 0. An entry whose image has no published version is shown disabled with the
// reason, and the default falls back to the local disk; a kernel or initrd that cannot be
// fetched runs ONERROR, which boots the local disk too, so a failure never loops back
// into the network boot.
func PXELinux(out io.Writer, b Boot) error {
	p, err := b.plan()
	if err != nil {
		return err
	}
	w := &writer{}
	p.header(w)
	w.line("")
	if p.exam {
		writePXELinuxExam(w, p)
		return w.flush(out)
	}
	w.line("UI menu.c32")
	w.line("MENU TITLE %s", p.title())
	w.comment("TIMEOUT counts tenths of a second; the default entry boots when it runs out.")
	w.line("TIMEOUT %d", deciseconds(p.timeout))
	w.comment("Nobody may edit a kernel command line at a shared pool PC (init=/bin/sh ...).")
	w.line("ALLOWOPTIONS 0")
	w.comment("A kernel or initrd that cannot be loaded falls back to the local disk.")
	w.line("ONERROR %s", labelLocalDisk)

	for i := range p.entries {
		e := &p.entries[i]
		w.line("")
		w.line("LABEL %s", e.label)
		w.line("  MENU LABEL %s", e.text(pxelinuxText))
		if e.label == p.def {
			w.line("  MENU DEFAULT")
		}
		switch {
		case e.localDisk:
			w.line("  LOCALBOOT 0")
		case e.missing != "":
			// Unselectable, and should it ever be started anyway it boots the local disk.
			w.line("  MENU DISABLE")
			w.line("  LOCALBOOT 0")
		default:
			w.line("  KERNEL %s", e.kernel)
			if e.initrd != "" {
				w.line("  INITRD %s", e.initrd)
			}
			w.line("  APPEND %s", e.cmdline)
		}
		if e.scheduled && p.reason != "" {
			// Shown while the entry is highlighted. The text is one reduced line that
			// starts with "Scheduled by:", so it can never be the ENDTEXT line.
			w.line("  TEXT HELP")
			w.line("Scheduled by: %s", pxelinuxText(p.reason))
			w.line("ENDTEXT")
		}
	}

	// The built-in local disk target always exists, for ONERROR; it is a visible item
	// only when no local-disk mode is in the menu.
	w.line("")
	w.line("LABEL %s", labelLocalDisk)
	w.line("  MENU LABEL Boot the local disk")
	if p.def == labelLocalDisk {
		w.line("  MENU DEFAULT")
	}
	if !p.localItem {
		w.line("  MENU HIDE")
	}
	w.line("  LOCALBOOT 0")
	return w.flush(out)
}
