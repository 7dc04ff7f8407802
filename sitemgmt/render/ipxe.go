package render

import (
	"io"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// IPXE renders the "#!ipxe" boot script for one host: a menu whose default is the
// scheduled mode and which boots it after b.Timeout, with the other entries selectable.
// Kernel and initrd come over HTTP. Whatever fails (an image with no published version,
// a kernel or initrd that cannot be fetched, a kernel that does not boot) ends in a local
// disk boot, never in another network boot: a PC that loops through PXE is a PC a student
// cannot use. Before booting, the script echoes "Overtime: HOST mode MODE" so a serial
// console log shows what was booted.
func IPXE(out io.Writer, b Boot) error {
	p, err := b.plan()
	if err != nil {
		return err
	}
	w := &writer{}
	w.line("#!ipxe")
	p.header(w)
	w.line("")
	if p.exam {
		writeIPXEExam(w, p)
		return w.flush(out)
	}

	w.line("menu %s", p.title())
	if p.reason != "" {
		// "--" ends the options, so the text after it is never taken for one.
		w.line("item --gap -- Scheduled by: %s", ipxeText(p.reason))
	}
	for i := range p.entries {
		e := &p.entries[i]
		w.line("item %s %s", e.label, e.text(ipxeText))
	}
	if p.localItem {
		w.line("item %s Boot the local disk", labelLocalDisk)
	}
	// Escape (choose fails) boots the default as well: nobody is at most pool PCs.
	w.line("choose --default %s --timeout %d target || goto %s", p.def, milliseconds(p.timeout), p.def)
	w.line("goto ${target}")

	for i := range p.entries {
		e := &p.entries[i]
		w.line("")
		w.line(":%s", e.label)
		switch {
		case e.localDisk:
			w.line("echo Overtime: %s mode %s", p.who, e.mode.Name)
			w.line("goto %s", labelLocalDisk)
		case e.missing != "":
			w.line("echo Overtime: %s mode %s unavailable: %s", p.who, e.mode.Name, ipxeText(e.missing))
			w.line("echo Overtime: booting the local disk instead")
			w.line("sleep 5")
			w.line("goto %s", labelLocalDisk)
		default:
			w.line("echo Overtime: %s mode %s", p.who, e.mode.Name)
			// The initrd is registered under a fixed name and named on the kernel command
			// line: the EFI stub of the kernel finds it that way when iPXE runs on UEFI;
			// BIOS kernels ignore the argument.
			if e.initrd != "" {
				w.line("kernel %s initrd=%s %s || goto %s", e.kernel, model.ImageInitrd, e.cmdline, labelFailed)
				w.line("initrd --name %s %s || goto %s", model.ImageInitrd, e.initrd, labelFailed)
			} else {
				w.line("kernel %s %s || goto %s", e.kernel, e.cmdline, labelFailed)
			}
			w.line("boot || goto %s", labelFailed)
		}
	}

	w.line("")
	w.line(":%s", labelFailed)
	w.line("echo Overtime: %s could not load or start the boot files, booting the local disk instead", p.who)
	w.line("imgfree")
	w.line("sleep 5")
	w.line("goto %s", labelLocalDisk)
	w.line("")
	writeIPXELocalBoot(w)
	return w.flush(out)
}

// writeIPXELocalBoot writes the local disk target. On UEFI, leaving iPXE hands control
// back to the firmware's boot manager, which continues with the next boot option (the
// local disk); on BIOS, sanboot of drive 0x80 boots the first hard disk directly. If that
// fails as well, exit is the last resort: the firmware tries its next device.
func writeIPXELocalBoot(w *writer) {
	w.line(":%s", labelLocalDisk)
	w.line("echo Overtime: booting the local disk")
	w.line("iseq ${platform} efi && exit 0 ||")
	w.line("sanboot --no-describe --drive 0x80 ||")
	w.line("exit 1")
}

// IPXEChain renders the small script served at GET /boot/ipxe, the DHCP boot file name of
// iPXE clients. DHCP cannot put the client's MAC into the file name, so this script asks
// again with the MAC in the path, which lets the boot server render the per-host menu.
// ${netX/mac} is the NIC iPXE last opened, i.e. the one that just booted over DHCP, which
// on PCs with several NICs need not be net0; iPXE prints it in the canonical lower-case
// colon form the directory uses.
func IPXEChain(out io.Writer, httpURL string) error {
	base, err := baseURL(httpURL)
	if err != nil {
		return err
	}
	w := &writer{}
	w.line("#!ipxe")
	w.comment(generated)
	w.comment("Served at /boot/ipxe to every iPXE client: chains to the per-MAC boot script.")
	w.line("")
	// --replace: the per-host script takes this one's place, so that when it gives up
	// (its local disk boot failed too) control returns to the firmware, not here, where
	// a failure looks like an unreachable boot server.
	w.line("chain --replace --autofree %s/boot/ipxe/${netX/mac} || goto %s", base, labelFailed)
	w.line("")
	w.line(":%s", labelFailed)
	w.line("echo Overtime: boot server %s unreachable, booting the local disk instead", base)
	w.line("sleep 5")
	w.line("goto %s", labelLocalDisk)
	w.line("")
	writeIPXELocalBoot(w)
	return w.flush(out)
}
