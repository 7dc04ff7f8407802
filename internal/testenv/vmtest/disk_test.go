package vmtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/bootsector"
)

// BIOSDisk's command line: the first disk is the boot device, no NIC or network boot is
// needed, and without a disk there is nothing to boot.
func TestBIOSDiskArgs(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "disk.raw")
	if err := os.WriteFile(disk, bootsector.Disk("x", 512), 0o644); err != nil {
		t.Fatal(err)
	}
	args, err := qemuArgs(Config{Dir: t.TempDir(), Firmware: BIOSDisk, Disks: []string{disk, disk}}, "tcg")
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(args, " ")
	if !strings.Contains(line, "virtio-blk-pci,drive=disk0,bootindex=1 ") || strings.Contains(line, "drive=disk1,bootindex") ||
		strings.Contains(line, "-boot n") || strings.Contains(line, "-kernel") {
		t.Errorf("BIOSDisk: %s", line)
	}
	if _, err := qemuArgs(Config{Dir: t.TempDir(), Firmware: BIOSDisk}, "tcg"); err == nil || !strings.Contains(err.Error(), "there is none") {
		t.Errorf("BIOSDisk without a disk: %v", err)
	}
	if BIOSDisk.String() != "bios-disk" {
		t.Errorf("String %q", BIOSDisk)
	}
}

// TestDiskBoot: SeaBIOS boots a raw disk's boot sector with no network: the sector's
// message arrives on the serial console.
func TestDiskBoot(t *testing.T) {
	t.Parallel()
	disk := filepath.Join(t.TempDir(), "disk.raw")
	if err := os.WriteFile(disk, bootsector.Disk("VMTEST-DISK-BOOTED\r\n", 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	vm := StartT(t, Config{Name: "disk", Firmware: BIOSDisk, Disks: []string{disk}, MemoryMB: 64})
	if _, err := vm.Console.Expect(regexp.MustCompile(`VMTEST-DISK-BOOTED`), 60*time.Second); err != nil {
		t.Fatal(err)
	}
}
