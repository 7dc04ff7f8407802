// Package diskcheck answers one question for everyone who handles a course VM's disk:
// is this file a self-contained disk image of an allowed format? The lecturer's import
// (images/vmimport), the site manager before it publishes a course-VM version
// (CourseVMVersion, called by sitemgmt/api), and the course-VM player on the pool PC
// before it starts a VM (node-agent/coursevm) all ask it here, so that the three agree.
//
// Why it matters: a disk format may name other files. A qcow2 has a backing file and an
// external data file, a VMware disk a descriptor whose extents are files anywhere, and
// each may be a path (/etc/shadow, a student's home) or, to QEMU, a URL (nbd://, json:
// {...}). A course VM whose disk names one makes every PC in the lecturer's slot open it
// as the session's user and hand its content to the lecturer's guest.
//
// How: the format is decided here from the file's own header, never by qemu-img's
// probing, and the headers of the formats that can name other files (qcow2, vmdk, vpc,
// vdi) are read here first, so that a file naming another is refused before any qemu
// code opens it. Only then does qemu-img look (`qemu-img info --output=json` and, for
// damage, `qemu-img check`), told the format (-f), never following a backing chain (no
// --backing-chain; info opens no backing file), sharing locks (-U), on a relative path
// in the file's own directory (no protocol prefix can be read into it, and its messages
// name no directory), and confined: a time limit (the context and Options.Timeout) and,
// through prlimit(1) from util-linux, a limit on its address space, CPU time and on the
// size of any file it might write (0: it writes none). Its answer is checked again
// (backing file, data file, extents, corruption), so neither layer alone decides.
package diskcheck

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// Formats a disk may have (as qemu-img names them).
const (
	QCOW2 = "qcow2"
	VMDK  = "vmdk"
	Raw   = "raw"
	VDI   = "vdi"
	VHDX  = "vhdx"
	VPC   = "vpc"
)

// ImportFormats are the formats a lecturer may bring to `overtime image import`.
var ImportFormats = []string{QCOW2, Raw, VMDK, VDI, VHDX, VPC}

// CourseVMFormats are the formats of a published course VM's disk (images/vmspec: qcow2
// for QEMU, vmdk for VMware Player).
var CourseVMFormats = []string{QCOW2, VMDK}

// Options tune a check. The zero value is the strict default.
type Options struct {
	QemuImg string // default "qemu-img"
	Prlimit string // default "prlimit" (util-linux)
	// Formats the disk may have (default CourseVMFormats).
	Formats []string
	// Timeout bounds each qemu-img run (default 3 minutes); a disk that takes longer
	// to inspect is refused.
	Timeout time.Duration
	// MaxMemory bounds qemu-img's address space (default 1 GiB; inspecting and
	// checking a qcow2 of some TB needs some tens of MB).
	MaxMemory int64
	// NoDamageCheck skips `qemu-img check` (which reads all of a qcow2's metadata): the
	// player on the PC, where the site manager checked the disk when it was published
	// and only what the file names must be checked again before every start.
	NoDamageCheck bool
}

func (o *Options) defaults() {
	if o.QemuImg == "" {
		o.QemuImg = "qemu-img"
	}
	if o.Prlimit == "" {
		o.Prlimit = "prlimit"
	}
	if len(o.Formats) == 0 {
		o.Formats = CourseVMFormats
	}
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Minute
	}
	if o.MaxMemory == 0 {
		o.MaxMemory = 1 << 30
	}
}

// Info is what the check found.
type Info struct {
	Format      string
	VirtualSize int64
}

// Refusal is the answer "not a self-contained disk of an allowed format", as opposed to
// a failure of the machine doing the check (qemu-img missing, the file unreadable). File
// is the file's base name; Reason says what is wrong and what to do, and never names a
// directory of the machine that checked.
type Refusal struct {
	File   string
	Reason string
}

func (r *Refusal) Error() string { return r.File + ": " + r.Reason }

func refuse(file, format string, a ...any) error {
	return &Refusal{File: file, Reason: fmt.Sprintf(format, a...)}
}

