package vmimport

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/images/vmspec"
	"github.com/overtime-hpc/overtime/internal/testenv/bootsector"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

const msg = "OVERTIME-COURSE-VM\r\n"

func qemuImg(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img %v: %v\n%s", args, err, out)
	}
}

func write(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func sum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// rawDisk is a 1 MiB raw disk whose boot sector prints msg.
func rawDisk(t *testing.T, dir, name string) string {
	return write(t, filepath.Join(dir, name), bootsector.Disk(msg, 1<<20))
}

// ovfDoc is a minimal OVF 1.0 descriptor as VMware exports it: one VM, 2 CPUs, 1536 MiB,
// EFI firmware, the given disks.
func ovfDoc(name string, files map[string]int64, disks ...string) string {
	var refs, ds, items strings.Builder
	for i, d := range disks {
		size := ""
		if n, ok := files[d]; ok {
			size = fmt.Sprintf(` ovf:size="%d"`, n)
		}
		fmt.Fprintf(&refs, `<File ovf:href="%s" ovf:id="file%d"%s/>`, d, i+1, size)
		fmt.Fprintf(&ds, `<Disk ovf:capacity="1" ovf:capacityAllocationUnits="byte * 2^20" ovf:diskId="vmdisk%d" ovf:fileRef="file%d" ovf:format="http://www.vmware.com/interfaces/specifications/vmdk.html#streamOptimized"/>`, i+1, i+1)
		fmt.Fprintf(&items, `<Item><rasd:AddressOnParent>%d</rasd:AddressOnParent><rasd:ElementName>Hard Disk %d</rasd:ElementName><rasd:HostResource>ovf:/disk/vmdisk%d</rasd:HostResource><rasd:InstanceID>%d</rasd:InstanceID><rasd:ResourceType>17</rasd:ResourceType></Item>`, i, i+1, i+1, 10+i)
	}
	return `<?xml version="1.0" encoding="UTF-8"?>
<Envelope vmw:buildId="build-1" xmlns="http://schemas.dmtf.org/ovf/envelope/1" xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1" xmlns:rasd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData" xmlns:vmw="http://www.vmware.com/schema/ovf" xmlns:vssd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_VirtualSystemSettingData">
  <References>` + refs.String() + `</References>
  <DiskSection><Info>Virtual disk information</Info>` + ds.String() + `</DiskSection>
  <VirtualSystem ovf:id="` + name + `">
    <Info>A virtual machine</Info>
    <Name>` + name + `</Name>
    <OperatingSystemSection ovf:id="96" vmw:osType="debian11_64Guest"><Info>OS</Info><Description>Debian GNU/Linux 11 (64-bit)</Description></OperatingSystemSection>
    <VirtualHardwareSection>
      <Info>Virtual hardware requirements</Info>
      <System><vssd:VirtualSystemType>vmx-19</vssd:VirtualSystemType></System>
      <Item><rasd:AllocationUnits>hertz * 10^6</rasd:AllocationUnits><rasd:ElementName>2 virtual CPU(s)</rasd:ElementName><rasd:InstanceID>1</rasd:InstanceID><rasd:ResourceType>3</rasd:ResourceType><rasd:VirtualQuantity>2</rasd:VirtualQuantity></Item>
      <Item><rasd:AllocationUnits>byte * 2^20</rasd:AllocationUnits><rasd:ElementName>1536MB of memory</rasd:ElementName><rasd:InstanceID>2</rasd:InstanceID><rasd:ResourceType>4</rasd:ResourceType><rasd:VirtualQuantity>1536</rasd:VirtualQuantity></Item>
      ` + items.String() + `
      <vmw:Config ovf:required="false" vmw:key="firmware" vmw:value="efi"/>
    </VirtualHardwareSection>
  </VirtualSystem>
</Envelope>
`
}

// vmdkOf converts a raw disk to a streamOptimized vmdk (what OVF exports carry).
func vmdkOf(t *testing.T, raw, out string) int64 {
	qemuImg(t, "convert", "-f", "raw", "-O", "vmdk", "-o", "subformat=streamOptimized", raw, out)
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func makeOVA(t *testing.T, out string, members ...string) string {
	t.Helper()
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	for _, m := range members {
		name, path, _ := strings.Cut(m, "=")
		if path == "" {
			path = name
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: filepath.Base(name), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
			t.Fatal(err)
		}
		tw.Write(data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return out
}

// checkDisk: the converted disk is a self-contained qcow2 whose content is the boot
// sector's disk.
func checkDisk(t *testing.T, res *Result) {
	t.Helper()
	disk := filepath.Join(res.Dir, res.Disk)
	out, err := exec.Command("qemu-img", "info", "--output=json", disk).Output()
	if err != nil || !strings.Contains(string(out), `"format": "qcow2"`) || strings.Contains(string(out), "backing") {
		t.Fatalf("converted disk: %s %v", out, err)
	}
	back := filepath.Join(t.TempDir(), "back.raw")
	qemuImg(t, "convert", "-f", "qcow2", "-O", "raw", disk, back)
	b, _ := os.ReadFile(back)
	if len(b) != 1<<20 || !strings.Contains(string(b[:512]), msg) {
		t.Fatalf("converted disk does not hold the boot sector (%d bytes)", len(b))
	}
	doc, err := os.ReadFile(filepath.Join(res.Dir, vmspec.File))
	if err != nil {
		t.Fatal(err)
	}
	vm, err := vmspec.Parse(doc)
	if err != nil {
		t.Fatalf("vm.json: %v\n%s", err, doc)
	}
	fi, _ := os.Stat(disk)
	if vm.DiskBytes != fi.Size() || vm.DiskVirtualSize != 1<<20 || vm.Disk != vmspec.DiskFile {
		t.Errorf("vm.json disk fields: %+v (file %d bytes)", vm, fi.Size())
	}
}

func TestImportFormats(t *testing.T) {
	needs.Servers(t, "qemu-img")
	ctx := context.Background()
	src := t.TempDir()
	raw := rawDisk(t, src, "lab.raw")
	// The names lie on purpose: the format is what qemu-img finds.
	qcow := filepath.Join(src, "lab-qcow2.img")
	qemuImg(t, "convert", "-f", "raw", "-O", "qcow2", raw, qcow)
	vmdk := filepath.Join(src, "lab-vmdk.qcow2")
	vmdkOf(t, raw, vmdk)

	// OVF beside its disk, with a manifest.
	ovfDir := t.TempDir()
	disk1 := filepath.Join(ovfDir, "bio-disk1.vmdk")
	vmdkOf(t, raw, disk1)
	fi, _ := os.Stat(disk1)
	ovf := write(t, filepath.Join(ovfDir, "bio.ovf"), []byte(ovfDoc("BIO101 VM", map[string]int64{"bio-disk1.vmdk": fi.Size()}, "bio-disk1.vmdk")))
	write(t, filepath.Join(ovfDir, "bio.mf"), []byte("SHA256(bio-disk1.vmdk)= "+sum(t, disk1)+"\n"))
	ova := makeOVA(t, filepath.Join(t.TempDir(), "bio.ova"), ovf, filepath.Join(ovfDir, "bio.mf"), disk1)

	for _, c := range []struct {
		name, src, source string
		check             func(t *testing.T, vm vmspec.VM)
	}{
		{"raw", raw, "raw", func(t *testing.T, vm vmspec.VM) {
			if vm.Name != "lab" || vm.MemoryMB != 2048 || vm.CPUs != 2 || vm.Firmware != "bios" {
				t.Errorf("defaults: %+v", vm)
			}
		}},
		{"qcow2", qcow, "qcow2", nil},
		{"vmdk", vmdk, "vmdk", nil},
		{"ovf", ovf, "ovf", nil},
		{"ova", ova, "ova", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := sum(t, c.src)
			res, err := Import(ctx, c.src, t.TempDir(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.VM.Source != c.source {
				t.Errorf("source %q, want %q", res.VM.Source, c.source)
			}
			checkDisk(t, res)
			if c.source == "ovf" || c.source == "ova" {
				vm := res.VM
				if vm.Name != "BIO101 VM" || vm.OSType != "debian11_64Guest" || vm.MemoryMB != 1536 || vm.CPUs != 2 || vm.Firmware != "efi" {
					t.Errorf("from the OVF: %+v", vm)
				}
			}
			if c.check != nil {
				c.check(t, res.VM)
			}
			if sum(t, c.src) != before {
				t.Error("the input was changed")
			}
			if ents, _ := os.ReadDir(res.Dir); len(ents) != 2 {
				t.Errorf("work directory holds %d entries, want the disk and vm.json", len(ents))
			}
		})
	}

	t.Run("flags override", func(t *testing.T) {
		res, err := Import(ctx, ovf, t.TempDir(), Options{Name: "Bio", MemoryMB: 4096, CPUs: 4, Firmware: "bios", Compress: true})
		if err != nil {
			t.Fatal(err)
		}
		if vm := res.VM; vm.Name != "Bio" || vm.MemoryMB != 4096 || vm.CPUs != 4 || vm.Firmware != "bios" {
			t.Errorf("%+v", vm)
		}
		checkDisk(t, res)
	})
	t.Run("vmware backend", func(t *testing.T) {
		res, err := Import(ctx, ova, t.TempDir(), Options{Backend: vmspec.BackendVMware})
		if err != nil {
			t.Fatal(err)
		}
		if res.Disk != vmspec.VMwareDisk || res.VM.DiskFormat != "vmdk" {
			t.Errorf("%+v", res.VM)
		}
	})
}

// TestImportRefuses: what must not become a course VM is refused with a reason, and
// the input is left as it was.
func TestImportRefuses(t *testing.T) {
	needs.Servers(t, "qemu-img")
	ctx := context.Background()
	src := t.TempDir()
	raw := rawDisk(t, src, "good.raw")

	evil := filepath.Join(src, "evil.qcow2")
	qemuImg(t, "create", "-f", "qcow2", "-b", "/etc/shadow", "-F", "raw", evil, "1M")
	evilRel := filepath.Join(src, "evil-rel.qcow2")
	qemuImg(t, "create", "-f", "qcow2", "-b", "good.raw", "-F", "raw", evilRel, "1M")
	flat := write(t, filepath.Join(src, "flat.vmdk"), []byte("# Disk DescriptorFile\nversion=1\nCID=fffffffe\nparentCID=ffffffff\ncreateType=\"monolithicFlat\"\nRW 2048 FLAT \"/etc/hostname\" 0\n"))
	text := write(t, filepath.Join(src, "notes.qcow2"), []byte(strings.Repeat("not a disk\n", 100)))
	truncated := filepath.Join(src, "truncated.qcow2")
	qemuImg(t, "convert", "-f", "raw", "-O", "qcow2", raw, truncated)
	b, _ := os.ReadFile(truncated)
	write(t, truncated, b[:len(b)-70000])
	corruptHeader := filepath.Join(src, "badheader.qcow2")
	qemuImg(t, "convert", "-f", "raw", "-O", "qcow2", raw, corruptHeader)
	b, _ = os.ReadFile(corruptHeader)
	copy(b[40:48], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // l1 table offset
	write(t, corruptHeader, b)

	ovfDir := t.TempDir()
	disk1 := filepath.Join(ovfDir, "d1.vmdk")
	vmdkOf(t, raw, disk1)
	disk2 := filepath.Join(ovfDir, "d2.vmdk")
	vmdkOf(t, raw, disk2)
	fi, _ := os.Stat(disk1)
	missing := write(t, filepath.Join(ovfDir, "missing.ovf"), []byte(ovfDoc("m", nil, "nothere.vmdk")))
	broken := write(t, filepath.Join(ovfDir, "broken.ovf"), []byte(`<?xml version="1.0"?><Envelope><VirtualSystem><Name>x</Name>`))
	twoDisks := write(t, filepath.Join(ovfDir, "two.ovf"), []byte(ovfDoc("two", nil, "d1.vmdk", "d2.vmdk")))
	escape := write(t, filepath.Join(ovfDir, "escape.ovf"), []byte(ovfDoc("e", nil, "../../etc/shadow")))
	wrongSize := write(t, filepath.Join(ovfDir, "size.ovf"), []byte(ovfDoc("s", map[string]int64{"d1.vmdk": fi.Size() + 1}, "d1.vmdk")))
	badMF := write(t, filepath.Join(ovfDir, "badmf.ovf"), []byte(ovfDoc("b", nil, "d1.vmdk")))
	write(t, filepath.Join(ovfDir, "badmf.mf"), []byte("SHA256(d1.vmdk)= "+strings.Repeat("0", 64)+"\n"))
	noDisk := write(t, filepath.Join(ovfDir, "nodisk.ovf"), []byte(ovfDoc("n", nil)))
	slipOVA := filepath.Join(t.TempDir(), "slip.ova")
	{
		f, _ := os.Create(slipOVA)
		tw := tar.NewWriter(f)
		data := []byte(ovfDoc("x", nil, "d1.vmdk"))
		tw.WriteHeader(&tar.Header{Name: "x.ovf", Mode: 0o644, Size: int64(len(data)), Format: tar.FormatUSTAR})
		tw.Write(data)
		tw.WriteHeader(&tar.Header{Name: "../d1.vmdk", Mode: 0o644, Size: 3, Format: tar.FormatUSTAR})
		tw.Write([]byte("abc"))
		tw.Close()
		f.Close()
	}
	noOVF := makeOVA(t, filepath.Join(t.TempDir(), "noovf.ova"), disk1)

	for _, c := range []struct{ name, src, want string }{
		{"backing file /etc/shadow", evil, "backing file"},
		{"backing file beside it", evilRel, "backing file"},
		{"vmdk extent elsewhere", flat, "other files"},
		{"text file", text, "not a disk image"},
		{"truncated qcow2", truncated, "damaged"},
		{"corrupt qcow2 header", corruptHeader, ""},
		{"OVF with a missing disk", missing, "missing"},
		{"corrupt OVF", broken, "not a readable OVF"},
		{"OVF with two disks", twoDisks, "--boot-disk-only"},
		{"OVF disk outside its directory", escape, "plain file name"},
		{"OVF disk size differs", wrongSize, "incomplete"},
		{"OVF manifest mismatch", badMF, "manifest"},
		{"OVF without disk", noDisk, "no disk"},
		{"OVA member with a path", slipOVA, "not a plain file"},
		{"OVA without descriptor", noOVF, "without an .ovf"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := sum(t, c.src)
			work := t.TempDir()
			_, err := Import(ctx, c.src, work, Options{})
			var ie *Error
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Import = %v, want a refusal naming %q", err, c.want)
			}
			t.Logf("refused: %v", err)
			if sum(t, c.src) != before {
				t.Error("the input was changed")
			}
			if _, err := os.Stat(filepath.Join(work, vmspec.DiskFile)); err == nil {
				t.Error("a refused import left a disk")
			}
		})
	}
	t.Run("two disks, boot disk only", func(t *testing.T) {
		res, err := Import(ctx, twoDisks, t.TempDir(), Options{BootDiskOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		checkDisk(t, res)
	})
}
