// Package vmimport turns a lecturer's VM into the artefacts of a course-VM version: one
// disk (qcow2 for QEMU, vmdk for VMware Player) and its description (images/vmspec,
// vm.json). It accepts a bare disk (qcow2, raw, vmdk, vdi, vhdx, vpc), an OVF descriptor
// with its disk files beside it, or an OVA (a tar of both). The format is what
// `qemu-img info` finds in the file, never what its name says, and a disk that reaches
// for other files (a backing file, an external data file, a VMware extent elsewhere) is
// refused before anything reads it: an image whose backing file is /etc/shadow must not
// turn into a course VM holding the importer's shadow file. The input is only read.
//
// `overtime image import` (cmd/overtime) runs Import, then uploads what it made.
package vmimport

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/overtime-hpc/overtime/images/vmspec"
)

// Options tune an import. The VM fields override what an OVF says (zero: keep it, or
// vmspec's default for a bare disk).
type Options struct {
	QemuImg  string // default "qemu-img"
	Compress bool   // qcow2 with compressed clusters (smaller upload, slower first reads)
	Backend  string // qemu (default) or vmware: the disk is then a vmdk for VMware Player
	// BootDiskOnly takes the first disk of an OVF with several; without it such an OVF
	// is refused (the other disks would be lost silently).
	BootDiskOnly bool
	Name         string
	OSType       string
	MemoryMB     int
	CPUs         int
	Firmware     string
	DiskBus      string
	Network      string
	// MaxInput bounds the bytes an OVA may unpack to (default 256 GiB).
	MaxInput int64
	Log      func(format string, a ...any)
}

// Result is what Import made in its work directory.
type Result struct {
	Dir   string    // the work directory: Disk and vmspec.File
	Disk  string    // artefact name of the disk
	VM    vmspec.VM // the description written to Dir/vm.json
	Files []string  // artefact names to upload: Disk, vm.json
}

// Error is a refusal of the input (as opposed to a failure of the machine doing the
// import): the message says what is wrong with the file and what to do.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func refuse(format string, a ...any) error { return &Error{Msg: fmt.Sprintf(format, a...)} }

// Formats qemu-img may find that Import accepts as a disk.
var diskFormats = map[string]bool{"qcow2": true, "raw": true, "vmdk": true, "vdi": true, "vhdx": true, "vpc": true}

// Import reads src and writes the course VM's artefacts into work (an empty directory
// the caller removes). src is never written.
func Import(ctx context.Context, src, work string, opt Options) (*Result, error) {
	if opt.QemuImg == "" {
		opt.QemuImg = "qemu-img"
	}
	if opt.MaxInput == 0 {
		opt.MaxInput = 256 << 30
	}
	if opt.Log == nil {
		opt.Log = func(string, ...any) {}
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, refuse("%s is not a regular file: give the disk image, the .ovf or the .ova", src)
	}
	head := make([]byte, 1024)
	f, err := os.Open(abs)
	if err != nil {
		return nil, err
	}
	n, _ := io.ReadFull(f, head)
	f.Close()
	head = head[:n]

	var vm vmspec.VM
	disk := abs
	switch {
	case isTar(head):
		dir := filepath.Join(work, "ova")
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, err
		}
		ovf, err := unpackOVA(abs, dir, opt.MaxInput)
		if err != nil {
			return nil, err
		}
		vm, disk, err = readOVF(ovf, opt)
		if err != nil {
			return nil, err
		}
		vm.Source = "ova"
	case isXML(head):
		vm, disk, err = readOVF(abs, opt)
		if err != nil {
			return nil, err
		}
		vm.Source = "ovf"
	}
	info, err := inspect(ctx, opt.QemuImg, disk)
	if err != nil {
		return nil, err
	}
	if vm.Source == "" {
		vm.Source = info.Format
		vm.Name = strings.TrimSuffix(filepath.Base(src), filepath.Ext(src))
	}
	opt.Log("%s: %s disk, %d bytes virtual", filepath.Base(disk), info.Format, info.VirtualSize)

	// Flags override the OVF.
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&vm.Name, opt.Name)
	set(&vm.OSType, opt.OSType)
	set(&vm.Firmware, opt.Firmware)
	set(&vm.DiskBus, opt.DiskBus)
	set(&vm.Network, opt.Network)
	set(&vm.Backend, opt.Backend)
	if opt.MemoryMB != 0 {
		vm.MemoryMB = opt.MemoryMB
	}
	if opt.CPUs != 0 {
		vm.CPUs = opt.CPUs
	}
	vm.Disk, vm.DiskFormat = "", ""
	vm = vm.WithDefaults()
	if err := vm.Validate(); err != nil {
		return nil, refuse("%v", err)
	}

	out := filepath.Join(work, vm.Disk)
	args := []string{"convert", "-f", info.Format, "-O", vm.DiskFormat}
	if vm.DiskFormat == vmspec.FormatQCOW2 && opt.Compress {
		args = append(args, "-c")
	}
	if vm.DiskFormat == vmspec.FormatVMDK {
		args = append(args, "-o", "subformat=monolithicSparse")
	}
	args = append(args, disk, out)
	opt.Log("converting to %s", vm.DiskFormat)
	if msg, err := exec.CommandContext(ctx, opt.QemuImg, args...).CombinedOutput(); err != nil {
		return nil, refuse("%s: qemu-img convert failed (is the file complete?): %s", filepath.Base(src), oneLine(msg, err))
	}
	if _, err := inspect(ctx, opt.QemuImg, out); err != nil {
		return nil, fmt.Errorf("converted disk: %w", err)
	}
	ofi, err := os.Stat(out)
	if err != nil {
		return nil, err
	}
	vm.DiskVirtualSize, vm.DiskBytes = info.VirtualSize, ofi.Size()
	doc, err := vm.Marshal()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(work, vmspec.File), doc, 0o644); err != nil {
		return nil, err
	}
	if vm.Source == "ova" {
		os.RemoveAll(filepath.Join(work, "ova"))
	}
	return &Result{Dir: work, Disk: vm.Disk, VM: vm, Files: []string{vm.Disk, vmspec.File}}, nil
}

