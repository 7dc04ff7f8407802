// Package kvmprobe decides whether KVM really runs guests here, by running one: a 64 KiB
// firmware (probe.S) that enters long mode, loops and writes memory, then prints 'K' on
// the serial port. /dev/kvm can be present and openable on a machine where KVM guests
// die on their first MSR write (nested or restricted virtualisation); only a guest that
// ran tells. Used by the tests' VM harness (internal/testenv/vmtest) and by the node agent's
// libvirt backend to choose between KVM and TCG.
package kvmprobe

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// probeCode and probeReset are the assembled probe.S (see there for what it does and why):
// the code at the start of the 64 KiB image and the far jump at its reset vector.
var (
	probeCode = []byte{
		0xfa, 0x31, 0xc0, 0x8e, 0xd8, 0x8e, 0xc0, 0xbf, 0x00, 0x10, 0xb9, 0x00,
		0x0c, 0x66, 0x31, 0xc0, 0x66, 0xf3, 0xab, 0x66, 0xc7, 0x06, 0x00, 0x10,
		0x03, 0x20, 0x00, 0x00, 0x66, 0xc7, 0x06, 0x00, 0x20, 0x03, 0x30, 0x00,
		0x00, 0x66, 0xc7, 0x06, 0x00, 0x30, 0x83, 0x00, 0x00, 0x00, 0x66, 0xc7,
		0x06, 0x08, 0x30, 0x83, 0x00, 0x20, 0x00, 0x66, 0xc7, 0x06, 0x10, 0x30,
		0x83, 0x00, 0x40, 0x00, 0x66, 0xc7, 0x06, 0x18, 0x30, 0x83, 0x00, 0x60,
		0x00, 0x2e, 0x66, 0x0f, 0x01, 0x16, 0xd0, 0x00, 0x0f, 0x20, 0xe0, 0x66,
		0x83, 0xc8, 0x20, 0x0f, 0x22, 0xe0, 0x66, 0xb8, 0x00, 0x10, 0x00, 0x00,
		0x0f, 0x22, 0xd8, 0x66, 0xb9, 0x80, 0x00, 0x00, 0xc0, 0x0f, 0x32, 0x66,
		0x0d, 0x00, 0x01, 0x00, 0x00, 0x0f, 0x30, 0x0f, 0x20, 0xc0, 0x66, 0x0d,
		0x01, 0x00, 0x00, 0x80, 0x0f, 0x22, 0xc0, 0x66, 0xea, 0x87, 0x00, 0x0f,
		0x00, 0x08, 0x00, 0x66, 0xba, 0xf8, 0x03, 0xb0, 0x53, 0xee, 0xb9, 0x80,
		0x96, 0x98, 0x00, 0xff, 0xc9, 0x75, 0xfc, 0xb0, 0x43, 0xee, 0xbb, 0x01,
		0x00, 0x00, 0x00, 0x48, 0xc7, 0xc7, 0x00, 0x00, 0x10, 0x00, 0x48, 0xc7,
		0xc1, 0x00, 0x00, 0x08, 0x00, 0x48, 0x89, 0xd8, 0xf3, 0x48, 0xab, 0xff,
		0xcb, 0x75, 0xe8, 0xb0, 0x4b, 0xee, 0xf4, 0xeb, 0xfd, 0x8d, 0x74, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x9b, 0x20, 0x00, 0x0f, 0x00, 0xc0, 0x00, 0x0f,
	}
	probeReset = []byte{0xea, 0x00, 0x00, 0x00, 0xf0} // ljmp $0xf000, $start
)

// probeFirmware is the 64 KiB image for qemu -bios.
func probeFirmware() []byte {
	img := make([]byte, 64<<10)
	copy(img, probeCode)
	copy(img[0xfff0:], probeReset)
	return img
}

var (
	accelOnce   sync.Once
	accelName   string
	accelReason string
)

// QEMU is the emulator the probe runs.
var QEMU = "/usr/bin/qemu-system-x86_64"

// ProbeTimeout bounds one accelerator probe.
var ProbeTimeout = 5 * time.Second

// Accel returns the accelerator VMs use, "kvm" or "tcg", and why: KVM only when a probe
// guest ran under it (probed once per process).
func Accel() (name, reason string) {
	accelOnce.Do(func() {
		if err := ProbeAccel("kvm"); err != nil {
			accelName, accelReason = "tcg", "KVM does not run a guest here: "+err.Error()
		} else {
			accelName, accelReason = "kvm", "KVM ran the probe guest"
		}
	})
	return accelName, accelReason
}

// KVM reports whether the node agent's QEMU guests use KVM, and why (or why not): only
// when a probe guest really ran under it (/dev/kvm can be present on machines where KVM
// guests die at once). It is the libvirt backend's Options.ProbeKVM.
func KVM() (ok bool, reason string) {
	name, reason := Accel()
	return name == "kvm", reason
}

// ProbeAccel boots the probe firmware under accel and returns nil when it printed its 'K'
// (it got through long mode, a loop and memory writes) within ProbeTimeout.
func ProbeAccel(accel string) error {
	if accel == "kvm" {
		f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
		if err != nil {
			return err
		}
		f.Close()
	}
	dir, err := os.MkdirTemp("", "vmtest-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fw := filepath.Join(dir, "probe.bin")
	if err := os.WriteFile(fw, probeFirmware(), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(QEMU, "-machine", "q35", "-accel", accel, "-m", "16",
		"-nodefaults", "-no-user-config", "-display", "none", "-bios", fw,
		"-chardev", "stdio,id=con0,signal=off", "-serial", "chardev:con0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	got := make(chan error, 1)
	go func() {
		b := make([]byte, 1)
		for {
			if _, err := stdout.Read(b); err != nil {
				got <- fmt.Errorf("QEMU exited without output from the guest")
				return
			}
			if b[0] == 'K' {
				got <- nil
				return
			}
		}
	}()
	select {
	case err = <-got:
	case <-time.After(ProbeTimeout):
		err = fmt.Errorf("no output from the guest within %v", ProbeTimeout)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err != nil && stderr.Len() > 0 {
		err = fmt.Errorf("%v (%s)", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return err
}