// Inspect checks the disk at path (an absolute or relative path of a regular file).
func Inspect(ctx context.Context, path string, opt Options) (*Info, error) {
	opt.defaults()
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	name := filepath.Base(abs)
	format, boot, err := sniff(abs, name)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(opt.Formats, format) {
		if format == Raw {
			// Whatever has no known header is "raw" to qemu-img.
			return nil, refuse(name, "not a disk image of an allowed format (%s): no known disk header", strings.Join(opt.Formats, ", "))
		}
		return nil, refuse(name, "a %s disk; allowed here: %s", format, strings.Join(opt.Formats, ", "))
	}
	if format == Raw && !boot {
		// A disk of a PC starts with an MBR or a protective MBR (GPT).
		return nil, refuse(name, "not a disk image: no known disk format, and as a raw disk it has no boot sector (MBR or GPT); export the VM as OVA, qcow2 or vmdk")
	}
	if err := preflight(abs, name, format); err != nil {
		return nil, err
	}

	out, err := run(ctx, opt, abs, "info", "-U", "-f", format, "--output=json")
	if err != nil {
		return nil, err
	}
	var qi qemuInfo
	if err := json.Unmarshal(out, &qi); err != nil {
		return nil, fmt.Errorf("qemu-img info on %s: %w", name, err)
	}
	if qi.Format != format {
		return nil, refuse(name, "qemu-img reads it as %q, its header says %s", qi.Format, format)
	}
	if qi.BackingFilename != "" || qi.FullBacking != "" {
		return nil, backingRefusal(name, format, printable(qi.BackingFilename))
	}
	d := qi.FormatSpecific.Data
	if d.DataFile != "" {
		return nil, dataFileRefusal(name, printable(d.DataFile))
	}
	for _, e := range d.Extents {
		p := e.Filename
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(abs), p)
		}
		if filepath.Clean(p) != abs {
			return nil, extentRefusal(name, []string{printable(e.Filename)})
		}
	}
	if d.Corrupt {
		return nil, refuse(name, "qemu-img marks the %s image corrupt", format)
	}
	if !opt.NoDamageCheck {
		switch format {
		case QCOW2, VMDK, VDI, VHDX:
			if _, err := run(ctx, opt, abs, "check", "-U", "-f", format); err != nil {
				var ce *checkError
				if !errors.As(err, &ce) {
					return nil, err
				}
				// Exit 3: leaked clusters only, harmless for a copy.
				if ce.code != 3 {
					return nil, refuse(name, "the %s image is damaged (qemu-img check: %s)", format, ce.msg)
				}
			}
		}
	}
	if qi.VirtualSize <= 0 {
		return nil, refuse(name, "empty disk")
	}
	return &Info{Format: format, VirtualSize: qi.VirtualSize}, nil
}

type qemuInfo struct {
	Format          string `json:"format"`
	VirtualSize     int64  `json:"virtual-size"`
	BackingFilename string `json:"backing-filename"`
	FullBacking     string `json:"full-backing-filename"`
	FormatSpecific  struct {
		Data struct {
			DataFile string `json:"data-file"`
			Corrupt  bool   `json:"corrupt"`
			Extents  []struct {
				Filename string `json:"filename"`
			} `json:"extents"`
		} `json:"data"`
	} `json:"format-specific"`
}

func backingRefusal(name, format, backing string) error {
	return refuse(name, "a %s disk with a backing file (%s) is refused: a course VM must be one self-contained disk; flatten it first with `qemu-img convert -O qcow2 %s flat.qcow2` where the backing file belongs to you", format, backing, name)
}

func dataFileRefusal(name, file string) error {
	return refuse(name, "a qcow2 disk with an external data file (%s) is refused: convert it to a self-contained qcow2 first (`qemu-img convert -O qcow2 %s flat.qcow2`)", file, name)
}