func oneLine(msg []byte, err error) string {
	s := strings.Join(strings.Fields(string(msg)), " ")
	if s == "" {
		return err.Error()
	}
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

// isTar: the ustar magic of a POSIX tar header (an OVA).
func isTar(head []byte) bool {
	return len(head) >= 265 && bytes.HasPrefix(head[257:], []byte("ustar"))
}

// isXML: an XML document (an OVF descriptor), after an optional BOM and white space.
func isXML(head []byte) bool {
	t := bytes.TrimLeft(bytes.TrimPrefix(head, []byte("\xef\xbb\xbf")), " \t\r\n")
	return bytes.HasPrefix(t, []byte("<?xml")) || bytes.HasPrefix(t, []byte("<Envelope")) || bytes.HasPrefix(t, []byte("<ovf:Envelope"))
}

// DiskInfo is what qemu-img found in a disk.
type DiskInfo struct {
	Format      string
	VirtualSize int64
}

type qemuInfo struct {
	Format          string `json:"format"`
	VirtualSize     int64  `json:"virtual-size"`
	BackingFilename string `json:"backing-filename"`
	FullBacking     string `json:"full-backing-filename"`
	FormatSpecific  struct {
		Type string `json:"type"`
		Data struct {
			DataFile string `json:"data-file"`
			Corrupt  bool   `json:"corrupt"`
			Extents  []struct {
				Filename string `json:"filename"`
			} `json:"extents"`
		} `json:"data"`
	} `json:"format-specific"`
}

// inspect asks qemu-img what path is and refuses what Import must not convert: unknown
// formats, disks that name other files, damaged qcow2/vmdk/vdi/vhdx, a raw "disk" that
// has no boot sector.
func inspect(ctx context.Context, qemuImg, path string) (*DiskInfo, error) {
	name := filepath.Base(path)
	out, err := exec.CommandContext(ctx, qemuImg, "info", "--output=json", path).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, refuse("%s: not a disk image qemu-img can read: %s", name, oneLine(ee.Stderr, err))
		}
		return nil, fmt.Errorf("qemu-img: %w (install qemu-utils)", err)
	}
	var qi qemuInfo
	if err := json.Unmarshal(out, &qi); err != nil {
		return nil, fmt.Errorf("qemu-img info: %w", err)
	}
	if qi.BackingFilename != "" || qi.FullBacking != "" {
		return nil, refuse("%s: a %s disk with a backing file (%s) is refused: a course VM must be one self-contained disk; flatten it first with `qemu-img convert -O qcow2 %s flat.qcow2` where the backing file belongs to you", name, qi.Format, qi.BackingFilename, name)
	}
	if qi.FormatSpecific.Data.DataFile != "" {
		return nil, refuse("%s: a qcow2 disk with an external data file (%s) is refused: convert it to a self-contained qcow2 first", name, qi.FormatSpecific.Data.DataFile)
	}
	if !diskFormats[qi.Format] {
		return nil, refuse("%s: format %q is not a VM disk Overtime imports (qcow2, raw, vmdk, vdi, vhdx, vpc, or an OVF/OVA)", name, qi.Format)
	}
	for _, e := range qi.FormatSpecific.Data.Extents {
		p := e.Filename
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(path), p)
		}
		if filepath.Clean(p) != filepath.Clean(path) {
			return nil, refuse("%s: a VMware disk whose data lives in other files (%s) is refused: export the VM as an OVA, or convert the disk to one file (vmware-vdiskmanager -r %s -t 0 single.vmdk)", name, e.Filename, name)
		}
	}
	if qi.FormatSpecific.Data.Corrupt {
		return nil, refuse("%s: qemu-img marks the qcow2 image corrupt", name)
	}
	switch qi.Format {
	case "qcow2", "vmdk", "vdi", "vhdx":
		if out, err := exec.CommandContext(ctx, qemuImg, "check", "-f", qi.Format, path).CombinedOutput(); err != nil {
			var ee *exec.ExitError
			// Exit 3: leaked clusters only, harmless for a copy.
			if !errors.As(err, &ee) || ee.ExitCode() != 3 {
				return nil, refuse("%s: the %s image is damaged (qemu-img check: %s)", name, qi.Format, oneLine(out, err))
			}
		}
	case "raw":
		// qemu-img calls anything it does not recognise raw. A disk of a PC starts with
		// an MBR or a protective MBR (GPT): both end their first sector with 55 AA.
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		sec := make([]byte, 512)
		_, err = io.ReadFull(f, sec)
		f.Close()
		if err != nil || sec[510] != 0x55 || sec[511] != 0xaa {
			return nil, refuse("%s: not a disk image: qemu-img finds no known format, and as a raw disk it has no boot sector (MBR or GPT); export the VM as OVA, qcow2 or vmdk", name)
		}
	}
	if qi.VirtualSize <= 0 {
		return nil, refuse("%s: empty disk", name)
	}
	return &DiskInfo{Format: qi.Format, VirtualSize: qi.VirtualSize}, nil
}

