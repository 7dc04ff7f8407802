package vmware

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
)

// DiskMode is the only disk mode the backend generates: VMware keeps every write in a redo
// log in the working directory and discards it at power-off, so the base disk (read-only,
// from NFS) is never written. The seed paper's transient disk.
const DiskMode = "independent-nonpersistent"

// DefaultGuestOS is VMware's identifier for "Other Linux 64-bit". (VMware spells it
// otherlinux-64; "other-linux-64" is not a valid guestOS value.)
const DefaultGuestOS = "otherlinux-64"

// DefaultHWVersion is the virtual hardware version written when VMXOptions.HWVersion is 0:
// 14 is Workstation 14 / Player 14, old enough for every Workstation and Player still in use.
const DefaultHWVersion = 14

// MaxVCPUs is Workstation's and Player's limit of virtual CPUs per VM.
const MaxVCPUs = 32

// Files the backend keeps in Spec.StateDir.
const (
	ConsoleFile        = "console.log" // serial0 output (the guest's console)
	RawDescriptorFile  = "base.vmdk"   // VMDK descriptor wrapping a raw BaseImage
	NATNetworkingFile  = "vmnet8-networking.conf"
	NATConfFile        = "vmnet8-nat.conf"
	pausedMarkerFile   = "paused" // written by Freeze: vmrun list cannot tell paused from running
	vmwareLogFile      = "vmware.log"
	annotationSentinel = "Overtime compute guest; transient: discarded at power-off"
)

// VMXOptions are the host-side choices that are not in guest.Spec.
type VMXOptions struct {
	HWVersion int    // virtualHW.version; 0: DefaultHWVersion
	GuestOS   string // guestOS; "": DefaultGuestOS
	NIC       string // ethernet0.virtualDev: e1000 (the seed's, default), e1000e or vmxnet3
	// HostMHz is the clock of one host CPU in MHz, used to express Spec.CPULimit as
	// sched.cpu.max (VMware's limit is in MHz). 0: unknown, sched.cpu.max is left out and
	// only the cgroup's cpu.max limits the guest.
	HostMHz int
}

// KV is one line of a .vmx file: key = "value".
type KV struct{ Key, Value string }

// VMX is a .vmx file: ordered key/value pairs. Keys are case-insensitive to VMware.
type VMX []KV

// Get returns the value of key (case-insensitive) and whether it is present.
func (v VMX) Get(key string) (string, bool) {
	for _, kv := range v {
		if strings.EqualFold(kv.Key, key) {
			return kv.Value, true
		}
	}
	return "", false
}

var keyRE = regexp.MustCompile(`^\.?[A-Za-z][A-Za-z0-9_]*(?:[.:][A-Za-z0-9_]+)*$`)

// CheckValue reports whether s can be written as a .vmx value. The format quotes values in
// double quotes and has no escape for '"' or a line break ('|' starts VMware's own |XX hex
// escape), so a value containing '"', '|', a newline, a carriage return, NUL or any other
// control character is refused rather than escaped: nothing that reaches a value can end it
// and start another key.
func CheckValue(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("not valid UTF-8")
	}
	for _, r := range s {
		switch {
		case r == '"':
			return fmt.Errorf(`contains '"' (the .vmx format cannot quote it)`)
		case r == '|':
			return fmt.Errorf("contains '|' (VMware reads it as the start of a |XX escape)")
		case r == '\n' || r == '\r':
			return fmt.Errorf("contains a line break")
		case r == 0:
			return fmt.Errorf("contains NUL")
		case r < 0x20 || r == 0x7f:
			return fmt.Errorf("contains control character %U", r)
		}
	}
	return nil
}

// Encode writes the file: one `key = "value"` line per pair, nothing else. Every key and
// value is checked again here, so no caller can produce a file with injected lines.
func (v VMX) Encode() ([]byte, error) {
	var b bytes.Buffer
	seen := map[string]bool{}
	for _, kv := range v {
		if !keyRE.MatchString(kv.Key) {
			return nil, fmt.Errorf("vmware: invalid .vmx key %q", kv.Key)
		}
		lk := strings.ToLower(kv.Key)
		if seen[lk] {
			return nil, fmt.Errorf("vmware: duplicate .vmx key %q", kv.Key)
		}
		seen[lk] = true
		if err := CheckValue(kv.Value); err != nil {
			return nil, fmt.Errorf("vmware: .vmx value of %s %q: %v", kv.Key, kv.Value, err)
		}
		fmt.Fprintf(&b, "%s = \"%s\"\n", kv.Key, kv.Value)
	}
	return b.Bytes(), nil
}

