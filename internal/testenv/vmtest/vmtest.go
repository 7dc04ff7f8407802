// Package vmtest runs QEMU virtual machines for tests and benchmarks of the boot chain:
// qemu-system-x86_64 inside a network namespace (internal/netns) with a virtio NIC on a tap
// device, booted either directly (-kernel/-initrd/-append) or from the network (iPXE option
// ROM from Debian's ipxe-qemu under SeaBIOS, Debian's OVMF for UEFI, or a plain PXE stack
// under SeaBIOS that chains a PXE loader such as lpxelinux.0: BIOSPXE), with its serial
// console on a pipe (Console: Expect, Send, Run, and a log file).
//
// KVM is used only when it actually runs a guest (Accel probes it once per process): on
// nested hosts /dev/kvm may open and create VMs whose vCPUs then fail. Otherwise QEMU runs
// under TCG, several times slower. QEMU gets SIGKILL when the test process dies
// (Pdeathsig), so no VM outlives a test binary killed by -timeout.
package vmtest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/atomicfile"
	"github.com/overtime-hpc/overtime/internal/netns"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

// Paths of the Debian packages qemu-system-x86, ovmf and ipxe-qemu; variables so that
// another layout can be used.
var (
	QEMU     = "/usr/bin/qemu-system-x86_64"
	OVMFCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	OVMFVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
	// IPXEROM is the option ROM of virtio-net-pci for network boots (iPXE, with the BIOS
	// and the EFI driver), which QEMU loads by default from ipxe-qemu; checked to exist.
	IPXEROM = "/usr/lib/ipxe/qemu/efi-virtio.rom"
	// IPXELKRN is iPXE as a Linux kernel image (Debian package ipxe), the plain PXE
	// stack of the BIOSPXE firmware.
	IPXELKRN = "/usr/lib/ipxe/ipxe.lkrn"
)

// Firmware selects how a VM without a Kernel boots: from the network, or (BIOSDisk)
// from its first disk.
type Firmware int

const (
	// BIOS is SeaBIOS with the iPXE option ROM of the virtio NIC.
	BIOS Firmware = iota
	// UEFI is OVMF (a private copy of its variable store in Dir).
	UEFI
	// BIOSPXE is SeaBIOS with a plain PXE stack, as in a PC whose NIC ROM is not iPXE:
	// the boot file DHCP names is loaded over TFTP and run with the PXE (UNDI) API, and
	// the loader does everything after that itself. QEMU's NIC ROM is iPXE, which asks
	// DHCP with the user class "iPXE" and so gets a boot server's iPXE chain, never a
	// PXE ROM's loader; so iPXE runs as the kernel (IPXELKRN, without the NIC's ROM) and
	// executes pxeScript, which asks DHCP with the user class a PXE ROM sends and chains
	// the boot file it is given, providing the PXE API to it as a PXE ROM does.
	BIOSPXE
	// BIOSDisk is SeaBIOS booting the first of Config.Disks (its MBR boot sector), no
	// network needed: a course VM's disk, or internal/testenv/bootsector's.
	BIOSDisk
)

// pxeScript makes iPXE a plain PXE ROM: user class "PXEClient" instead of "iPXE" (the
// boot server must not recognise iPXE), DHCP, then the boot file over TFTP from the
// server DHCP named, executed as a PXE network boot program (iPXE's PXE image type).
// Without a boot file it stops, as a PXE ROM without an offer does.
const pxeScript = `#!ipxe
set user-class PXEClient
dhcp || goto failed
echo vmtest: PXE boot file ${filename} from ${next-server}
chain tftp://${next-server}/${filename} || goto failed
:failed
echo vmtest: PXE boot failed
`

func (f Firmware) String() string {
	switch f {
	case UEFI:
		return "uefi"
	case BIOSPXE:
		return "bios-pxe"
	case BIOSDisk:
		return "bios-disk"
	}
	return "bios"
}