// unpackOVA extracts an OVA's members into dir and returns the descriptor's path. Only
// plain file names and regular files are accepted (no paths, links or devices), at most
// max bytes in all; the descriptor is the first .ovf member (the OVF standard puts it
// first).
func unpackOVA(src, dir string, max int64) (string, error) {
	f, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var ovf string
	var total int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", refuse("%s: damaged OVA (tar): %v", filepath.Base(src), err)
		}
		name := h.Name
		if h.Typeflag == tar.TypeDir && !strings.Contains(strings.Trim(name, "/"), "/") {
			continue
		}
		if h.Typeflag != tar.TypeReg || name != filepath.Base(name) || name == "." || name == ".." || strings.HasPrefix(name, ".") {
			return "", refuse("%s: OVA member %q is not a plain file: an OVA holds only the descriptor, manifest and disks side by side", filepath.Base(src), name)
		}
		if total += h.Size; total > max {
			return "", refuse("%s: OVA unpacks to more than %d bytes", filepath.Base(src), max)
		}
		out, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			if os.IsExist(err) {
				return "", refuse("%s: OVA holds %s twice", filepath.Base(src), name)
			}
			return "", err
		}
		_, err = io.Copy(out, tr)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", refuse("%s: damaged OVA (member %s): %v", filepath.Base(src), name, err)
		}
		if ovf == "" && strings.EqualFold(filepath.Ext(name), ".ovf") {
			ovf = filepath.Join(dir, name)
		}
	}
	if ovf == "" {
		return "", refuse("%s: an OVA (tar) without an .ovf descriptor", filepath.Base(src))
	}
	return ovf, nil
}
