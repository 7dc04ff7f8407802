package render

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// Boot is one host's boot: what the per-request boot script endpoints render.
type Boot struct {
	MAC     string              // canonical lower-case colon form; "" only for a request that names no MAC (pxelinux.cfg/default), Host must then be nil
	Host    *model.Host         // nil for a MAC not in the directory
	Server  *model.BootServer   // the boot server answering this host
	Mode    *model.Mode         // scheduled (default) mode
	Image   *model.ImageVersion // resolved version for Mode; nil if the mode boots no image or the image has no version yet ("image missing")
	Reason  string              // deciding rule, shown as a comment and menu text (free text: reduced per format where written)
	Until   time.Time           // next change (zero = none); shown in the menu title in Loc
	Loc     *time.Location      // the site's zone; nil = UTC
	Others  []MenuEntry         // other selectable entries (local disk, maintenance, ...), each with its own resolved image
	Timeout time.Duration       // menu timeout before the default boots; <= 0 means DefaultMenuTimeout

	// Exam: the scheduled mode comes from an exam exception. The script then has no menu
	// and no way out of that mode: Others are not rendered, nothing falls back to the
	// local disk or a shell, a failure retries (exam.go), and the kernel command line
	// carries ExamKernelArg. Only for hosts in the directory.
	Exam bool

	// Check, when set, says why a mode's resolved image cannot boot from this boot server
	// ("" = it can), e.g. because its files are not on disk: the entry is then shown
	// unavailable like an unpublished image, and the default falls back.
	Check func(m *model.Mode, v *model.ImageVersion) string
}

// MenuEntry is one selectable boot entry besides the scheduled mode.
type MenuEntry struct {
	Mode  *model.Mode
	Image *model.ImageVersion
}

// Labels of the built-in targets. Mode entries are labelled "mode-"+name, and mode names
// cannot contain anything that would turn them into these.
const (
	labelLocalDisk = "overtime-localdisk"
	labelFailed    = "overtime-failed"
)

// bootPlan is a Boot after validation: everything a boot-script renderer writes.
type bootPlan struct {
	mac       string
	host      string // host name, or "" for an unknown MAC
	who       string // "pc-a01" or "52:54:00:12:34:56 (unknown)", for titles and serial console
	pool      string
	server    string
	reason    string // free text: written only through ipxeText, pxelinuxText or commentText
	until     string // "" when no change is scheduled
	entries   []bootEntry
	def       string // label of the default entry
	localItem bool   // no entry is of kind local-disk: show the built-in local disk item
	timeout   time.Duration
	exam      bool   // lockdown: only entries[0], no menu, no escape (exam.go)
	retryURL  string // exam: this host's boot script, asked for again after a failure
}

type bootEntry struct {
	label     string
	mode      *model.Mode
	image     *model.ImageVersion
	scheduled bool
	localDisk bool   // kind local-disk: boots the local disk
	missing   string // non-empty: why it cannot boot (free text, shown; the entry falls back to local disk)
	kernel    string
	initrd    string // "" = no initrd
	cmdline   string
}

// text is the menu line of an entry. Its free text (the description, why the entry is
// unavailable) goes through literal, the text function of the format it is written into;
// the rest are names and versions of checked alphabets.
func (e *bootEntry) text(literal func(string) string) string {
	s := e.mode.Name + " - "
	switch {
	case e.missing != "":
		s += "UNAVAILABLE: " + literal(e.missing) + " - boots the local disk"
	case e.mode.Description != "":
		s += literal(e.mode.Description)
	default:
		s += string(e.mode.Kind)
	}
	if e.missing == "" && e.image != nil {
		s += " [" + e.mode.Image + " " + e.image.Version
		if e.mode.ImageVersion != "" {
			s += " pinned"
		}
		if e.mode.VM != "" {
			s += ", vm " + e.mode.VM
		}
		s += "]"
	}
	if e.scheduled {
		s += " (scheduled)"
	}
	return s
}