// ParseVMX reads a .vmx file as VMware writes it: `key = "value"` lines, blank lines and
// '#' comments (VMware adds a "#!/usr/bin/vmware" line and its own keys when it powers a VM
// on). Values are returned as written (|XX escapes are not decoded; the backend never
// writes '|').
func ParseVMX(data []byte) (VMX, error) {
	var v VMX
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(strings.TrimSuffix(sc.Text(), "\r"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, rest, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("vmx line %d: no '=' in %q", n, line)
		}
		key, rest = strings.TrimSpace(key), strings.TrimSpace(rest)
		if !keyRE.MatchString(key) {
			return nil, fmt.Errorf("vmx line %d: invalid key %q", n, key)
		}
		if len(rest) < 2 || rest[0] != '"' || rest[len(rest)-1] != '"' || strings.Count(rest, `"`) != 2 {
			return nil, fmt.Errorf("vmx line %d: value of %s is not one double-quoted string: %s", n, key, rest)
		}
		v = append(v, KV{key, rest[1 : len(rest)-1]})
	}
	return v, sc.Err()
}

// guestOSRE: a VMware guestOS identifier such as "otherlinux-64" (guest names and
// interfaces use the alphabets of package names).
var guestOSRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

// nics VMware Workstation and Player emulate that a Linux guest drives out of the box.
var nics = map[string]bool{"e1000": true, "e1000e": true, "vmxnet3": true}

// VMwareMAC turns the agent's guest MAC into one VMware accepts for addressType "static":
// VMware only allows 00:50:56:00:00:00-00:50:56:3F:FF:FF (its OUI; 0x40-0xFF in the fourth
// octet belong to generated addresses), and refuses to power on with any other static
// address. An address already in that range is kept; any other (such as the agent's locally
// administered 52:54:00:xx:yy:zz) keeps its low 22 bits: 00:50:56:(xx & 0x3f):yy:zz. Two
// guests whose MACs agree in those 22 bits would collide, which cannot happen between the
// agent's MACs that differ only in their last three octets below 0x40 in the fourth; the
// site manager must use this same function for the guest's DHCP reservation.
func VMwareMAC(mac string) (string, error) {
	norm, err := names.MAC(mac)
	if err != nil {
		return "", fmt.Errorf("vmware: %v", err)
	}
	hw, _ := net.ParseMAC(norm)
	out := net.HardwareAddr{0x00, 0x50, 0x56, hw[3] & 0x3f, hw[4], hw[5]}
	return out.String(), nil
}

// diskFile is the .vmdk the VM attaches: the base itself when it is a VMDK, or the
// descriptor the backend writes into StateDir around a raw base.
func diskFile(s guest.Spec) (string, error) {
	format := s.BaseFormat
	if format == "" && strings.HasSuffix(strings.ToLower(s.BaseImage), ".vmdk") {
		format = "vmdk"
	}
	switch format {
	case "vmdk":
		return s.BaseImage, nil
	case "raw":
		return filepath.Join(s.StateDir, RawDescriptorFile), nil
	case "":
		return "", fmt.Errorf("vmware: base format not set for %s (vmdk or raw)", s.BaseImage)
	default:
		return "", fmt.Errorf("vmware: base format %q cannot be attached by VMware: use a VMDK or a raw disk image (qemu-img convert -O vmdk or -O raw)", format)
	}
}

