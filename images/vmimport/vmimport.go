// Package vmimport turns a lecturer's VM into the artefacts of a course-VM version: one
// disk (qcow2 for QEMU, vmdk for VMware Player) and its description (images/vmspec,
// vm.json). It accepts a bare disk (qcow2, raw, vmdk, vdi, vhdx, vpc), an OVF descriptor
// with its disk files beside it, or an OVA (a tar of both). The format is what
// the file's header says (images/diskcheck, confirmed by `qemu-img info`), never what its
// name says, and a disk that reaches for other files (a backing file, an external data
// file, a VMware extent elsewhere) is refused before anything reads it: an image whose backing file is /etc/shadow must not
// turn into a course VM holding the importer's shadow file. The input is only read.
//
// `overtime image import` (cmd/overtime) runs Import, then uploads what it made.
package vmimport

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/overtime-hpc/overtime/images/diskcheck"
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

// inspect asks images/diskcheck (the one check the site manager and the player make
// too) whether path is a self-contained disk of a format Import converts, and turns its
// refusal into Import's.
func inspect(ctx context.Context, qemuImg, path string) (*diskcheck.Info, error) {
	info, err := diskcheck.Inspect(ctx, path, diskcheck.Options{QemuImg: qemuImg, Formats: diskcheck.ImportFormats})
	var r *diskcheck.Refusal
	if errors.As(err, &r) {
		return nil, &Error{Msg: r.Error()}
	}
	return info, err
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