func extentRefusal(name string, extents []string) error {
	return refuse(name, "a VMware disk whose data lives in other files (%s) is refused: export the VM as an OVA, or convert the disk to one file (vmware-vdiskmanager -r %s -t 0 single.vmdk)", strings.Join(extents, ", "), name)
}

// checkError is qemu-img check's non-zero exit.
type checkError struct {
	code int
	msg  string
}

func (e *checkError) Error() string { return e.msg }

// run runs qemu-img sub args... on the file at abs, confined, in the file's directory on
// "./name". A failing info is a refusal; a failing check is a *checkError for Inspect to
// judge by its exit code.
func run(ctx context.Context, opt Options, abs, sub string, args ...string) ([]byte, error) {
	name := filepath.Base(abs)
	prlimit, err := exec.LookPath(opt.Prlimit)
	if err != nil {
		return nil, fmt.Errorf("checking disks needs prlimit (Debian package util-linux) to confine qemu-img: %w", err)
	}
	qemuImg, err := exec.LookPath(opt.QemuImg)
	if err != nil {
		return nil, fmt.Errorf("checking disks needs qemu-img (Debian package qemu-utils): %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, opt.Timeout)
	defer cancel()
	cpu := max(int64(opt.Timeout/time.Second), 1)
	argv := append([]string{
		"--as=" + strconv.FormatInt(opt.MaxMemory, 10),
		"--cpu=" + strconv.FormatInt(cpu, 10),
		"--fsize=0", "--core=0",
		"--", qemuImg, sub}, args...)
	// "./name": a name with a colon is never read as a protocol (nbd:, json:), and
	// qemu-img's messages name the file, not the directory it is in.
	argv = append(argv, "./"+name)
	cmd := exec.CommandContext(rctx, prlimit, argv...)
	cmd.Dir = filepath.Dir(abs)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if rctx.Err() != nil {
		return nil, refuse(name, "qemu-img %s did not finish within %v: refused (inspecting a plain disk takes seconds)", sub, opt.Timeout)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return nil, fmt.Errorf("qemu-img %s: %w", sub, err)
	}
	msg := scrub(stdout.String()+" "+stderr.String(), filepath.Dir(abs))
	if msg == "" {
		msg = ee.String()
	}
	if sub == "check" && ee.Exited() {
		return nil, &checkError{code: ee.ExitCode(), msg: msg}
	}
	return nil, refuse(name, "not a disk image qemu-img can read: %s", msg)
}

// scrub makes qemu-img's output one short line that names no directory of this machine.
func scrub(s, dir string) string {
	s = strings.ReplaceAll(s, dir+"/", "")
	s = strings.ReplaceAll(s, dir, ".")
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

// printable shortens a name taken from a disk's header for a message.
func printable(s string) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) > 200 {
		s = string([]rune(s)[:200]) + "…"
	}
	return s
}

// openFile opens without blocking on a FIFO (a "disk" that is one must not hang the
// check); the callers accept only regular files.
func openFile(abs string) (*os.File, error) {
	return os.OpenFile(abs, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// headSize is what sniff reads: enough for every header it knows.
const headSize = 4096

// sniff decides the format from the file's header. Formats Overtime never accepts are
// named, so that the refusal says what the file is; anything unknown is raw, as qemu-img
// would call it; boot: it starts with a boot sector (55 AA ending its first 512 bytes).
func sniff(abs, name string) (format string, boot bool, err error) {
	f, err := openFile(abs)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", false, err
	}
	if !fi.Mode().IsRegular() {
		return "", false, refuse(name, "not a regular file")
	}
	head := make([]byte, headSize)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", false, err
	}
	head = head[:n]
	has := func(off int, magic string) bool {
		return len(head) >= off+len(magic) && string(head[off:off+len(magic)]) == magic
	}
	switch {
	case has(0, "QFI\xfb"):
		if len(head) >= 8 && binary.BigEndian.Uint32(head[4:]) == 1 {
			return "", false, refuse(name, "a qcow (version 1) disk is not accepted: convert it to qcow2 (`qemu-img convert -O qcow2 %s disk.qcow2`)", name)
		}
		return QCOW2, false, nil
	case has(0, "KDMV"):
		return VMDK, false, nil
	case has(0, "COWD"):
		return "", false, refuse(name, "an ESX sparse (COWD) VMware disk is a redo log of another disk and is not accepted: export the VM as an OVA")
	case isDescriptor(head):
		return "", false, extentRefusal(name, descriptorExtents(head))
	case has(64, "\x7f\x10\xda\xbe"):
		return VDI, false, nil
	case has(0, "vhdxfile"):
		return VHDX, false, nil
	case has(0, "conectix"):
		return VPC, false, nil
	case has(0, "QED\x00"):
		return "", false, refuse(name, "a QED disk is not accepted: convert it to qcow2")
	case has(0, "LUKS\xba\xbe"):
		return "", false, refuse(name, "an encrypted (LUKS) disk is not accepted: a PC cannot decrypt it unattended")
	case has(0, "WithoutFreeSpace"), has(0, "WithouFreSpacExt"):
		return "", false, refuse(name, "a Parallels disk is not accepted: export the VM as an OVA or convert the disk to qcow2")
	}
	return Raw, len(head) >= 512 && head[510] == 0x55 && head[511] == 0xaa, nil
}

// isDescriptor: a VMware descriptor (a text file whose extents are other files).
func isDescriptor(head []byte) bool {
	return bytes.Contains(head, []byte("# Disk DescriptorFile")) ||
		(bytes.Contains(head, []byte("createType")) && bytes.Contains(head, []byte("version=")))
}

// descriptorExtents lists the files a VMware descriptor's extent lines name
// (`RW 2048 FLAT "file" 0`), for the message.
func descriptorExtents(desc []byte) []string {
	var out []string
	for line := range strings.Lines(string(desc)) {
		f := strings.Fields(line)
		if len(f) < 4 || (f[0] != "RW" && f[0] != "RDONLY" && f[0] != "NOACCESS") {
			continue
		}
		if i, j := strings.IndexByte(line, '"'), strings.LastIndexByte(line, '"'); i >= 0 && j > i {
			out = append(out, printable(line[i+1:j]))
		}
	}
	if len(out) == 0 {
		out = []string{"its extents"}
	}
	return out
}

// preflight reads the header fields by which a format names other files, before qemu-img
// opens the file: a refusal here means no qemu code ever looked at the names.
func preflight(abs, name, format string) error {
	f, err := openFile(abs)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	at := func(off int64, n int) []byte {
		if off < 0 || n <= 0 || off >= fi.Size() {
			return nil
		}
		n = int(min(int64(n), fi.Size()-off))
		b := make([]byte, n)
		k, _ := f.ReadAt(b, off)
		return b[:k]
	}
	switch format {
	case QCOW2:
		return qcow2Header(name, at)
	case VMDK:
		return vmdkHeader(name, at)
	case VPC:
		// The footer's disk type (offset 60): 4 is a differencing disk, whose data
		// partly lives in its parent.
		if h := at(0, 64); len(h) == 64 && binary.BigEndian.Uint32(h[60:]) == 4 {
			return refuse(name, "a differencing VHD (it needs its parent disk) is refused: merge it into its parent first")
		}
	case VDI:
		// Image type (offset 0x4c): 3 undo, 4 differencing: both need another disk.
		if h := at(0, 0x50); len(h) == 0x50 {
			if t := binary.LittleEndian.Uint32(h[0x4c:]); t == 3 || t == 4 {
				return refuse(name, "a differencing VDI (a VirtualBox snapshot: it needs its parent disk) is refused: clone the VM's current state to a new disk first")
			}
		}
	}
	return nil
}

// qcow2 header fields and extensions (docs/interop/qcow2.txt in QEMU).
const (
	qcow2IncompatDataFile = 1 << 2
	qcow2ExtDataFile      = 0x44415441
	qcow2ExtEncryption    = 0x0537be77
)

func qcow2Header(name string, at func(int64, int) []byte) error {
	h := at(0, 104)
	if len(h) < 72 {
		return refuse(name, "a truncated qcow2 header")
	}
	be := binary.BigEndian
	version := be.Uint32(h[4:])
	if version != 2 && version != 3 {
		return refuse(name, "qcow2 version %d is not known", version)
	}
	backingOff, backingLen := be.Uint64(h[8:]), be.Uint32(h[16:])
	if backingOff != 0 || backingLen != 0 {
		backing := "unreadable"
		if backingLen > 0 && backingLen <= 4096 && backingOff < 1<<40 {
			if b := at(int64(backingOff), int(backingLen)); len(b) > 0 {
				backing = printable(string(b))
			}
		}
		return backingRefusal(name, QCOW2, backing)
	}
	clusterBits := be.Uint32(h[20:])
	if clusterBits < 9 || clusterBits > 21 {
		return refuse(name, "qcow2 cluster size 2^%d is out of range", clusterBits)
	}
	if be.Uint32(h[32:]) != 0 {
		return refuse(name, "an encrypted qcow2 disk is not accepted: a PC cannot decrypt it unattended")
	}
	extStart := int64(72)
	if version == 3 {
		if len(h) < 104 {
			return refuse(name, "a truncated qcow2 header")
		}
		if be.Uint64(h[72:])&qcow2IncompatDataFile != 0 {
			return dataFileRefusal(name, dataFileName(name, at, int64(be.Uint32(h[100:])), int64(1)<<clusterBits))
		}
		extStart = int64(be.Uint32(h[100:]))
	}
	// The header extensions follow the header, inside the first cluster.
	cluster := int64(1) << clusterBits
	for off := extStart; off+8 <= cluster; {
		e := at(off, 8)
		if len(e) < 8 {
			break
		}
		typ, n := be.Uint32(e), int64(be.Uint32(e[4:]))
		switch typ {
		case 0:
			return nil
		case qcow2ExtDataFile:
			return dataFileRefusal(name, printable(string(at(off+8, int(min(n, 4096))))))
		case qcow2ExtEncryption:
			return refuse(name, "an encrypted qcow2 disk is not accepted: a PC cannot decrypt it unattended")
		}
		off += 8 + (n+7)&^7
	}
	return nil
}

// dataFileName finds the external data file's name among the header extensions, for the
// message.
func dataFileName(name string, at func(int64, int) []byte, extStart, cluster int64) string {
	be := binary.BigEndian
	for off := extStart; off+8 <= cluster; {
		e := at(off, 8)
		if len(e) < 8 || be.Uint32(e) == 0 {
			break
		}
		n := int64(be.Uint32(e[4:]))
		if be.Uint32(e) == qcow2ExtDataFile {
			return printable(string(at(off+8, int(min(n, 4096)))))
		}
		off += 8 + (n+7)&^7
	}
	return "unnamed"
}

// vmdkHeader: a sparse VMware disk (KDMV) is self-contained when its header gives its
// capacity (QEMU reads a capacity of 0 as "the embedded descriptor lists the extents")
// and its embedded descriptor names no parent (a snapshot's parentFileNameHint).
func vmdkHeader(name string, at func(int64, int) []byte) error {
	h := at(0, 44)
	if len(h) < 44 {
		return refuse(name, "a truncated VMware disk header")
	}
	le := binary.LittleEndian
	if le.Uint64(h[12:]) == 0 {
		return extentRefusal(name, []string{"extents its embedded descriptor lists"})
	}
	descOff, descLen := le.Uint64(h[28:]), le.Uint64(h[36:])
	if descOff == 0 || descLen == 0 || descOff > 1<<31 {
		return nil
	}
	desc := at(int64(descOff)*512, int(min(descLen*512, 1<<20)))
	for line := range strings.Lines(string(desc)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok && strings.TrimSpace(k) == "parentFileNameHint" {
			if p := strings.Trim(strings.TrimSpace(v), `"`); p != "" {
				return backingRefusal(name, VMDK, printable(p))
			}
		}
	}
	return nil
}
