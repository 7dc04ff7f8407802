// Package cgroup is the node agent's one API over Linux control groups, v1 and v2, used by
// the agent itself and by every guest backend (the container backend places its guest in a
// group; the libvirt backend finds QEMU's group with FindByPID and throttles it).
//
// The layout is detected from /proc/self/mountinfo, never assumed:
//
//   - V2 (unified): one cgroup2 mount with controllers (Debian 12 desktops, systemd).
//   - V1 (legacy or hybrid): one mount per v1 controller (cpu, cpuacct, memory, freezer,
//     blkio, pids, ...; possibly co-mounted like "cpu,cpuacct"), and in the hybrid layout
//     also a cgroup2 mount without controllers. A V1 Group spans the controllers it needs
//     (cpu, cpuacct, memory, freezer, blkio, pids) and, on hybrid hosts, the cgroup2 mount
//     too: cgroup2 core files work without controllers, so per-group pressure (PSI) is
//     available there as well.
//
// A Group is named by its cgroup path ("/overtime/guest-a", as in /proc/PID/cgroup). On
// V1 a process may sit at different paths in different controllers (FindByPID keeps
// them apart); groups made with Hierarchy.Group use the same path in each.
//
// Every method reads or writes the cgroup files directly; errors name the file. Waiting
// (Freeze, Kill) polls with a deadline from the context (DefaultWait when it has none).
package cgroup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Version is the cgroup layout the hierarchy uses for resource control.
type Version int

const (
	V1 Version = 1 // legacy or hybrid: v1 controllers (a controller-less cgroup2 may be mounted too)
	V2 Version = 2 // unified
)

func (v Version) String() string { return "v" + strconv.Itoa(int(v)) }

// unifiedKey is the key of the cgroup2 hierarchy in a Group's paths.
const unifiedKey = ""

// v1Wanted are the v1 controllers a Group spans, in the order Path and Procs prefer them.
// cpuset is left out on purpose (a new cpuset group needs cpus/mems before it accepts a
// process, and the guest uses every CPU anyway); devices too (the container backend keeps
// device nodes out by dropping CAP_MKNOD).
var v1Wanted = []string{"cpu", "cpuacct", "memory", "freezer", "pids", "blkio"}

// v2Wanted are the controllers Create enables down to a v2 group.
var v2Wanted = []string{"cpu", "memory", "io", "pids"}

// v1Known are the names of v1 controllers (subsystems) as they appear in mount options.
var v1Known = map[string]bool{
	"cpuset": true, "cpu": true, "cpuacct": true, "blkio": true, "io": true, "memory": true,
	"devices": true, "freezer": true, "net_cls": true, "perf_event": true, "net_prio": true,
	"hugetlb": true, "pids": true, "rdma": true, "misc": true, "debug": true,
}

// DefaultWait bounds Freeze, Thaw and Kill when their context has no deadline.
var DefaultWait = 10 * time.Second

// ErrNotSupported is wrapped by errors for features the layout lacks (per-group pressure
// on V1 without cgroup2, a controller that is not mounted or not enabled).
var ErrNotSupported = errors.New("not supported by this cgroup layout")

type mount struct {
	dir  string // mount point
	root string // root of the mount within the hierarchy (mountinfo field 4)
}

// Hierarchy is the detected cgroup layout of this machine.
type Hierarchy struct {
	version Version
	unified *mount           // cgroup2 mount (V2, or hybrid V1); nil if none
	v1      map[string]mount // V1: controller -> mount
}

// Detect reads /proc/self/mountinfo and returns the machine's layout.
func Detect() (*Hierarchy, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	defer f.Close()
	return ParseMountinfo(f)
}