// Config describes one VM.
type Config struct {
	Name string // for messages; default "vm"
	Dir  string // working directory: console.log, qemu.log, OVMF variables (required)

	// Network: a tap device in NS (netns.NS.AddTap, Net.AddTap). NS nil = no NIC.
	NS  *netns.NS
	Tap string
	MAC string // default: a random locally administered address

	// Direct kernel boot when Kernel is set; a network boot with Firmware otherwise.
	Kernel, Initrd, Append string
	Firmware               Firmware

	// Disks are raw disk images attached read-only as virtio disks (vda, vdb, ... in the
	// guest), after the NIC in the boot order; with Firmware BIOSDisk the first boots.
	Disks []string

	// Display gives the VM a standard VGA card (bochs-drm in a Linux guest), whose screen
	// a test reads with Monitor().Screendump: nothing is shown on the host; and a USB
	// tablet, the pointer Monitor().Click moves to a place on that screen (a PS/2 mouse
	// moves by relative steps, which the guest's pointer acceleration scales).
	Display bool

	MemoryMB int      // default 512
	CPUs     int      // default 1
	Extra    []string // more QEMU arguments
}

// VM is a running QEMU.
type VM struct {
	Console *Console
	Accel   string // "kvm" or "tcg"
	MAC     string
	cfg     Config

	cmd      *exec.Cmd
	done     chan struct{}
	waitErr  error
	stopOnce sync.Once
	stderr   *bytes.Buffer
	stderrMu *sync.Mutex
	mon      *Monitor
}

