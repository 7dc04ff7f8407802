package sensor

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// inotify is a non-blocking inotify instance in Go's poller: a read waits in the poller,
// not in a thread, and Close ends it.
type inotify struct {
	f  *os.File
	fd int

	mu     sync.Mutex
	closed bool
}

type inotifyEvent struct {
	wd   int
	mask uint32
	name string
}

func newInotify() (*inotify, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	return &inotify{f: os.NewFile(uintptr(fd), "inotify"), fd: fd}, nil
}

// add watches path; it returns the watch descriptor (the same one for the same inode).
func (in *inotify) add(path string, mask uint32) (int, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return -1, os.ErrClosed
	}
	wd, err := unix.InotifyAddWatch(in.fd, path, mask)
	if err != nil {
		return -1, &os.PathError{Op: "inotify_add_watch", Path: path, Err: err}
	}
	return wd, nil
}

func (in *inotify) rm(wd int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.closed {
		_, _ = unix.InotifyRmWatch(in.fd, uint32(wd))
	}
}

func (in *inotify) close() {
	in.mu.Lock()
	in.closed = true
	in.mu.Unlock()
	in.f.Close()
}

// run reads events until the instance is closed and delivers each read's events on ch.
// It closes ch when it ends.
func (in *inotify) run(ch chan<- []inotifyEvent, stop <-chan struct{}) {
	defer close(ch)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := in.f.Read(buf)
		if err != nil {
			return // closed: nothing else fails on a valid inotify descriptor
		}
		var evs []inotifyEvent
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			raw := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := ""
			if raw.Len > 0 {
				b := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(raw.Len)]
				if i := bytes.IndexByte(b, 0); i >= 0 {
					b = b[:i]
				}
				name = string(b)
			}
			evs = append(evs, inotifyEvent{wd: int(raw.Wd), mask: raw.Mask, name: name})
			off += unix.SizeofInotifyEvent + int(raw.Len)
		}
		select {
		case ch <- evs:
		case <-stop:
			return
		}
	}
}
