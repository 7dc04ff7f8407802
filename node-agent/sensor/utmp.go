package sensor

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Utmp follows login sessions in utmp and activity on their terminals; it works on every
// host, with or without logind, and covers what logind may not see (a text console, an
// ssh login without pam_systemd).
//
// Sessions: the USER_PROCESS entries of the utmp file whose process is alive, remote when
// the entry names a host (an X display like ":0" is local). Run re-reads the file when
// inotify reports a change of it, and when a session's process exits (a pidfd in Go's
// poller, for sessions that end without a utmp update), and sends a KindSessions Event
// whenever the counts change (the first at once). utmp knows nothing of idleness:
// IdleSince and AllIdle stay zero.
//
// Activity: inotify on each session's terminal (/dev/pts/N, /dev/ttyN). The kernel
// reports reads of a character device like those of a file, so every read by the
// session's shell or editor — a key typed locally, over ssh or on the console — becomes a
// KindInput Event with Source "tty:pts/N", coalesced like device input. Nothing reads the
// terminal for this, and nothing polls.
type Utmp struct {
	Path     string        // default /run/utmp
	Coalesce time.Duration // default DefaultCoalesce
	// Output counts writes to a session's terminal as activity too. Off by default: a
	// build printing into an unattended terminal is not a person; the keys a person types
	// are read by the session's programs.
	Output bool
}

// DefaultUtmp is the utmp file of glibc systems.
const DefaultUtmp = "/run/utmp"

// The x86-64 (and every 64-bit glibc) struct utmp: 384 bytes.
const (
	utmpSize        = 384
	utmpUserProcess = 7
	utmpOffPID      = 4
	utmpOffLine     = 8
	utmpLenLine     = 32
	utmpOffUser     = 44
	utmpLenUser     = 32
	utmpOffHost     = 76
	utmpLenHost     = 256
)

type utmpEntry struct {
	typ  int16
	pid  int
	line string // "pts/3", "tty1"
	user string
	host string
}

func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// parseUtmp reads the entries of a utmp file's content (a torn last record is ignored).
func parseUtmp(b []byte) []utmpEntry {
	var out []utmpEntry
	for off := 0; off+utmpSize <= len(b); off += utmpSize {
		r := b[off : off+utmpSize]
		out = append(out, utmpEntry{
			typ:  int16(binary.NativeEndian.Uint16(r[0:])),
			pid:  int(int32(binary.NativeEndian.Uint32(r[utmpOffPID:]))),
			line: cstring(r[utmpOffLine : utmpOffLine+utmpLenLine]),
			user: cstring(r[utmpOffUser : utmpOffUser+utmpLenUser]),
			host: cstring(r[utmpOffHost : utmpOffHost+utmpLenHost]),
		})
	}
	return out
}

func (e utmpEntry) remote() bool { return e.host != "" && !strings.HasPrefix(e.host, ":") }

// Run follows utmp until ctx is done. It fails at once only when the file's directory
// cannot be watched.
func (u *Utmp) Run(ctx context.Context, out chan<- Event) error {
	path := u.Path
	if path == "" {
		path = DefaultUtmp
	}
	path = filepath.Clean(path)
	in, err := newInotify()
	if err != nil {
		return fmt.Errorf("utmp: %w", err)
	}
	r := &utmpRun{u: u, ctx: ctx, out: out, path: path, in: in,
		ttyByWD: map[int]string{}, wdByTTY: map[string]int{}, pids: map[int]*os.File{},
		exited: make(chan int, 8), stop: make(chan struct{}), co: newCoalescer(u.Coalesce),
		timer: time.NewTimer(time.Hour)}
	r.timer.Stop()
	defer r.shutdown()
	dirWD, err := in.add(filepath.Dir(path), unix.IN_MODIFY|unix.IN_CLOSE_WRITE|unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_ONLYDIR)
	if err != nil {
		return fmt.Errorf("utmp: %w", err)
	}
	inoCh := make(chan []inotifyEvent, 4)
	r.wg.Add(1)
	go func() { defer r.wg.Done(); in.run(inoCh, r.stop) }()

	first := true
	var cur Sessions
	update := func() bool {
		s := r.read()
		if first || !s.Equal(cur) {
			first = false
			cur = s
			return send(ctx, out, Event{Kind: KindSessions, Time: time.Now(), Source: "utmp", Sessions: s})
		}
		return true
	}
	if !update() {
		return nil
	}
	base := filepath.Base(path)
	for {
		select {
		case <-ctx.Done():
			return nil
		case evs, ok := <-inoCh:
			if !ok {
				return errors.New("utmp: inotify ended")
			}
			changed := false
			now := time.Now()
			for _, ev := range evs {
				if ev.wd == dirWD {
					changed = changed || ev.name == base
					continue
				}
				line, ok := r.ttyByWD[ev.wd]
				if !ok || ev.mask&(unix.IN_ACCESS|unix.IN_MODIFY) == 0 {
					continue
				}
				e := Event{Kind: KindInput, Time: now, Source: "tty:" + line}
				if r.co.add(e, now) && !send(ctx, out, e) {
					return nil
				}
			}
			if changed && !update() {
				return nil
			}
			if !r.flush() {
				return nil
			}
		case pid := <-r.exited:
			if f := r.pids[pid]; f != nil {
				f.Close()
				delete(r.pids, pid)
			}
			if !update() {
				return nil
			}
		case <-r.timer.C:
			if !r.flush() {
				return nil
			}
		}
	}
}

