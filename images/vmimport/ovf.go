package vmimport

import (
	"bufio"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/xml"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/overtime-hpc/overtime/images/vmspec"
)

// The parts of an OVF descriptor (DMTF DSP0243, 1.x and 2.x) a course VM needs. Elements
// and attributes are matched by local name, whatever namespace prefix the exporting tool
// (VMware, VirtualBox, virt-v2v) used.
type ovfEnvelope struct {
	XMLName    xml.Name   `xml:"Envelope"`
	Files      []ovfFile  `xml:"References>File"`
	Disks      []ovfDisk  `xml:"DiskSection>Disk"`
	Systems    []ovfVS    `xml:"VirtualSystem"`
	Collection []struct{} `xml:"VirtualSystemCollection"`
}

type ovfFile struct {
	ID          string `xml:"id,attr"`
	Href        string `xml:"href,attr"`
	Size        string `xml:"size,attr"`
	Compression string `xml:"compression,attr"`
	ChunkSize   string `xml:"chunkSize,attr"`
}

type ovfDisk struct {
	ID      string `xml:"diskId,attr"`
	FileRef string `xml:"fileRef,attr"`
	Format  string `xml:"format,attr"`
}

type ovfVS struct {
	ID   string `xml:"id,attr"`
	Name string `xml:"Name"`
	OS   struct {
		ID          string `xml:"id,attr"`
		OSType      string `xml:"osType,attr"` // vmw:osType
		Description string `xml:"Description"`
	} `xml:"OperatingSystemSection"`
	Hardware struct {
		Items        []ovfItem `xml:"Item"`
		StorageItems []ovfItem `xml:"StorageItem"` // OVF 2.0 (VirtualBox)
		Configs      []struct {
			Key   string `xml:"key,attr"`
			Value string `xml:"value,attr"`
		} `xml:"Config"`
	} `xml:"VirtualHardwareSection"`
	VBoxMachine struct {
		OSType string `xml:"OSType,attr"`
	} `xml:"Machine"`
}

type ovfItem struct {
	ResourceType    string `xml:"ResourceType"`
	VirtualQuantity string `xml:"VirtualQuantity"`
	AllocationUnits string `xml:"AllocationUnits"`
	HostResource    string `xml:"HostResource"`
}

