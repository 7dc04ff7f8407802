package signals

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// scanner sums the schedstat counters (run, run-queue wait, timeslices) of every task by differences
// between scans, so that a task that exits keeps what it accumulated while watched and
// totals never go back.
type scanner struct {
	proc  string
	self  int
	procs map[int]*proc
	n     int // scans done
	buf   []byte
	tids  []int // scratch
}

// proc is one process the scanner follows.
type proc struct {
	kernel  bool // kernel thread: never desktop work
	checked int  // scan at which kernel was decided (re-checked now and then: PIDs are reused)
	tasks   map[int]*task
	seen    int // last scan that listed it
	listed  int // last scan that read its task directory
}

type task struct {
	f                 *os.File // /proc/PID/task/TID/schedstat, kept open: one pread per scan
	run, wait, slices uint64
	seen              int
}

// scanResult is what changed since the previous scan.
type scanResult struct {
	deskRun, deskWait, guestWait time.Duration
	// deskSlices: timeslices the desktop's tasks ran (schedstat's third field, pcount:
	// one per time a task got a CPU, so about one per wake-up of a sleeping task).
	deskSlices uint64
	tasks      int
}

// kernelRecheck: scans between re-checks of a kernel-thread PID (a user process could
// reuse it after the kernel thread exits).
const kernelRecheck = 240

// taskRescan: scans between reads of a known process's task directory. In between only
// its known threads' open files are read (one pread each), which halves the system
// calls of a single-threaded process; a thread born meanwhile is found at the next
// rescan with its counters whole. Only a thread that is born and exits between two
// rescans (1 s at the Monitor's 250 ms) is missed.
const taskRescan = 4

func newScanner(procDir string) *scanner {
	return &scanner{proc: procDir, self: os.Getpid(), procs: map[int]*proc{}, buf: make([]byte, 128)}
}

func (s *scanner) close() {
	for _, p := range s.procs {
		for _, t := range p.tasks {
			t.f.Close()
		}
	}
	s.procs = map[int]*proc{}
}

// scan reads the counters of every task (of the guest's and desk's processes when desk
// is set; only the guest's when guestOnly) and returns the increments since the last
// scan. The first scan only sets the starting point.
func (s *scanner) scan(guest map[int]bool, desk []int, guestOnly bool) scanResult {
	s.n++
	var r scanResult
	var pids []int
	switch {
	case guestOnly || desk != nil:
		for p := range guest {
			pids = append(pids, p)
		}
		for _, p := range desk {
			if !guest[p] {
				pids = append(pids, p)
			}
		}
	default:
		pids = s.listPIDs()
	}
	for _, pid := range pids {
		if pid == s.self {
			continue // the agent: its canary and this scan are not desktop work
		}
		p := s.procs[pid]
		if p == nil || (p.kernel && s.n-p.checked >= kernelRecheck) {
			if p == nil {
				p = &proc{tasks: map[int]*task{}}
				s.procs[pid] = p
			}
			p.kernel, p.checked = isKernelThread(s.proc, pid), s.n
		}
		p.seen = s.n
		if p.kernel {
			continue
		}
		isGuest := guest[pid]
		run, wait, slices := s.scanProc(pid, p)
		r.tasks += len(p.tasks)
		if isGuest {
			r.guestWait += wait
		} else {
			r.deskRun += run
			r.deskWait += wait
			r.deskSlices += slices
		}
	}
	for pid, p := range s.procs {
		if p.seen != s.n {
			for _, t := range p.tasks {
				t.f.Close()
			}
			delete(s.procs, pid)
		}
	}
	if s.n == 1 {
		return scanResult{tasks: r.tasks}
	}
	return r
}