// plan validates a Boot and works out every entry, its URLs and the default.
func (b Boot) plan() (*bootPlan, error) {
	p := &bootPlan{mac: b.MAC, who: b.MAC + " (unknown)"}
	if b.MAC == "" {
		// lpxelinux falls back to pxelinux.cfg/default when no per-MAC file answers;
		// that request carries no MAC, and the PC still has to boot.
		if b.Host != nil {
			return nil, errorf("host %s: no MAC given", b.Host.Name)
		}
		p.mac, p.who = "no MAC", "unknown PC"
	} else if err := checkMAC(b.MAC); err != nil {
		return nil, err
	}
	if err := checkServer(b.Server); err != nil {
		return nil, err
	}
	p.server = b.Server.Name
	if b.Host != nil {
		if err := checkHostname(b.Host.Name); err != nil {
			return nil, err
		}
		if err := checkName("pool", b.Host.Pool); err != nil {
			return nil, err
		}
		if b.Host.MAC != b.MAC {
			return nil, errorf("host %s has MAC %q, not the requesting %s", b.Host.Name, b.Host.MAC, b.MAC)
		}
		p.host, p.pool, p.who = b.Host.Name, b.Host.Pool, b.Host.Name
	}
	p.reason = b.Reason
	if !b.Until.IsZero() {
		loc := b.Loc
		if loc == nil {
			loc = time.UTC
		}
		p.until = b.Until.In(loc).Format("Mon 2006-01-02 15:04 MST")
	}
	p.timeout = b.Timeout
	if p.timeout <= 0 {
		p.timeout = DefaultMenuTimeout
	}

	sched, err := p.entry(b, b.Mode, b.Image)
	if err != nil {
		return nil, err
	}
	sched.scheduled = true
	if b.Exam {
		// An exam offers nothing but its mode, whatever the caller put in Others.
		if b.Host == nil {
			return nil, errorf("an exam boot needs a host in the directory, not %s", p.who)
		}
		base, err := baseURL(b.Server.HTTPURL)
		if err != nil {
			return nil, err
		}
		p.exam, p.retryURL = true, base+"/boot/ipxe/"+b.MAC
		p.entries = []bootEntry{sched}
		p.def = sched.label
		return p, nil
	}
	others := make([]bootEntry, 0, len(b.Others))
	seen := map[string]bool{b.Mode.Name: true}
	for _, o := range b.Others {
		if o.Mode == nil {
			return nil, errorf("menu entry without a mode")
		}
		if o.Mode.Name == b.Mode.Name {
			continue // the scheduled mode is already the first entry
		}
		if seen[o.Mode.Name] {
			return nil, errorf("mode %s appears twice in the menu", o.Mode.Name)
		}
		seen[o.Mode.Name] = true
		e, err := p.entry(b, o.Mode, o.Image)
		if err != nil {
			return nil, err
		}
		others = append(others, e)
	}
	// Scheduled first, then the others by name, whatever order the caller used.
	sort.Slice(others, func(i, j int) bool { return others[i].mode.Name < others[j].mode.Name })
	p.entries = append([]bootEntry{sched}, others...)

	// The fallback when the scheduled mode cannot boot: the first local-disk entry of the
	// menu, else the built-in local disk target, which is then shown as an item too.
	fallback := labelLocalDisk
	p.localItem = true
	for _, e := range p.entries {
		if e.localDisk {
			fallback, p.localItem = e.label, false
			break
		}
	}
	p.def = sched.label
	if sched.missing != "" {
		p.def = fallback
	}
	return p, nil
}

