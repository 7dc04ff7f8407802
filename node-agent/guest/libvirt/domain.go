package libvirt

import (
	"encoding/xml"
	"fmt"

	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
)

// The domain XML is built from structs and encoding/xml, never by string concatenation:
// names, paths and kernel arguments come from the site manager and must not be able to
// add elements (a second disk with the desktop's /home, say).

type domainXML struct {
	XMLName       xml.Name   `xml:"domain"`
	Type          string     `xml:"type,attr"`
	Name          string     `xml:"name"`
	Metadata      *metadata  `xml:"metadata,omitempty"`
	Memory        sizeMiB    `xml:"memory"`
	CurrentMemory sizeMiB    `xml:"currentMemory"`
	MemTune       *memTune   `xml:"memtune,omitempty"`
	VCPU          int        `xml:"vcpu"`
	CPUTune       *cpuTune   `xml:"cputune,omitempty"`
	BlkioTune     *blkioTune `xml:"blkiotune,omitempty"`
	OS            osXML      `xml:"os"`
	Features      *features  `xml:"features,omitempty"`
	CPU           *cpuXML    `xml:"cpu,omitempty"`
	Clock         *clockXML  `xml:"clock,omitempty"`
	OnPoweroff    string     `xml:"on_poweroff"`
	OnReboot      string     `xml:"on_reboot"`
	OnCrash       string     `xml:"on_crash"`
	Devices       devices    `xml:"devices"`
}

// metadata records what the agent needs to find again after a restart (adoption).
type metadata struct {
	Guest guestMeta `xml:"https://overtime-hpc.org/xmlns/guest/1 guest"`
}

type guestMeta struct {
	StateDir string `xml:"stateDir"`
}

type sizeMiB struct {
	Unit  string `xml:"unit,attr"`
	Value int    `xml:",chardata"`
}

type memTune struct {
	HardLimit sizeMiB `xml:"hard_limit"`
}

type cpuTune struct {
	Shares       int        `xml:"shares,omitempty"`
	GlobalPeriod int        `xml:"global_period,omitempty"`
	GlobalQuota  int        `xml:"global_quota,omitempty"`
	EmulatorSch  *schedXML  `xml:"emulatorsched,omitempty"`
	VCPUSched    []schedXML `xml:"vcpusched,omitempty"`
}

type schedXML struct {
	VCPUs     string `xml:"vcpus,attr,omitempty"`
	Scheduler string `xml:"scheduler,attr"`
}

type blkioTune struct {
	Weight int `xml:"weight"`
}

type osXML struct {
	Type    osType `xml:"type"`
	Kernel  string `xml:"kernel,omitempty"`
	Initrd  string `xml:"initrd,omitempty"`
	Cmdline string `xml:"cmdline,omitempty"`
	Boot    *struct {
		Dev string `xml:"dev,attr"`
	} `xml:"boot,omitempty"`
}

type osType struct {
	Arch    string `xml:"arch,attr,omitempty"`
	Machine string `xml:"machine,attr,omitempty"`
	Value   string `xml:",chardata"`
}

type features struct {
	ACPI *struct{} `xml:"acpi,omitempty"`
	TCG  *struct {
		TBCache sizeMiB `xml:"tb-cache"`
	} `xml:"tcg,omitempty"`
}

type cpuXML struct {
	Mode string `xml:"mode,attr"`
}

type clockXML struct {
	Offset string `xml:"offset,attr"`
}

type devices struct {
	Disks      []diskXML      `xml:"disk"`
	Interfaces []interfaceXML `xml:"interface"`
	Serials    []serialXML    `xml:"serial"`
	Consoles   []consoleXML   `xml:"console"`
	MemBalloon *struct {
		Model string `xml:"model,attr"`
	} `xml:"memballoon,omitempty"`
}

type diskXML struct {
	Type   string `xml:"type,attr"`
	Device string `xml:"device,attr"`
	Driver struct {
		Name  string `xml:"name,attr"`
		Type  string `xml:"type,attr"`
		Cache string `xml:"cache,attr,omitempty"`
	} `xml:"driver"`
	Source struct {
		File string `xml:"file,attr"`
	} `xml:"source"`
	Target struct {
		Dev string `xml:"dev,attr"`
		Bus string `xml:"bus,attr"`
	} `xml:"target"`
	ReadOnly *struct{} `xml:"readonly,omitempty"`
}