// scanProc reads the process's tasks and returns their increments.
func (s *scanner) scanProc(pid int, p *proc) (run, wait time.Duration, slices uint64) {
	dir := s.proc + "/" + strconv.Itoa(pid) + "/task"
	var tids []int
	if s.n-p.listed >= taskRescan || len(p.tasks) == 0 {
		tids = s.readdir(dir)
		p.listed = s.n
	} else {
		tids = s.tids[:0]
		for tid := range p.tasks {
			tids = append(tids, tid)
		}
		s.tids = tids
	}
	for _, tid := range tids {
		t := p.tasks[tid]
		isNew := t == nil
		if isNew {
			f, err := os.Open(dir + "/" + strconv.Itoa(tid) + "/schedstat")
			if err != nil {
				continue
			}
			t = &task{f: f}
			p.tasks[tid] = t
		}
		r, w, n, err := s.read(t.f)
		if err != nil {
			// Exited (ESRCH): what it ran since the last scan is lost with it.
			t.f.Close()
			delete(p.tasks, tid)
			continue
		}
		t.seen = s.n
		if isNew {
			if s.n > 1 {
				// Born since the last scan (or in a process first seen now, which the
				// next scans count by difference): its counters are this interval's.
				run += time.Duration(r)
				wait += time.Duration(w)
				slices += n
			}
		} else {
			if r >= t.run {
				run += time.Duration(r - t.run)
			}
			if w >= t.wait {
				wait += time.Duration(w - t.wait)
			}
			if n >= t.slices {
				slices += n - t.slices
			}
		}
		t.run, t.wait, t.slices = r, w, n
	}
	for tid, t := range p.tasks {
		if t.seen != s.n {
			t.f.Close()
			delete(p.tasks, tid)
		}
	}
	return run, wait, slices
}

// read preads "run wait slices" from an open schedstat file.
func (s *scanner) read(f *os.File) (run, wait, slices uint64, err error) {
	n, err := f.ReadAt(s.buf, 0)
	if n == 0 {
		if err == nil {
			err = errShort
		}
		return 0, 0, 0, err
	}
	return parseSchedstat(s.buf[:n])
}

// parseSchedstat parses "run-ns wait-ns timeslices". A kernel that writes only the
// first two fields gives slices 0 (the estimator then applies no per-slice baseline).
func parseSchedstat(b []byte) (run, wait, slices uint64, err error) {
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, 0, 0, errShort
	}
	if run, err = strconv.ParseUint(string(f[0]), 10, 64); err != nil {
		return 0, 0, 0, err
	}
	if wait, err = strconv.ParseUint(string(f[1]), 10, 64); err != nil {
		return 0, 0, 0, err
	}
	if len(f) >= 3 {
		if slices, err = strconv.ParseUint(string(f[2]), 10, 64); err != nil {
			return 0, 0, 0, err
		}
	}
	return run, wait, slices, nil
}

// listPIDs lists the numeric entries of /proc.
func (s *scanner) listPIDs() []int { return s.readdir(s.proc) }

// readdir lists a directory's numeric entries.
func (s *scanner) readdir(dir string) []int {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil && len(names) == 0 {
		return nil
	}
	out := make([]int, 0, len(names))
	for _, n := range names {
		if n == "" || n[0] < '0' || n[0] > '9' {
			continue
		}
		if v, err := strconv.Atoi(n); err == nil {
			out = append(out, v)
		}
	}
	return out
}

// pfKthread is PF_KTHREAD in /proc/PID/stat's flags.
const pfKthread = 0x00200000

// isKernelThread reads /proc/PID/stat's flags.
func isKernelThread(procDir string, pid int) bool {
	b, err := os.ReadFile(procDir + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 7 {
		return false
	}
	flags, err := strconv.ParseUint(string(f[6]), 10, 64)
	return err == nil && flags&pfKthread != 0
}

// processSchedstat sums the counters of a process's live tasks (one-off read).
func processSchedstat(procDir string, pid int) (run, wait time.Duration, err error) {
	dir := procDir + "/" + strconv.Itoa(pid) + "/task"
	f, err := os.Open(dir)
	if err != nil {
		return 0, 0, err
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	for _, n := range names {
		b, err := os.ReadFile(dir + "/" + n + "/schedstat")
		if err != nil {
			continue // exited meanwhile
		}
		r, w, _, err := parseSchedstat(b)
		if err == nil {
			run += time.Duration(r)
			wait += time.Duration(w)
		}
	}
	return run, wait, nil
}