// readOVF parses the descriptor at path and finds its boot disk beside it: the VM's
// description and the disk file's path.
func readOVF(path string, opt Options) (vmspec.VM, string, error) {
	name := filepath.Base(path)
	data, err := os.ReadFile(path)
	if err != nil {
		return vmspec.VM{}, "", err
	}
	if len(data) > 16<<20 {
		return vmspec.VM{}, "", refuse("%s: an OVF descriptor of %d bytes is not plausible", name, len(data))
	}
	var env ovfEnvelope
	if err := xml.Unmarshal(data, &env); err != nil {
		return vmspec.VM{}, "", refuse("%s: not a readable OVF descriptor: %v", name, err)
	}
	if len(env.Collection) > 0 || len(env.Systems) > 1 {
		return vmspec.VM{}, "", refuse("%s: describes several virtual systems; a course VM is one VM: export that VM alone", name)
	}
	if len(env.Systems) == 0 {
		return vmspec.VM{}, "", refuse("%s: no VirtualSystem in the OVF descriptor", name)
	}
	vs := env.Systems[0]
	vm := vmspec.VM{Name: strings.TrimSpace(vs.Name)}
	if vm.Name == "" {
		vm.Name = vs.ID
	}
	switch {
	case vs.OS.OSType != "":
		vm.OSType = vs.OS.OSType
	case vs.VBoxMachine.OSType != "":
		vm.OSType = vs.VBoxMachine.OSType
	case vs.OS.ID != "":
		vm.OSType = "cim:" + vs.OS.ID
	}
	var diskRefs []string
	for _, it := range append(append([]ovfItem(nil), vs.Hardware.Items...), vs.Hardware.StorageItems...) {
		q := strings.TrimSpace(it.VirtualQuantity)
		switch strings.TrimSpace(it.ResourceType) {
		case "3": // processor
			if n, err := strconv.Atoi(q); err == nil {
				vm.CPUs = n
			}
		case "4": // memory
			if mb, ok := memoryMB(q, it.AllocationUnits); ok {
				vm.MemoryMB = mb
			} else {
				return vmspec.VM{}, "", refuse("%s: memory %q in units %q is not understood", name, q, it.AllocationUnits)
			}
		case "17": // disk drive
			diskRefs = append(diskRefs, strings.TrimSpace(it.HostResource))
		}
	}
	for _, c := range vs.Hardware.Configs {
		if c.Key == "firmware" && c.Value == "efi" {
			vm.Firmware = vmspec.FirmwareEFI
		}
	}
	// The disks in hardware order (the first is what the BIOS boots), else the
	// DiskSection's order.
	var disks []ovfDisk
	byID := map[string]ovfDisk{}
	for _, d := range env.Disks {
		byID[d.ID] = d
	}
	for _, ref := range diskRefs {
		id := ref[strings.LastIndex(ref, "/")+1:]
		if d, ok := byID[id]; ok {
			disks = append(disks, d)
		} else if !strings.Contains(ref, "/file/") { // a CD image is not a disk
			return vmspec.VM{}, "", refuse("%s: disk drive %q names no disk of the DiskSection", name, ref)
		}
	}
	if len(diskRefs) == 0 {
		disks = env.Disks
	}
	switch {
	case len(disks) == 0:
		return vmspec.VM{}, "", refuse("%s: the VM has no disk", name)
	case len(disks) > 1 && !opt.BootDiskOnly:
		var ids []string
		for _, d := range disks {
			ids = append(ids, d.ID)
		}
		return vmspec.VM{}, "", refuse("%s: the VM has %d disks (%s); a course VM has one: merge them in the VM, or import only the first (boot) disk with --boot-disk-only", name, len(disks), strings.Join(ids, ", "))
	}
	boot := disks[0]
	var file *ovfFile
	for i := range env.Files {
		if env.Files[i].ID == boot.FileRef {
			file = &env.Files[i]
		}
	}
	if file == nil {
		return vmspec.VM{}, "", refuse("%s: disk %s refers to file %q, which References does not list (an empty disk cannot boot)", name, boot.ID, boot.FileRef)
	}
	href := file.Href
	if href == "" || href != filepath.Base(href) || strings.Contains(href, ":") || strings.HasPrefix(href, ".") {
		return vmspec.VM{}, "", refuse("%s: disk file %q must be a plain file name beside the descriptor", name, href)
	}
	if file.Compression != "" && file.Compression != "identity" {
		return vmspec.VM{}, "", refuse("%s: disk file %s is %s-compressed; export the VM without compression", name, href, file.Compression)
	}
	if file.ChunkSize != "" {
		return vmspec.VM{}, "", refuse("%s: disk file %s is split into chunks; export the VM without chunking", name, href)
	}
	disk := filepath.Join(filepath.Dir(path), href)
	fi, err := os.Lstat(disk)
	if err != nil {
		return vmspec.VM{}, "", refuse("%s: its disk %s is missing: copy it beside the descriptor, or import the .ova", name, href)
	}
	if !fi.Mode().IsRegular() {
		return vmspec.VM{}, "", refuse("%s: its disk %s is not a regular file", name, href)
	}
	if file.Size != "" {
		if want, err := strconv.ParseInt(file.Size, 10, 64); err == nil && want != fi.Size() {
			return vmspec.VM{}, "", refuse("%s: disk %s has %d bytes, the descriptor says %d: the copy is incomplete or altered", name, href, fi.Size(), want)
		}
	}
	if err := checkManifest(path, href); err != nil {
		return vmspec.VM{}, "", err
	}
	return vm, disk, nil
}

// memoryMB converts an OVF memory quantity in allocation units to MiB.
func memoryMB(q, units string) (int, bool) {
	n, err := strconv.ParseInt(q, 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	u := strings.ToLower(strings.ReplaceAll(units, " ", ""))
	switch u {
	case "", "byte*2^20", "megabytes", "mb":
		return int(n), true
	case "byte*2^30", "gigabytes", "gb":
		return int(n * 1024), true
	case "byte*2^10", "kilobytes", "kb":
		return int(n / 1024), true
	case "byte", "bytes":
		return int(n >> 20), true
	}
	return 0, false
}

// checkManifest verifies the disk against the OVF manifest (NAME.mf beside the
// descriptor, "SHA256(file)= hex" lines) when there is one.
func checkManifest(ovf, href string) error {
	mf := strings.TrimSuffix(ovf, filepath.Ext(ovf)) + ".mf"
	f, err := os.Open(mf)
	if err != nil {
		return nil // no manifest: nothing to check against
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		alg, rest, ok := strings.Cut(line, "(")
		if !ok {
			continue
		}
		file, sum, ok := strings.Cut(rest, ")=")
		if !ok || strings.TrimSpace(file) != href {
			continue
		}
		var h hash.Hash
		switch strings.ToUpper(alg) {
		case "SHA1":
			h = sha1.New()
		case "SHA256":
			h = sha256.New()
		case "SHA512":
			h = sha512.New()
		default:
			return refuse("%s: manifest uses %s, which is not SHA1, SHA256 or SHA512", filepath.Base(mf), alg)
		}
		d, err := os.Open(filepath.Join(filepath.Dir(ovf), href))
		if err != nil {
			return err
		}
		_, err = io.Copy(h, d)
		d.Close()
		if err != nil {
			return err
		}
		if got := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(got, strings.TrimSpace(sum)) {
			return refuse("%s: disk %s does not match the manifest (%s %s, manifest %s): the copy is damaged", filepath.Base(mf), href, alg, got, strings.TrimSpace(sum))
		}
		return nil
	}
	return nil
}