// ParseMountinfo builds the layout from mountinfo text (the format of /proc/PID/mountinfo).
// V1 wins when any v1 controller is mounted (legacy and hybrid layouts); V2 needs a cgroup2
// mount and no v1 controllers.
func ParseMountinfo(r io.Reader) (*Hierarchy, error) {
	h := &Hierarchy{v1: map[string]mount{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+4 {
			continue
		}
		fstype := fields[sep+1]
		m := mount{dir: UnescapeMountinfo(fields[4]), root: UnescapeMountinfo(fields[3])}
		switch fstype {
		case "cgroup2":
			if h.unified == nil {
				mm := m
				h.unified = &mm
			}
		case "cgroup":
			for _, o := range strings.Split(fields[sep+3], ",") {
				if v1Known[o] {
					if _, dup := h.v1[o]; !dup {
						h.v1[o] = m
					}
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cgroup: reading mountinfo: %w", err)
	}
	switch {
	case len(h.v1) > 0:
		h.version = V1
	case h.unified != nil:
		h.version = V2
		h.v1 = nil
	default:
		return nil, errors.New("cgroup: no cgroup filesystem mounted (neither cgroup2 nor v1 controllers in mountinfo)")
	}
	return h, nil
}

// NewUnified returns a V2 hierarchy on the cgroup2 filesystem mounted at dir, whatever
// else is mounted: on a hybrid host, the controller-less cgroup2 mount can exercise the
// v2 core (procs, freeze, kill, cpu.stat usage, pressure) but not the controllers.
func NewUnified(dir string) (*Hierarchy, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return nil, fmt.Errorf("cgroup: %w", &fs.PathError{Op: "statfs", Path: dir, Err: err})
	}
	const cgroup2Magic = 0x63677270
	if st.Type != cgroup2Magic {
		return nil, fmt.Errorf("cgroup: %s is not a cgroup2 mount", dir)
	}
	return &Hierarchy{version: V2, unified: &mount{dir: dir, root: "/"}}, nil
}

// UnescapeMountinfo decodes the octal escapes (\040 for a space) of a path field of
// /proc/PID/mountinfo.
func UnescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Version is V1 or V2.
func (h *Hierarchy) Version() Version { return h.version }

// UnifiedMount is the cgroup2 mount point ("" if none): the whole hierarchy on V2, the
// controller-less hybrid mount on V1.
func (h *Hierarchy) UnifiedMount() string {
	if h.unified == nil {
		return ""
	}
	return h.unified.dir
}

// Controllers lists the controllers available at the root: on V1 the mounted v1
// controllers, on V2 the root's cgroup.controllers.
func (h *Hierarchy) Controllers() ([]string, error) {
	if h.version == V2 {
		b, err := os.ReadFile(filepath.Join(h.unified.dir, "cgroup.controllers"))
		if err != nil {
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		return strings.Fields(string(b)), nil
	}
	var out []string
	for c := range h.v1 {
		out = append(out, c)
	}
	sort.Strings(out)
	return out, nil
}

// String describes the layout, e.g. "cgroup v1 (hybrid, cgroup2 at /sys/fs/cgroup/unified)".
func (h *Hierarchy) String() string {
	if h.version == V2 {
		return "cgroup v2 at " + h.unified.dir
	}
	if h.unified != nil {
		return "cgroup v1 (hybrid, cgroup2 at " + h.unified.dir + ")"
	}
	return "cgroup v1 (legacy)"
}

// Group returns the group at cgroup path rel ("overtime/guest-a" or "/overtime/guest-a"),
// the same path in every controller. It does not create it.
func (h *Hierarchy) Group(rel string) *Group {
	p := cleanPath(rel)
	g := &Group{h: h, paths: map[string]string{}}
	if h.version == V2 {
		g.paths[unifiedKey] = p
		return g
	}
	for _, c := range v1Wanted {
		if _, ok := h.v1[c]; ok {
			g.paths[c] = p
		}
	}
	if h.unified != nil {
		g.paths[unifiedKey] = p
	}
	return g
}

func cleanPath(p string) string {
	return path.Clean("/" + p) // "/.." cleans to "/": no escaping the hierarchy
}

// FindByPID returns the group pid is in (from /proc/PID/cgroup). On V1 the paths of the
// controllers may differ; Path reports the cpu controller's.
func (h *Hierarchy) FindByPID(pid int) (*Group, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, fmt.Errorf("cgroup: process %d: %w", pid, err)
	}
	defer f.Close()
	entries, err := ParseProcCgroup(f)
	if err != nil {
		return nil, fmt.Errorf("cgroup: /proc/%d/cgroup: %w", pid, err)
	}
	g := &Group{h: h, paths: map[string]string{}}
	if h.version == V2 {
		p, ok := entries[unifiedKey]
		if !ok {
			return nil, fmt.Errorf("cgroup: /proc/%d/cgroup has no cgroup2 (0::) entry", pid)
		}
		g.paths[unifiedKey] = p
		return g, nil
	}
	for _, c := range v1Wanted {
		if _, mounted := h.v1[c]; !mounted {
			continue
		}
		if p, ok := entries[c]; ok {
			g.paths[c] = p
		}
	}
	if p, ok := entries[unifiedKey]; ok && h.unified != nil {
		g.paths[unifiedKey] = p
	}
	if len(g.paths) == 0 {
		return nil, fmt.Errorf("cgroup: /proc/%d/cgroup names none of the mounted controllers", pid)
	}
	return g, nil
}

// Self is FindByPID(os.Getpid()).
func (h *Hierarchy) Self() (*Group, error) { return h.FindByPID(os.Getpid()) }

// ParseProcCgroup parses /proc/PID/cgroup text into controller -> path; the cgroup2 entry
// ("0::/path") has the key "", named v1 hierarchies ("name=systemd") keep their name.
func ParseProcCgroup(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("malformed line %q", line)
		}
		if parts[1] == "" {
			out[unifiedKey] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, sc.Err()
}

// Group is one control group (spanning several v1 controllers on V1).
type Group struct {
	h     *Hierarchy
	paths map[string]string // controller -> cgroup path; "" is the cgroup2 hierarchy
}

// Hierarchy is the layout the group lives in.
func (g *Group) Hierarchy() *Hierarchy { return g.h }

// primary is the controller key whose path is the group's name and whose cgroup.procs
// lists its processes.
func (g *Group) primary() string {
	if g.h.version == V2 {
		return unifiedKey
	}
	for _, c := range v1Wanted {
		if _, ok := g.paths[c]; ok {
			return c
		}
	}
	return unifiedKey
}

// Path is the group's cgroup path: the cgroup2 path on V2, the cpu controller's on V1.
func (g *Group) Path() string { return g.paths[g.primary()] }

// Paths is the group's path per controller ("" is the cgroup2 hierarchy).
func (g *Group) Paths() map[string]string {
	out := make(map[string]string, len(g.paths))
	for k, v := range g.paths {
		out[k] = v
	}
	return out
}

// Child is the group name below g (in every controller).
func (g *Group) Child(name string) *Group {
	c := &Group{h: g.h, paths: map[string]string{}}
	for k, p := range g.paths {
		c.paths[k] = path.Join(p, path.Clean("/"+name))
	}
	return c
}

// Parent is the group one level up (the root's parent is the root). libvirt, for one,
// keeps a domain's limits on the parent of QEMU's "emulator" group.
func (g *Group) Parent() *Group {
	c := &Group{h: g.h, paths: map[string]string{}}
	for k, p := range g.paths {
		c.paths[k] = path.Dir(p)
	}
	return c
}

// Dir is the directory of the group for controller (V1: "cpu", "memory", ...; "" the
// hybrid cgroup2 directory); on V2 the controller is ignored. "" if the group does not
// span that controller.
func (g *Group) Dir(controller string) string {
	if g.h.version == V2 {
		controller = unifiedKey
	}
	p, ok := g.paths[controller]
	if !ok {
		return ""
	}
	var m mount
	if controller == unifiedKey {
		if g.h.unified == nil {
			return ""
		}
		m = *g.h.unified
	} else {
		m = g.h.v1[controller]
	}
	rel := p
	if m.root != "/" && (p == m.root || strings.HasPrefix(p, m.root+"/")) {
		rel = strings.TrimPrefix(p, m.root)
	}
	return filepath.Join(m.dir, filepath.FromSlash(rel))
}

// dirs are the group's distinct directories (co-mounted controllers share one).
func (g *Group) dirs() []string {
	seen := map[string]bool{}
	var out []string
	keys := append(append([]string{}, v1Wanted...), unifiedKey)
	for _, k := range keys {
		if _, ok := g.paths[k]; !ok {
			continue
		}
		if d := g.Dir(k); d != "" && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// ctrlDir is Dir for a controller a feature needs, with a clear error when it is absent.
func (g *Group) ctrlDir(controller, feature string) (string, error) {
	if g.h.version == V2 {
		return g.Dir(unifiedKey), nil
	}
	if d := g.Dir(controller); d != "" {
		return d, nil
	}
	return "", fmt.Errorf("cgroup: %s needs the v1 %s controller, which is not mounted: %w", feature, controller, ErrNotSupported)
}

// Exists reports whether the group's directory exists.
func (g *Group) Exists() bool {
	st, err := os.Stat(g.Dir(g.primary()))
	return err == nil && st.IsDir()
}

// Mkdir creates the group's directories without touching cgroup.subtree_control. Used when
// the parent still holds processes (V2's no-internal-processes rule): Mkdir, AddProc to
// move them down, then Create.
func (g *Group) Mkdir() error {
	for _, d := range g.dirs() {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("cgroup: create %s: %w", d, unwrapPath(err))
		}
	}
	return nil
}

// Create makes the group. On V1 it creates the directory in every controller the group
// spans; on V2 it also enables cpu, memory, io and pids (those the parent offers) in the
// cgroup.subtree_control of each ancestor that does not yet pass them down. Existing
// groups are fine.
func (g *Group) Create() error {
	if err := g.Mkdir(); err != nil {
		return err
	}
	if g.h.version == V2 {
		return g.enableControllers()
	}
	return nil
}

func (g *Group) enableControllers() error {
	p := g.paths[unifiedKey]
	if p == "/" {
		return nil
	}
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := "/"
	var errs []error
	for _, s := range segs {
		child := path.Join(cur, s)
		parentDir := g.h.Group(cur).Dir(unifiedKey)
		childDir := g.h.Group(child).Dir(unifiedKey)
		have, err := readFields(filepath.Join(childDir, "cgroup.controllers"))
		if err != nil {
			return err
		}
		avail, err := readFields(filepath.Join(parentDir, "cgroup.controllers"))
		if err != nil {
			return err
		}
		for _, c := range v2Wanted {
			if have[c] || !avail[c] {
				continue
			}
			f := filepath.Join(parentDir, "cgroup.subtree_control")
			if err := writeFile(f, "+"+c); err != nil {
				if errors.Is(err, syscall.EBUSY) {
					err = fmt.Errorf("%w (the parent group holds processes: v2 allows controllers only in groups without processes of their own)", err)
				}
				errs = append(errs, err)
			}
		}
		cur = child
	}
	return errors.Join(errs...)
}

func readFields(file string) (map[string]bool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	out := map[string]bool{}
	for _, f := range strings.Fields(string(b)) {
		out[f] = true
	}
	return out, nil
}

// Remove deletes the group and every group below it (deepest first), in every controller.
// They must hold no processes (see Kill). A group that does not exist is not an error.
func (g *Group) Remove() error {
	var errs []error
	for _, d := range g.dirs() {
		if err := removeTree(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func removeTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := syscall.Rmdir(dir); err != nil && err != syscall.ENOENT {
		if err == syscall.EBUSY {
			n := 0
			if pids, perr := readPids(filepath.Join(dir, "cgroup.procs")); perr == nil {
				n = len(pids)
			}
			return fmt.Errorf("cgroup: remove %s: %w (%d processes in it)", dir, err, n)
		}
		return fmt.Errorf("cgroup: remove %s: %w", dir, err)
	}
	return nil
}

// AddProc moves process pid (all its threads) into the group, in every controller.
func (g *Group) AddProc(pid int) error {
	for _, d := range g.dirs() {
		if err := writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// Procs lists the processes directly in the group (not in groups below it).
func (g *Group) Procs() ([]int, error) {
	return readPids(filepath.Join(g.Dir(g.primary()), "cgroup.procs"))
}

// AllProcs lists the processes in the group and every group below it.
func (g *Group) AllProcs() ([]int, error) {
	var out []int
	err := filepath.WalkDir(g.Dir(g.primary()), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		pids, err := readPids(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		out = append(out, pids...)
		return nil
	})
	return out, err
}

func readPids(file string) ([]int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("cgroup: %s: bad pid %q", file, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// Kill kills every process in the group and below and waits until none is left. V2 uses
// cgroup.kill (Linux 5.14+); otherwise the group is frozen (when a freezer is available),
// every process gets SIGKILL and the group is thawed, until it is empty: nothing can fork
// its way out.
func (g *Group) Kill(ctx context.Context) error {
	ctx, cancel := withDefaultWait(ctx)
	defer cancel()
	if !g.Exists() {
		return nil
	}
	if g.h.version == V2 {
		kf := filepath.Join(g.Dir(unifiedKey), "cgroup.kill")
		if _, err := os.Stat(kf); err == nil {
			if err := writeFile(kf, "1"); err != nil {
				return err
			}
			return poll(ctx, "cgroup "+g.Path()+" empty after cgroup.kill", func() (bool, error) {
				pids, err := g.AllProcs()
				return len(pids) == 0, err
			})
		}
	}
	canFreeze := g.h.version == V2 || g.Dir("freezer") != ""
	return poll(ctx, "cgroup "+g.Path()+" empty after SIGKILL", func() (bool, error) {
		if canFreeze {
			_ = g.writeFreeze(true)
		}
		pids, err := g.AllProcs()
		if err != nil {
			return false, err
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if canFreeze {
			_ = g.writeFreeze(false)
		}
		return len(pids) == 0, nil
	})
}

// writeFile writes value to a cgroup file that must exist (no O_CREATE: a missing file
// means a missing controller or feature, and says so).
func writeFile(file, value string) error {
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("cgroup: write %q to %s: no such file (controller not enabled or not supported by this kernel): %w", value, file, ErrNotSupported)
		}
		return fmt.Errorf("cgroup: write %q to %s: %w", value, file, unwrapPath(err))
	}
	_, err = f.WriteString(value)
	cerr := f.Close()
	if err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cgroup: write %q to %s: %w", value, file, unwrapPath(err))
	}
	return nil
}

func readFile(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("cgroup: read %s: no such file (controller not enabled or not supported by this kernel): %w", file, ErrNotSupported)
		}
		return "", fmt.Errorf("cgroup: read %s: %w", file, unwrapPath(err))
	}
	return strings.TrimSpace(string(b)), nil
}

func exists(file string) bool {
	_, err := os.Stat(file)
	return err == nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func withDefaultWait(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultWait)
}

// poll calls cond until it reports true, ctx ends (the error names what), or cond fails.
// The interval grows from 1 ms to 20 ms.
func poll(ctx context.Context, what string, cond func() (bool, error)) error {
	d := time.Millisecond
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		last = err
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			if last != nil {
				return fmt.Errorf("cgroup: waiting for %s: %w (last error: %v)", what, ctx.Err(), last)
			}
			return fmt.Errorf("cgroup: waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
		if d < 20*time.Millisecond {
			d *= 2
		}
	}
}