type utmpRun struct {
	u       *Utmp
	ctx     context.Context
	out     chan<- Event
	path    string
	in      *inotify
	ttyByWD map[int]string
	wdByTTY map[string]int
	pids    map[int]*os.File // pidfds of the sessions' processes
	exited  chan int
	stop    chan struct{}
	wg      sync.WaitGroup
	co      *coalescer
	timer   *time.Timer
}

func (r *utmpRun) flush() bool {
	evs, next := r.co.due(time.Now())
	for _, ev := range evs {
		if !send(r.ctx, r.out, ev) {
			return false
		}
	}
	resetTimer(r.timer, next)
	return true
}

// read reads utmp and brings the terminal and process watches in line with its live
// sessions.
func (r *utmpRun) read() Sessions {
	b, _ := os.ReadFile(r.path) // missing: no sessions
	var s Sessions
	ttys := map[string]bool{}
	pids := map[int]bool{}
	for _, e := range parseUtmp(b) {
		if e.typ != utmpUserProcess || e.pid <= 0 || !r.alive(e.pid) {
			continue
		}
		pids[e.pid] = true
		if e.remote() {
			s.Remote++
		} else {
			s.Local++
		}
		if e.line != "" && !strings.Contains(e.line, "..") {
			ttys[e.line] = true
		}
	}
	for pid, f := range r.pids {
		if !pids[pid] {
			f.Close()
			delete(r.pids, pid)
		}
	}
	for line, wd := range r.wdByTTY {
		if !ttys[line] {
			r.in.rm(wd)
			delete(r.wdByTTY, line)
			delete(r.ttyByWD, wd)
			r.co.forget("tty:" + line)
		}
	}
	mask := uint32(unix.IN_ACCESS)
	if r.u.Output {
		mask |= unix.IN_MODIFY
	}
	for line := range ttys {
		if _, ok := r.wdByTTY[line]; ok {
			continue
		}
		p := filepath.Join("/dev", line)
		if st, err := os.Stat(p); err != nil || st.Mode()&os.ModeCharDevice == 0 {
			continue // ":0" of a display manager, or gone
		}
		if wd, err := r.in.add(p, mask); err == nil {
			r.wdByTTY[line] = wd
			r.ttyByWD[wd] = line
		}
	}
	return s
}

// alive tells whether pid runs, and watches it (a pidfd in the poller) so that its exit
// is noticed. Without pidfds (kernels before 5.3) it asks kill(pid, 0) and does not watch.
func (r *utmpRun) alive(pid int) bool {
	if _, ok := r.pids[pid]; ok {
		return true
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return false
		}
		err := unix.Kill(pid, 0)
		return err == nil || errors.Is(err, unix.EPERM)
	}
	// Readable: it has exited (a zombie not yet reaped counts as gone).
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	if n, _ := unix.Poll(pfd, 0); n > 0 {
		unix.Close(fd)
		return false
	}
	f := os.NewFile(uintptr(fd), fmt.Sprintf("pidfd:%d", pid))
	r.pids[pid] = f
	rc, err := f.SyscallConn()
	if err != nil {
		return true
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		// Ask the pidfd itself each time: the poller's readiness is reset when Read
		// starts, so an exit between os.NewFile's registration and this goroutine's
		// first run would otherwise be an edge nobody waits for any more.
		err := rc.Read(func(fd uintptr) bool {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, _ := unix.Poll(pfd, 0)
			return n > 0
		})
		if err != nil {
			return // closed: no longer watched
		}
		select {
		case r.exited <- pid:
		case <-r.stop:
		}
	}()
	return true
}

func (r *utmpRun) shutdown() {
	close(r.stop)
	r.in.close()
	for _, f := range r.pids {
		f.Close()
	}
	r.wg.Wait()
	r.timer.Stop()
}