// CheckSpec validates a spec for this backend without touching the host.
func CheckSpec(s guest.Spec) error {
	if names.Hostname(s.Name) != nil {
		return fmt.Errorf("vmware: invalid guest name %q: use 1-63 characters a-z 0-9 -", s.Name)
	}
	if s.VCPUs < 1 || s.VCPUs > MaxVCPUs {
		return fmt.Errorf("vmware: vcpus %d out of range (1-%d, Workstation's limit)", s.VCPUs, MaxVCPUs)
	}
	if s.MemoryMB < 16 {
		return fmt.Errorf("vmware: memory %d MB below 16 MB", s.MemoryMB)
	}
	if s.Kernel != "" || s.Initrd != "" || s.Cmdline != "" {
		return fmt.Errorf("vmware: VMware cannot boot a kernel directly (Spec.Kernel/Initrd/Cmdline): BaseImage must be a bootable disk")
	}
	for _, p := range []struct{ what, path string }{{"base image", s.BaseImage}, {"state directory", s.StateDir}} {
		if p.path == "" || !filepath.IsAbs(p.path) || filepath.Clean(p.path) != p.path {
			return fmt.Errorf("vmware: %s %q must be a clean absolute path", p.what, p.path)
		}
		if err := CheckValue(p.path); err != nil {
			return fmt.Errorf("vmware: %s %q: %v", p.what, p.path, err)
		}
	}
	if _, err := diskFile(s); err != nil {
		return err
	}
	switch s.Network {
	case model.NetBridged:
		if names.Interface(s.Bridge) != nil {
			return fmt.Errorf("vmware: bridged network needs a host interface name, got %q", s.Bridge)
		}
	case model.NetNAT:
	case model.NetNone:
		// no NIC: Spec.MAC, if set, is not used
	default:
		return fmt.Errorf("vmware: unknown network %q (bridged, nat or none)", s.Network)
	}
	if len(s.Ports) > 0 && s.Network != model.NetNAT {
		return fmt.Errorf("vmware: port forwards need network nat")
	}
	for _, p := range s.Ports {
		if p.HostPort < 1 || p.HostPort > 65535 || p.GuestPort < 1 || p.GuestPort > 65535 {
			return fmt.Errorf("vmware: port forward %d:%d out of range", p.HostPort, p.GuestPort)
		}
	}
	if s.Network != model.NetNone {
		if s.MAC == "" {
			return fmt.Errorf("vmware: guest MAC not set")
		}
		if _, err := VMwareMAC(s.MAC); err != nil {
			return err
		}
	}
	if s.CPULimit < 0 || math.IsNaN(s.CPULimit) || math.IsInf(s.CPULimit, 0) {
		return fmt.Errorf("vmware: invalid CPU limit %g", s.CPULimit)
	}
	return nil
}