type interfaceXML struct {
	Type   string `xml:"type,attr"`
	Source *struct {
		Bridge string `xml:"bridge,attr"`
	} `xml:"source,omitempty"`
	MAC *struct {
		Address string `xml:"address,attr"`
	} `xml:"mac,omitempty"`
	Model *struct {
		Type string `xml:"type,attr"`
	} `xml:"model,omitempty"`
	Backend *struct {
		Type string `xml:"type,attr"`
	} `xml:"backend,omitempty"`
	PortForward []portForwardXML `xml:"portForward,omitempty"`
}

type portForwardXML struct {
	Proto string `xml:"proto,attr"`
	Range struct {
		Start int `xml:"start,attr"`
		To    int `xml:"to,attr"`
	} `xml:"range"`
}

type serialXML struct {
	Type   string `xml:"type,attr"`
	Source *struct {
		Mode string `xml:"mode,attr"`
		Path string `xml:"path,attr"`
	} `xml:"source,omitempty"`
	Log *struct {
		File   string `xml:"file,attr"`
		Append string `xml:"append,attr"`
	} `xml:"log,omitempty"`
	Target struct {
		Port int `xml:"port,attr"`
	} `xml:"target"`
}

type consoleXML struct {
	Type string `xml:"type,attr"`
	Log  *struct {
		File   string `xml:"file,attr"`
		Append string `xml:"append,attr"`
	} `xml:"log,omitempty"`
	Target struct {
		Type string `xml:"type,attr"`
		Port int    `xml:"port,attr"`
	} `xml:"target"`
}

// CPUPeriod is the CFS period the guest's CPU cap is expressed in (100 ms, the kernel default).
const CPUPeriod = 100000 // microseconds

// Paths of the files a guest keeps in its state directory (tmpfs).
const (
	overlayFile = "overlay.qcow2"
	consoleSock = "console.sock"
	consoleLog  = "console.log"
	domainFile  = "domain.xml"
)

// DomainXML renders the libvirt domain for a guest spec. domType is the libvirt domain
// type: "kvm" or "qemu" (TCG) for the QEMU backend, "xen" for libxl.
func DomainXML(kind model.GuestBackend, domType string, s guest.Spec) ([]byte, error) {
	return domainXMLOf(kind, domType, s, true)
}

