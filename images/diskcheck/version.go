package diskcheck

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/images/vmspec"
)

// maxVMJSON bounds the vm.json a version may carry (a real one is a few hundred bytes).
const maxVMJSON = 64 << 10

// CourseVMVersion decides whether the files staged in dir (names, without SHA256SUMS)
// may be published as a course-VM version: it is what the site manager asks before it
// publishes one, whoever uploaded it. A course-VM version is vm.json (images/vmspec) and
// disks: vm.json must parse and validate (as the player reads it), the disk it names
// must be among the files, have the format vm.json says and the size it says (when it
// says one), and every other file must be a self-contained disk of a course VM's format
// too (Inspect): nothing in a course VM's directory names another file. A refusal is a
// *Refusal naming the file; any other error is a failure of the machine checking.
// opt.Formats is ignored (CourseVMFormats).
func CourseVMVersion(ctx context.Context, dir string, files []string, opt Options) error {
	opt.Formats = CourseVMFormats
	if !slices.Contains(files, vmspec.File) {
		return refuse(vmspec.File, "missing: a course-VM version is %s and the disk it names (`overtime image import` makes both)", vmspec.File)
	}
	vm, err := readVM(filepath.Join(dir, vmspec.File))
	if err != nil {
		return err
	}
	if !slices.Contains(files, vm.Disk) {
		return refuse(vm.Disk, "%s names it as the disk, and it was not uploaded", vmspec.File)
	}
	// The disk vm.json names first: its refusal is the one that matters most.
	order := []string{vm.Disk}
	for _, f := range files {
		if f != vm.Disk && f != vmspec.File && f != artefact.SumsFile {
			order = append(order, f)
		}
	}
	for _, f := range order {
		p := filepath.Join(dir, f)
		info, err := Inspect(ctx, p, opt)
		if err != nil {
			return err
		}
		if f != vm.Disk {
			continue
		}
		if info.Format != vm.DiskFormat {
			return refuse(f, "a %s disk, and %s says diskFormat %s", info.Format, vmspec.File, vm.DiskFormat)
		}
		if vm.DiskBytes > 0 {
			fi, err := os.Stat(p)
			if err != nil {
				return err
			}
			if fi.Size() != vm.DiskBytes {
				return refuse(f, "%d bytes, and %s says diskBytes %d (the player would refuse it): upload the disk and vm.json of one import", fi.Size(), vmspec.File, vm.DiskBytes)
			}
		}
	}
	return nil
}

// readVM reads and validates a staged vm.json as the player will.
func readVM(path string) (vmspec.VM, error) {
	f, err := os.Open(path)
	if err != nil {
		return vmspec.VM{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxVMJSON+1))
	if err != nil {
		return vmspec.VM{}, err
	}
	if len(b) > maxVMJSON {
		return vmspec.VM{}, refuse(vmspec.File, "larger than %d bytes: not a course VM's description", maxVMJSON)
	}
	vm, err := vmspec.Parse(b)
	if err != nil {
		return vmspec.VM{}, refuse(vmspec.File, "%v", stripPrefix(err))
	}
	return vm, nil
}

// stripPrefix drops vmspec's "vm.json: " (the refusal names the file already).
func stripPrefix(err error) string {
	return strings.TrimPrefix(err.Error(), vmspec.File+": ")
}

// IsRefusal reports whether err is a refusal of the disk or version (not a failure of
// the machine checking it).
func IsRefusal(err error) bool {
	var r *Refusal
	return errors.As(err, &r)
}