// Start starts QEMU. The console log is Dir/console.log; QEMU's own messages go to
// Dir/qemu.log.
func Start(cfg Config) (*VM, error) {
	if cfg.Dir == "" {
		return nil, errors.New("vmtest: Config.Dir is required")
	}
	if cfg.Name == "" {
		cfg.Name = "vm"
	}
	if cfg.MemoryMB == 0 {
		cfg.MemoryMB = 512
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = 1
	}
	if cfg.NS != nil && cfg.MAC == "" {
		cfg.MAC = RandomMAC()
	}
	if _, err := os.Stat(QEMU); err != nil {
		return nil, fmt.Errorf("vmtest: %v (Debian package qemu-system-x86)", err)
	}
	accel, _ := Accel()
	args, err := qemuArgs(cfg, accel)
	if err != nil {
		return nil, err
	}
	monL, monPath, monCleanup, err := listenMonitor(cfg.Dir)
	if err != nil {
		return nil, err
	}
	// QEMU connects to the harness's socket (a client chardev): the connection is there
	// as soon as QEMU runs.
	args = append(args, "-chardev", "socket,id=qmp0,path="+monPath, "-mon", "chardev=qmp0,mode=control")

	var cmd *exec.Cmd
	if cfg.NS != nil {
		// ip netns exec execs QEMU: the process is QEMU itself.
		cmd = cfg.NS.Command(QEMU, args...)
	} else {
		cmd = exec.Command(QEMU, args...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		monCleanup()
		return nil, err
	}
	// An os.Pipe of our own rather than StdoutPipe: Wait closes a StdoutPipe's read end,
	// which can cut off the console's last output ("file already closed") when QEMU
	// exits quickly. This read end is the console's; it sees EOF once QEMU is gone.
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		monCleanup()
		return nil, err
	}
	cmd.Stdout = stdoutW
	qlog, err := os.Create(filepath.Join(cfg.Dir, "qemu.log"))
	if err != nil {
		monCleanup()
		return nil, err
	}
	fmt.Fprintf(qlog, "# accel %s\n# %s %s\n", accel, QEMU, strings.Join(args, " "))
	vm := &VM{Accel: accel, MAC: cfg.MAC, cfg: cfg, cmd: cmd, done: make(chan struct{}),
		stderr: &bytes.Buffer{}, stderrMu: &sync.Mutex{}}
	vm.mon = newMonitor(monL, vm.done)
	cmd.Stderr = io.MultiWriter(qlog, lockedWriter{vm.stderrMu, vm.stderr})
	con, err := newConsole(stdout, stdin, filepath.Join(cfg.Dir, "console.log"))
	if err != nil {
		qlog.Close()
		monCleanup()
		return nil, err
	}
	vm.Console = con
	con.exitInfo = func() string {
		// The console ends when QEMU closes its stdout, a moment before Wait returns.
		select {
		case <-vm.done:
		case <-time.After(5 * time.Second):
			return "QEMU still running"
		}
		if err := vm.Err(); err != nil {
			return err.Error()
		}
		return "QEMU exited"
	}
	err = cmd.Start()
	stdoutW.Close() // QEMU holds the write end now
	if err != nil {
		qlog.Close()
		stdout.Close()
		monCleanup()
		return nil, fmt.Errorf("vmtest: start QEMU: %w", err)
	}
	go func() {
		vm.waitErr = cmd.Wait()
		qlog.Close()
		monCleanup()
		close(vm.done)
		vm.mon.close()
	}()
	return vm, nil
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// qemuArgs is QEMU's command line for cfg.
func qemuArgs(cfg Config, accel string) ([]string, error) {
	args := []string{
		"-name", cfg.Name,
		"-machine", "q35",
		"-accel", accel,
		"-m", strconv.Itoa(cfg.MemoryMB),
		"-smp", strconv.Itoa(cfg.CPUs),
		"-nodefaults", "-no-user-config",
		"-display", "none",
		// The serial console on QEMU's stdin/stdout; signal=off: a ^C typed by a test is
		// for the guest, not for QEMU.
		"-chardev", "stdio,id=con0,signal=off",
		"-serial", "chardev:con0",
	}
	if cfg.Display {
		args = append(args, "-device", "VGA", "-device", "qemu-xhci", "-device", "usb-tablet")
	}
	if accel == "kvm" {
		args = append(args, "-cpu", "host")
	} else {
		// No virtualisation extensions in an emulated CPU: QEMU's default model offers
		// SVM, the guest's kvm module then loads, and a VM started inside it (the course
		// VM player of test/desktop_test.go) passed kvmprobe's probe and then hung the
		// whole emulated desktop. A test VM runs nested guests with TCG.
		args = append(args, "-cpu", "qemu64,svm=off")
	}
	if cfg.NS != nil {
		if cfg.Tap == "" {
			return nil, errors.New("vmtest: Config.NS without Tap")
		}
		nic := "virtio-net-pci,netdev=net0,mac=" + cfg.MAC
		if cfg.Kernel == "" && cfg.Firmware != BIOSPXE && cfg.Firmware != BIOSDisk {
			// QEMU's default option ROM of the device, efi-virtio.rom, which it finds in
			// ipxe-qemu's directory. (Naming the file by its full path in romfile= left
			// SeaBIOS without the ROM in a test with QEMU 7.2.)
			nic += ",bootindex=1"
		} else {
			// No option ROM: a direct kernel boot or a disk's does not need iPXE, and
			// under BIOSPXE the iPXE kernel drives the NIC.
			nic += ",romfile="
		}
		args = append(args,
			"-netdev", "tap,id=net0,ifname="+cfg.Tap+",script=no,downscript=no",
			"-device", nic)
	}
	for i, d := range cfg.Disks {
		if _, err := os.Stat(d); err != nil {
			return nil, fmt.Errorf("vmtest: disk: %w", err)
		}
		id := fmt.Sprintf("disk%d", i)
		dev := "virtio-blk-pci,drive=" + id
		if i == 0 && cfg.Kernel == "" && cfg.Firmware == BIOSDisk {
			dev += ",bootindex=1"
		}
		args = append(args,
			"-drive", "if=none,id="+id+",format=raw,readonly=on,file="+d,
			"-device", dev)
	}
	switch {
	case cfg.Kernel != "":
		args = append(args, "-kernel", cfg.Kernel)
		if cfg.Initrd != "" {
			args = append(args, "-initrd", cfg.Initrd)
		}
		if cfg.Append != "" {
			args = append(args, "-append", cfg.Append)
		}
	case cfg.Firmware == BIOSDisk:
		if len(cfg.Disks) == 0 {
			return nil, errors.New("vmtest: BIOSDisk boots the first of Config.Disks, and there is none")
		}
	case cfg.NS == nil:
		return nil, errors.New("vmtest: a network boot needs a NIC (Config.NS and Tap)")
	case cfg.Firmware == UEFI:
		vars := filepath.Join(cfg.Dir, "OVMF_VARS.fd")
		if err := copyFile(OVMFVars, vars); err != nil {
			return nil, fmt.Errorf("vmtest: UEFI variables: %w (Debian package ovmf)", err)
		}
		if _, err := os.Stat(OVMFCode); err != nil {
			return nil, fmt.Errorf("vmtest: %v (Debian package ovmf)", err)
		}
		args = append(args,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+OVMFCode,
			"-drive", "if=pflash,format=raw,unit=1,file="+vars)
	case cfg.Firmware == BIOSPXE:
		if _, err := os.Stat(IPXELKRN); err != nil {
			return nil, fmt.Errorf("vmtest: %v (Debian package ipxe)", err)
		}
		script := filepath.Join(cfg.Dir, "pxe.ipxe")
		if err := os.WriteFile(script, []byte(pxeScript), 0o644); err != nil {
			return nil, err
		}
		sercon, err := serconPort(cfg.Dir)
		if err != nil {
			return nil, err
		}
		// iPXE executes a script given as its initrd.
		args = append(args, "-kernel", IPXELKRN, "-initrd", script, "-fw_cfg", "name=etc/sercon-port,file="+sercon)
	default:
		if _, err := os.Stat(IPXEROM); err != nil {
			return nil, fmt.Errorf("vmtest: %v (Debian package ipxe-qemu)", err)
		}
		sercon, err := serconPort(cfg.Dir)
		if err != nil {
			return nil, err
		}
		args = append(args, "-boot", "n", "-fw_cfg", "name=etc/sercon-port,file="+sercon)
	}
	return append(args, cfg.Extra...), nil
}

// serconPort writes the fw_cfg file that makes SeaBIOS print on the serial port.
func serconPort(dir string) (string, error) {
	// SeaBIOS prints (and so do option ROMs like iPXE, and loaders like PXELINUX, through
	// the BIOS console) on a serial port only when fw_cfg names it: etc/sercon-port, a
	// little-endian I/O port. Without it a network boot is silent until the kernel's
	// console=ttyS0. QEMU warns that the name lacks the "opt/" prefix; SeaBIOS wants this
	// one.
	sercon := filepath.Join(dir, "sercon-port")
	return sercon, os.WriteFile(sercon, []byte{0xf8, 0x03}, 0o644)
}

// Stop kills QEMU and reaps it. It may be called more than once.
func (vm *VM) Stop() {
	vm.stopOnce.Do(func() {
		_ = vm.cmd.Process.Kill()
		<-vm.done
	})
}

// Done is closed when QEMU has exited.
func (vm *VM) Done() <-chan struct{} { return vm.done }

// Err is QEMU's exit error and its messages; valid after Done is closed.
func (vm *VM) Err() error {
	select {
	case <-vm.done:
	default:
		return nil
	}
	vm.stderrMu.Lock()
	defer vm.stderrMu.Unlock()
	msg := strings.TrimSpace(vm.stderr.String())
	if vm.waitErr == nil && msg == "" {
		return nil
	}
	return fmt.Errorf("qemu: %v: %s", vm.waitErr, msg)
}

// Dir is the VM's working directory.
func (vm *VM) Dir() string { return vm.cfg.Dir }

// StartT starts a VM for a test and stops it when the test ends; when the test failed, it
// logs the console's last lines. With OVERTIME_VMTEST_LOGDIR set, every VM's console is
// also saved there as TEST-VMNAME.console.log. Dir defaults to a new temporary directory.
func StartT(t testing.TB, cfg Config) *VM {
	t.Helper()
	needs.Servers(t, "QEMU")
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	vm, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, why := Accel()
	t.Logf("vmtest: %s runs QEMU with %s (%s); console log %s", cfg.Name, vm.Accel, why, filepath.Join(cfg.Dir, "console.log"))
	t.Cleanup(func() {
		vm.Stop()
		if t.Failed() {
			t.Logf("vmtest: %s console (last 4000 bytes):\n%s", cfg.Name, vm.Console.Tail(4000))
		}
		// Test directories are removed after the test; keep the console for later reading.
		if d := os.Getenv("OVERTIME_VMTEST_LOGDIR"); d != "" {
			name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name() + "-" + cfg.Name)
			if err := os.MkdirAll(d, 0o755); err == nil {
				_ = os.WriteFile(filepath.Join(d, name+".console.log"), []byte(vm.Console.Output()), 0o644)
			}
		}
	})
	return vm
}

// RandomMAC is a random locally administered unicast MAC address (52:54:00 is QEMU's
// prefix; 0x02 in the first byte marks local administration).
func RandomMAC() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("02:%02x:%02x:%02x:%02x:%02x", 0x54, b[0], b[1], b[2], b[3])
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(dst, data, 0o644)
}