// domainXMLOf is DomainXML; ioWeight false leaves out the guest's I/O weight (Start:
// libvirt refuses any domain with one where the host's disks have no proportional I/O
// scheduler, bfq or cfq: NVMe's default "none", mq-deadline).
func domainXMLOf(kind model.GuestBackend, domType string, s guest.Spec, ioWeight bool) ([]byte, error) {
	if err := checkSpec(s); err != nil {
		return nil, err
	}
	d := domainXML{
		Type:          domType,
		Name:          s.Name,
		Metadata:      &metadata{Guest: guestMeta{StateDir: s.StateDir}},
		Memory:        sizeMiB{"MiB", s.MemoryMB},
		CurrentMemory: sizeMiB{"MiB", s.MemoryMB},
		VCPU:          s.VCPUs,
		// Nothing to save: a guest that powers off or crashes is gone, and the agent decides
		// whether to start a new one (with backoff). A reboot inside the guest is allowed.
		OnPoweroff: "destroy",
		OnReboot:   "restart",
		OnCrash:    "destroy",
		Clock:      &clockXML{Offset: "utc"},
		Features:   &features{ACPI: &struct{}{}},
	}
	// The guest's memory cap (hard limit = RAM + QEMU overhead, so a runaway guest cannot
	// push the desktop into swap) is set live right after the start (Backend.Start):
	// a <memtune> hard limit in the XML makes libvirt also raise QEMU's RLIMIT_MEMLOCK to
	// it, which needs CAP_SYS_RESOURCE that a confined agent host may not grant.
	tune := &cpuTune{}
	if s.CPULimit > 0 {
		tune.GlobalPeriod = CPUPeriod
		tune.GlobalQuota = quota(s.CPULimit)
	}
	switch kind {
	case model.BackendQEMU:
		d.OS.Type = osType{Arch: "x86_64", Machine: "pc", Value: "hvm"}
		if s.CPUIdle {
			// cpu.shares 2 is the v1 minimum; SCHED_IDLE on every vCPU and the emulator
			// thread (libvirt sets it, so it holds whatever happens to the agent).
			tune.Shares = 2
			tune.EmulatorSch = &schedXML{Scheduler: "idle"}
			tune.VCPUSched = []schedXML{{VCPUs: fmt.Sprintf("0-%d", s.VCPUs-1), Scheduler: "idle"}}
			if s.VCPUs == 1 {
				tune.VCPUSched[0].VCPUs = "0"
			}
		}
		if domType == "kvm" {
			d.CPU = &cpuXML{Mode: "host-passthrough"}
		} else {
			// QEMU's default TCG translation cache is 1 GiB of host memory.
			d.Features.TCG = &struct {
				TBCache sizeMiB `xml:"tb-cache"`
			}{sizeMiB{"MiB", 128}}
		}
		// Lowest I/O weight (cgroup blkio/io weight range starts at 100 in libvirt).
		if ioWeight {
			d.BlkioTune = &blkioTune{Weight: 100}
		}
	case model.BackendXen:
		// PV direct kernel boot; libxl has no SCHED_IDLE: the credit scheduler's minimum
		// weight is what "idle" means there, and the cap (SetCPULimit) does the rest.
		d.OS.Type = osType{Arch: "x86_64", Machine: "xenpv", Value: "linux"}
		if s.Kernel == "" {
			d.OS.Type = osType{Arch: "x86_64", Machine: "xenfv", Value: "hvm"}
		}
		tune.GlobalPeriod, tune.GlobalQuota = 0, 0
		if s.CPUIdle {
			tune.Shares = 1
		}
		d.Features = nil
	default:
		return nil, fmt.Errorf("libvirt: backend %s is not a libvirt backend", kind)
	}
	if tune.Shares != 0 || tune.GlobalQuota != 0 || tune.EmulatorSch != nil {
		d.CPUTune = tune
	}
	if s.Kernel != "" {
		d.OS.Kernel, d.OS.Initrd, d.OS.Cmdline = s.Kernel, s.Initrd, s.Cmdline
	} else {
		d.OS.Boot = &struct {
			Dev string `xml:"dev,attr"`
		}{"hd"}
	}

	// The only disk: the transient overlay over the read-only base. No other host path is
	// given to the guest (no shared folders): it never sees the desktop user's data.
	var disk diskXML
	disk.Type, disk.Device = "file", "disk"
	disk.Driver.Name, disk.Driver.Type = "qemu", "qcow2"
	// The overlay is thrown away at stop: no need to flush it to the tmpfs.
	disk.Driver.Cache = "unsafe"
	disk.Source.File = s.StateDir + "/" + overlayFile
	disk.Target.Dev, disk.Target.Bus = "vda", "virtio"
	if kind == model.BackendXen {
		disk.Target.Dev, disk.Target.Bus = "xvda", "xen"
		disk.Driver.Cache = ""
	}
	d.Devices.Disks = []diskXML{disk}
	if hasConfig(s) {
		// The configuration disk (guestconfig.go), read-only, raw.
		var cfg diskXML
		cfg.Type, cfg.Device = "file", "disk"
		cfg.Driver.Name, cfg.Driver.Type = "qemu", "raw"
		cfg.Source.File = s.StateDir + "/" + configFile
		cfg.Target.Dev, cfg.Target.Bus = configDev, "virtio"
		if kind == model.BackendXen {
			cfg.Target.Dev, cfg.Target.Bus = "x"+configDev, "xen"
		}
		cfg.ReadOnly = &struct{}{}
		d.Devices.Disks = append(d.Devices.Disks, cfg)
	}

	switch s.Network {
	case model.NetBridged:
		iface := interfaceXML{Type: "bridge"}
		iface.Source = &struct {
			Bridge string `xml:"bridge,attr"`
		}{s.Bridge}
		iface.MAC = &struct {
			Address string `xml:"address,attr"`
		}{s.MAC}
		if kind == model.BackendQEMU {
			iface.Model = &struct {
				Type string `xml:"type,attr"`
			}{"virtio"}
		}
		d.Devices.Interfaces = append(d.Devices.Interfaces, iface)
	case model.NetNAT:
		// User-mode networking through passt: the guest shares the host's address and
		// reaches the network through it; the listed TCP ports are forwarded to it.
		iface := interfaceXML{Type: "user"}
		iface.MAC = &struct {
			Address string `xml:"address,attr"`
		}{s.MAC}
		iface.Model = &struct {
			Type string `xml:"type,attr"`
		}{"virtio"}
		iface.Backend = &struct {
			Type string `xml:"type,attr"`
		}{"passt"}
		for _, p := range s.Ports {
			var pf portForwardXML
			pf.Proto = "tcp"
			pf.Range.Start, pf.Range.To = p.HostPort, p.GuestPort
			iface.PortForward = append(iface.PortForward, pf)
		}
		if kind == model.BackendXen {
			return nil, fmt.Errorf("libvirt: network nat is not supported with the xen backend (use bridged)")
		}
		d.Devices.Interfaces = append(d.Devices.Interfaces, iface)
	case model.NetNone, "":
	default:
		return nil, fmt.Errorf("libvirt: unknown network %q", s.Network)
	}

	if kind == model.BackendQEMU {
		// Serial console on a socket (attach with socat for debugging) and logged to tmpfs.
		var ser serialXML
		ser.Type = "unix"
		ser.Source = &struct {
			Mode string `xml:"mode,attr"`
			Path string `xml:"path,attr"`
		}{"bind", s.StateDir + "/" + consoleSock}
		ser.Log = &struct {
			File   string `xml:"file,attr"`
			Append string `xml:"append,attr"`
		}{s.StateDir + "/" + consoleLog, "off"}
		d.Devices.Serials = []serialXML{ser}
		d.Devices.MemBalloon = &struct {
			Model string `xml:"model,attr"`
		}{"none"}
	} else {
		var con consoleXML
		con.Type = "pty"
		con.Target.Type = "xen"
		d.Devices.Consoles = []consoleXML{con}
	}
	out, err := xml.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

func checkSpec(s guest.Spec) error {
	switch {
	case names.Hostname(s.Name) != nil:
		return fmt.Errorf("libvirt: invalid guest name %q", s.Name)
	case s.VCPUs < 1:
		return fmt.Errorf("libvirt: guest %s: vcpus must be >= 1", s.Name)
	case s.MemoryMB < 16:
		return fmt.Errorf("libvirt: guest %s: memory %d MiB is below 16 MiB", s.Name, s.MemoryMB)
	case s.StateDir == "" || s.StateDir[0] != '/':
		return fmt.Errorf("libvirt: guest %s: state directory must be an absolute path", s.Name)
	case s.BaseImage == "":
		return fmt.Errorf("libvirt: guest %s: no base image", s.Name)
	case s.Kernel == "" && s.Initrd != "":
		return fmt.Errorf("libvirt: guest %s: initrd without kernel", s.Name)
	}
	if s.Network == model.NetBridged && s.Bridge == "" {
		return fmt.Errorf("libvirt: guest %s: bridged network without a bridge", s.Name)
	}
	return nil
}

// overheadMiB is QEMU's own memory next to guest RAM (device models, the TCG translation
// cache, which DomainXML caps at 128 MiB): 256 MiB plus 1/8 of RAM.
func overheadMiB(ram int) int { return 256 + ram/8 }

// quota converts a cap in CPUs to a CFS quota per CPUPeriod (at least 1 ms).
func quota(cpus float64) int {
	q := int(cpus * CPUPeriod)
	if q < 1000 {
		q = 1000
	}
	return q
}