func (p *bootPlan) entry(b Boot, m *model.Mode, v *model.ImageVersion) (bootEntry, error) {
	if err := checkMode(m); err != nil {
		return bootEntry{}, err
	}
	e := bootEntry{label: "mode-" + m.Name, mode: m, image: v}
	if v != nil {
		if err := checkImageVersion(v); err != nil {
			return e, err
		}
		if m.Image == "" {
			return e, errorf("mode %s boots no image, but image version %s was given", m.Name, v.Version)
		}
		if m.ImageVersion != "" && v.Version != m.ImageVersion {
			return e, errorf("mode %s is pinned to %s %s, but version %s was given", m.Name, m.Image, m.ImageVersion, v.Version)
		}
	}
	switch {
	case m.Kind == model.KindLocalDisk:
		e.localDisk = true
		return e, nil
	case m.Image != "" && v == nil && m.ImageVersion != "":
		e.missing = fmt.Sprintf("image %s version %s is not published", m.Image, m.ImageVersion)
		return e, nil
	case m.Image != "" && v == nil:
		e.missing = fmt.Sprintf("image %s has no published version", m.Image)
		return e, nil
	case m.Image == "" && m.Kernel == "":
		e.missing = "mode has neither an image nor a kernel"
		return e, nil
	case v != nil && nfsServer(b.Server) == "":
		e.missing = "boot server " + b.Server.Name + " has no NFS server to mount the image from"
		return e, nil
	}
	if b.Check != nil {
		if why := b.Check(m, v); why != "" {
			e.missing = why
			return e, nil
		}
	}
	var err error
	if e.kernel, err = KernelURL(b.Server, m, v); err != nil {
		return e, err
	}
	if e.initrd, err = InitrdURL(b.Server, m, v); err != nil {
		return e, err
	}
	if e.cmdline, err = KernelCommandLine(b.Server, b.Host, m, v); err != nil {
		return e, err
	}
	if b.Exam {
		// Last, so that it is the value a reader taking the last occurrence sees even if
		// the mode's own arguments name the parameter too.
		e.cmdline += " " + ExamKernelArg
	}
	return e, nil
}

// title is the menu title: who, what, and until when.
func (p *bootPlan) title() string {
	s := "Overtime: " + p.who + " - " + p.entries[0].mode.Name
	if p.until != "" {
		s += " until " + p.until
	}
	return s
}

// header writes the comment block shared by both boot script formats.
func (p *bootPlan) header(w *writer) {
	w.comment(generated)
	if p.host != "" {
		w.comment("Rendered per request for host " + p.host + " (" + p.mac + ") by boot server " + p.server + ".")
	} else {
		w.comment("Rendered per request for " + p.mac + ", not in the directory, by boot server " + p.server + ".")
	}
	if p.pool != "" {
		w.comment("Pool: " + p.pool)
	}
	sched := p.entries[0]
	s := "Scheduled mode: " + sched.mode.Name + " (" + string(sched.mode.Kind) + ")"
	if p.until != "" {
		s += " until " + p.until
	} else {
		s += ", no change scheduled"
	}
	w.comment(s)
	if p.reason != "" {
		w.comment("Reason: " + commentText(p.reason))
	}
	if p.exam {
		w.comment("Exam: no menu, no local disk, no shell; a failure retries this mode.")
	}
	switch {
	case sched.missing != "" && p.exam:
		w.comment("Cannot boot the scheduled mode (" + commentText(sched.missing) + "): retrying, the exam allows no other.")
	case sched.missing != "":
		w.comment("Cannot boot the scheduled mode (" + commentText(sched.missing) + "): defaulting to the local disk.")
	}
}

// deciseconds rounds a duration up to tenths of a second, at least 1 (0 means "forever"
// to PXELINUX).
func deciseconds(d time.Duration) int {
	n := int(math.Ceil(float64(d) / float64(100*time.Millisecond)))
	if n < 1 {
		n = 1
	}
	return n
}

// milliseconds is the iPXE counterpart of deciseconds.
func milliseconds(d time.Duration) int64 {
	n := (d + time.Millisecond - 1) / time.Millisecond
	if n < 1 {
		n = 1
	}
	return int64(n)
}
