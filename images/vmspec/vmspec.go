// Package vmspec is the description of a course VM that travels with its disk: vm.json
// in the published version directory, listed in its SHA256SUMS (images/artefact).
// `overtime image import` writes it from the lecturer's VM (an OVF's name, OS type,
// memory, CPUs and firmware, or flags for a bare disk); the course-VM player on the pool
// PC (node-agent/coursevm) reads it to start the VM. It holds what the disk itself cannot
// say; how the PC shows the VM (full screen, which display) is the player's.
package vmspec

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/overtime-hpc/overtime/images/artefact"
)

// File is the name of the description in a version directory.
const File = "vm.json"

// Disk file names written by the import: a qcow2 disk for QEMU, a vmdk for VMware Player.
const (
	DiskFile      = "disk.qcow2"
	VMwareDisk    = "disk.vmdk"
	FormatQCOW2   = "qcow2"
	FormatVMDK    = "vmdk"
	BackendQEMU   = "qemu"
	BackendVMware = "vmware"
)

// Firmware, disk bus and network values.
const (
	FirmwareBIOS = "bios"
	FirmwareEFI  = "efi"
	BusSATA      = "sata"
	BusVirtio    = "virtio"
	BusIDE       = "ide"
	NetNAT       = "nat"
	NetNone      = "none"
)

// Limits a description must stay within (a pool PC caps memory and CPUs further).
const (
	MinMemoryMB = 64
	MaxMemoryMB = 1 << 20 // 1 TiB
	MaxCPUs     = 256
)

// VM describes one course VM.
type VM struct {
	Name     string `json:"name"`             // shown to people (the OVF's VirtualSystem name, or the image's)
	OSType   string `json:"osType,omitempty"` // OVF OperatingSystemSection: vmw:osType, else the CIM id (e.g. "debian10_64Guest", "cim:96")
	MemoryMB int    `json:"memoryMB"`
	CPUs     int    `json:"cpus"`
	Firmware string `json:"firmware"` // bios or efi
	// Backend is qemu (default) or vmware: VMware Player runs the VM only when the import
	// was asked for it (the OVF came from VMware and the lecturer wants it kept there) and
	// the PC has vmplayer; otherwise the player refuses with the reason.
	Backend string `json:"backend"`
	// Disk is the artefact holding the boot disk (DiskFile or VMwareDisk) in DiskFormat.
	Disk       string `json:"disk"`
	DiskFormat string `json:"diskFormat"`
	DiskBus    string `json:"diskBus"` // sata (default: every guest OS has AHCI drivers), virtio, ide
	// DiskVirtualSize is the disk's size as the guest sees it; DiskBytes the file's size,
	// checked by the player before it starts (a cheap test against a truncated copy; the
	// sha256 in SHA256SUMS is the full check).
	DiskVirtualSize int64  `json:"diskVirtualSize"`
	DiskBytes       int64  `json:"diskBytes"`
	Network         string `json:"network"`          // nat (QEMU user networking: outbound only) or none
	Source          string `json:"source,omitempty"` // what the lecturer brought: qcow2, raw, vmdk, ova, ovf, …
}

// WithDefaults fills unset fields.
func (v VM) WithDefaults() VM {
	if v.MemoryMB == 0 {
		v.MemoryMB = 2048
	}
	if v.CPUs == 0 {
		v.CPUs = 2
	}
	if v.Firmware == "" {
		v.Firmware = FirmwareBIOS
	}
	if v.Backend == "" {
		v.Backend = BackendQEMU
	}
	if v.DiskBus == "" {
		v.DiskBus = BusSATA
	}
	if v.Network == "" {
		v.Network = NetNAT
	}
	if v.Disk == "" {
		if v.Backend == BackendVMware {
			v.Disk, v.DiskFormat = VMwareDisk, FormatVMDK
		} else {
			v.Disk, v.DiskFormat = DiskFile, FormatQCOW2
		}
	}
	return v
}

// Validate checks a description (after WithDefaults); the player refuses one that fails.
func (v VM) Validate() error {
	if len(v.Name) > 200 || !utf8.ValidString(v.Name) || strings.ContainsFunc(v.Name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Errorf("vm.json: name %q must be one line of at most 200 bytes", v.Name)
	}
	if len(v.OSType) > 64 || strings.Trim(v.OSType, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-") != "" {
		return fmt.Errorf("vm.json: osType %q: at most 64 letters, digits, _ . : -", v.OSType)
	}
	if v.MemoryMB < MinMemoryMB || v.MemoryMB > MaxMemoryMB {
		return fmt.Errorf("vm.json: memoryMB %d out of range (%d-%d)", v.MemoryMB, MinMemoryMB, MaxMemoryMB)
	}
	if v.CPUs < 1 || v.CPUs > MaxCPUs {
		return fmt.Errorf("vm.json: cpus %d out of range (1-%d)", v.CPUs, MaxCPUs)
	}
	if v.Firmware != FirmwareBIOS && v.Firmware != FirmwareEFI {
		return fmt.Errorf("vm.json: firmware %q: bios or efi", v.Firmware)
	}
	switch {
	case v.Backend == BackendQEMU && v.DiskFormat == FormatQCOW2:
	case v.Backend == BackendVMware && v.DiskFormat == FormatVMDK:
	default:
		return fmt.Errorf("vm.json: backend %q with disk format %q: qemu runs qcow2, vmware runs vmdk", v.Backend, v.DiskFormat)
	}
	if err := artefact.ValidName(v.Disk); err != nil || v.Disk == File {
		return fmt.Errorf("vm.json: disk: %v", err)
	}
	if v.DiskBus != BusSATA && v.DiskBus != BusVirtio && v.DiskBus != BusIDE {
		return fmt.Errorf("vm.json: diskBus %q: sata, virtio or ide", v.DiskBus)
	}
	if v.Network != NetNAT && v.Network != NetNone {
		return fmt.Errorf("vm.json: network %q: nat or none", v.Network)
	}
	if v.DiskBytes < 0 || v.DiskVirtualSize < 0 {
		return fmt.Errorf("vm.json: negative disk size")
	}
	return nil
}

// Marshal is the vm.json document (indented, newline-terminated).
func (v VM) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	return append(b, '\n'), err
}

// Parse reads a vm.json document strictly (unknown fields are errors), fills defaults and
// validates it.
func Parse(data []byte) (VM, error) {
	var v VM
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return VM{}, fmt.Errorf("vm.json: %w", err)
	}
	v = v.WithDefaults()
	return v, v.Validate()
}

// Read reads dir/vm.json after checking it against dir/SHA256SUMS: the description is
// small, so it is always verified; the disk is checked by size (DiskBytes) by the caller,
// by sha256 only on request (it can be many GB on NFS).
func Read(dir string) (VM, error) {
	files, err := artefact.Read(dir)
	if err != nil {
		return VM{}, err
	}
	var want string
	for _, f := range files {
		if f.Name == File {
			want = f.SHA256
		}
	}
	if want == "" {
		return VM{}, fmt.Errorf("%s: %s does not list %s: not a course VM version", dir, artefact.SumsFile, File)
	}
	p := filepath.Join(dir, File)
	sum, _, err := artefact.Sum(p)
	if err != nil {
		return VM{}, err
	}
	if sum != want {
		return VM{}, fmt.Errorf("%s: %w: sha256 %s, %s says %s", p, artefact.ErrMismatch, sum, artefact.SumsFile, want)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return VM{}, err
	}
	return Parse(data)
}