// VMXFor builds the .vmx of a guest. It fails (and nothing is written) if the spec does not
// fit VMware or a value could break the file format.
func VMXFor(s guest.Spec, o VMXOptions) (VMX, error) {
	if err := CheckSpec(s); err != nil {
		return nil, err
	}
	hw := o.HWVersion
	if hw == 0 {
		hw = DefaultHWVersion
	}
	if hw < 4 || hw > 99 {
		return nil, fmt.Errorf("vmware: virtual hardware version %d out of range", hw)
	}
	guestOS := o.GuestOS
	if guestOS == "" {
		guestOS = DefaultGuestOS
	}
	if !guestOSRE.MatchString(guestOS) {
		return nil, fmt.Errorf("vmware: invalid guestOS %q", guestOS)
	}
	nic := o.NIC
	if nic == "" {
		nic = "e1000"
	}
	if !nics[nic] {
		return nil, fmt.Errorf("vmware: unknown NIC %q (e1000, e1000e or vmxnet3)", nic)
	}
	disk, _ := diskFile(s)
	// VMware wants memsize in multiples of 4 MB; round down (at most 3 MB less).
	mem := s.MemoryMB / 4 * 4

	v := VMX{
		{".encoding", "UTF-8"},
		{"config.version", "8"},
		{"virtualHW.version", strconv.Itoa(hw)},
		{"displayName", s.Name},
		{"annotation", annotationSentinel},
		{"guestinfo.overtime.name", s.Name},
		{"guestOS", guestOS},
		{"numvcpus", strconv.Itoa(s.VCPUs)},
		{"memsize", strconv.Itoa(mem)},
		// The seed's settings: no memory trimming, guest memory not backed by a named
		// .vmem file (it would land in the tmpfs state directory and count twice).
		{"MemTrimRate", "0"},
		{"mainMem.useNamedFile", "FALSE"},
		// Redo logs, logs and lock files live in the tmpfs state directory.
		{"workingDir", s.StateDir},
		// Headless: any question VMware would ask at power-on is answered with its default
		// instead of blocking `vmrun start ... nogui`.
		{"msg.autoAnswer", "TRUE"},
		{"uuid.action", "create"},
		{"scsi0.present", "TRUE"},
		{"scsi0.virtualDev", "lsilogic"},
		{"scsi0:0.present", "TRUE"},
		{"scsi0:0.deviceType", "scsi-hardDisk"},
		{"scsi0:0.fileName", disk},
		{"scsi0:0.mode", DiskMode},
	}
	if s.Network == model.NetNone {
		v = append(v, KV{"ethernet0.present", "FALSE"})
	} else {
		mac, _ := VMwareMAC(s.MAC)
		conn := "bridged" // vmnet0: bridged to the host interface vmnet0 is mapped to
		if s.Network == model.NetNAT {
			conn = "nat" // vmnet8: vmnet-natd, port forwards in the host's vmnet8 config
		}
		v = append(v,
			KV{"ethernet0.present", "TRUE"},
			KV{"ethernet0.virtualDev", nic},
			KV{"ethernet0.connectionType", conn},
			KV{"ethernet0.addressType", "static"},
			KV{"ethernet0.address", mac},
			KV{"ethernet0.startConnected", "TRUE"},
			KV{"ethernet0.allowGuestConnectionControl", "FALSE"},
			KV{"ethernet0.wakeOnPcktRcv", "FALSE"},
		)
	}
	v = append(v,
		KV{"serial0.present", "TRUE"},
		KV{"serial0.fileType", "file"},
		KV{"serial0.fileName", filepath.Join(s.StateDir, ConsoleFile)},
		KV{"serial0.yieldOnMsrRead", "TRUE"},
		// Isolation: the guest never sees the desktop user's files, clipboard or devices.
		KV{"isolation.tools.hgfs.disable", "TRUE"},
		KV{"sharedFolder.maxNum", "0"},
		KV{"isolation.tools.copy.disable", "TRUE"},
		KV{"isolation.tools.paste.disable", "TRUE"},
		KV{"isolation.tools.dnd.disable", "TRUE"},
		KV{"isolation.tools.setGUIOptions.enable", "FALSE"},
		KV{"isolation.tools.unity.disable", "TRUE"},
		KV{"isolation.device.connectable.disable", "TRUE"},
		KV{"isolation.device.edit.disable", "TRUE"},
		KV{"RemoteDisplay.vnc.enabled", "FALSE"},
		KV{"usb.present", "FALSE"},
		KV{"sound.present", "FALSE"},
		KV{"floppy0.present", "FALSE"},
		// CPU: VMware's own knobs (honoured by ESXi; Workstation/Player may ignore them —
		// the vmware-vmx process's cgroup is what actually limits the guest).
		KV{"sched.cpu.shares", "low"},
	)
	if s.CPULimit > 0 && o.HostMHz > 0 {
		mhz := int(math.Ceil(s.CPULimit * float64(o.HostMHz)))
		v = append(v, KV{"sched.cpu.max", strconv.Itoa(max(mhz, 1))})
	}
	return v, nil
}

// GenerateVMX is VMXFor followed by Encode.
func GenerateVMX(s guest.Spec, o VMXOptions) ([]byte, error) {
	v, err := VMXFor(s, o)
	if err != nil {
		return nil, err
	}
	return v.Encode()
}

// RawDescriptor is a VMDK descriptor (createType monolithicFlat) that lets VMware attach a
// raw disk image of size bytes as one FLAT extent, unchanged. With the disk in
// independent-nonpersistent mode VMware only reads the extent.
func RawDescriptor(rawPath string, size int64) ([]byte, error) {
	if err := CheckValue(rawPath); err != nil {
		return nil, fmt.Errorf("vmware: raw image path %q: %v", rawPath, err)
	}
	if !filepath.IsAbs(rawPath) {
		return nil, fmt.Errorf("vmware: raw image path %q is not absolute", rawPath)
	}
	if size <= 0 || size%512 != 0 {
		return nil, fmt.Errorf("vmware: raw image %s is %d bytes, not a positive multiple of 512", rawPath, size)
	}
	sectors := size / 512
	cyl := min(sectors/(16*63), 16383)
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Disk DescriptorFile\nversion=1\nCID=fffffffe\nparentCID=ffffffff\ncreateType=\"monolithicFlat\"\n\n")
	fmt.Fprintf(&b, "# Extent description\nRW %d FLAT \"%s\" 0\n\n", sectors, rawPath)
	fmt.Fprintf(&b, "# The Disk Data Base\n#DDB\n\nddb.virtualHWVersion = \"4\"\nddb.adapterType = \"lsilogic\"\n")
	fmt.Fprintf(&b, "ddb.geometry.cylinders = \"%d\"\nddb.geometry.heads = \"16\"\nddb.geometry.sectors = \"63\"\n", cyl)
	return b.Bytes(), nil
}
