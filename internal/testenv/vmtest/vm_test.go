package vmtest

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/images/testimage"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
)

// TestDirectBoot: a direct kernel boot of the test image's kernel and initrd into the
// initrd's shell (rdinit=/bin/sh): the console works both ways, the NIC has the configured
// MAC, gets a lease from the Net's dnsmasq over the tap, and Stop ends QEMU.
func TestDirectBoot(t *testing.T) {
	t.Parallel()
	im := testimage.Get(t)
	n := NewNet(t, NetConfig{Subnet: "10.78.0", DHCP: true})
	cfg := n.VMConfig(t, "direct")
	cfg.Kernel = im.Path(testimage.Kernel)
	cfg.Initrd = im.Path(testimage.Initrd)
	cfg.Append = "console=ttyS0 loglevel=1 rdinit=/bin/sh" // loglevel: no kernel lines amid command output
	vm := StartT(t, cfg)
	if vm.Accel != "kvm" && vm.Accel != "tcg" {
		t.Errorf("Accel = %q", vm.Accel)
	}
	if _, err := vm.Console.Expect(regexp.MustCompile(`built-in shell \(ash\)`), 120*time.Second); err != nil {
		t.Fatal(err)
	}
	out, err := vm.Console.Run("echo $((6*7))", 60*time.Second)
	if err != nil || strings.TrimSpace(out) != "42" {
		t.Fatalf("Run in the guest: %q, %v", out, err)
	}
	out, err = vm.Console.Run("mkdir -p /sys /proc /run && mount -t sysfs sysfs /sys && mount -t proc proc /proc && modprobe virtio_pci && modprobe virtio_net && cat /sys/class/net/eth0/address", 60*time.Second)
	if err != nil || strings.TrimSpace(out) != cfg.MAC {
		t.Fatalf("guest NIC address %q (%v), want %s", out, err, cfg.MAC)
	}
	out, err = vm.Console.Run("ipconfig -t 30 -c dhcp -d eth0", 90*time.Second)
	if err != nil || !regexp.MustCompile(`address: 10\.78\.0\.1\d\d`).MatchString(out) {
		t.Fatalf("DHCP in the guest: %v\n%s\ndnsmasq:\n%s", err, out, n.DHCPLog())
	}
	if !strings.Contains(n.Leases(), cfg.MAC) {
		t.Errorf("dnsmasq has no lease for %s:\n%s", cfg.MAC, n.Leases())
	}
	vm.Stop()
	select {
	case <-vm.Done():
	default:
		t.Error("Done not closed after Stop")
	}
	vm.Stop() // idempotent
}

// TestNetworkBoot: -boot n starts the iPXE option ROM (BIOS) or OVMF's network stack
// (UEFI), which asks the Net's dnsmasq for a PXE boot (DHCP vendor class PXEClient with
// the firmware's architecture: 0 BIOS, 7 x86-64 UEFI). BIOSPXE's iPXE asks as a plain PXE
// ROM: with the user class PXEClient, never iPXE.
func TestNetworkBoot(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		fw   Firmware
		arch string
	}{{BIOS, "00000"}, {UEFI, "00007"}, {BIOSPXE, "00000"}} {
		c := c
		t.Run(c.fw.String(), func(t *testing.T) {
			t.Parallel()
			n := NewNet(t, NetConfig{Subnet: "10.79.0", DHCP: true})
			cfg := n.VMConfig(t, "netboot-"+c.fw.String())
			cfg.Firmware = c.fw
			vm := StartT(t, cfg)
			want := regexp.MustCompile(`(?i)vendor class: PXEClient:Arch:` + c.arch)
			ok := poll.WaitEvery(180*time.Second, 250*time.Millisecond, func() bool {
				select {
				case <-vm.Done():
					return true
				default:
				}
				return strings.Contains(n.DHCPLog(), strings.ToLower(cfg.MAC)) && want.MatchString(n.DHCPLog())
			})
			if err := vm.Err(); err != nil {
				t.Fatalf("QEMU exited: %v", err)
			}
			if !ok {
				t.Fatalf("no PXE request (Arch:%s) from %s within the deadline; dnsmasq log:\n%s", c.arch, cfg.MAC, n.DHCPLog())
			}
			if c.fw != UEFI {
				// The firmware's console is on the serial port (etc/sercon-port).
				if _, err := vm.Console.Expect(regexp.MustCompile(`iPXE`), 60*time.Second); err != nil {
					t.Error(err)
				}
			}
			if log := n.DHCPLog(); c.fw == BIOSPXE && (!strings.Contains(log, "user class: PXEClient") || strings.Contains(log, "user class: iPXE")) {
				t.Errorf("BIOSPXE did not ask DHCP with the user class PXEClient alone; dnsmasq log:\n%s", log)
			}
		})
	}
}

// TestStartFailure: when QEMU cannot start the VM (here: the kernel file does not exist),
// Expect fails at once and quotes QEMU's own message.
func TestStartFailure(t *testing.T) {
	t.Parallel()
	vm := StartT(t, Config{Name: "no-kernel", Kernel: "/nonexistent/vmlinuz"})
	start := time.Now()
	_, err := vm.Console.Expect(regexp.MustCompile(`never printed`), 2*time.Minute)
	if err == nil || !strings.Contains(err.Error(), "console closed") || !strings.Contains(err.Error(), "/nonexistent/vmlinuz") {
		t.Fatalf("Expect on a VM that did not start: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %v to notice", d)
	}
}
