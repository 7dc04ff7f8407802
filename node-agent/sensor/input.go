package sensor

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Input watches the evdev devices in Dir (/dev/input/event*): keyboards, mice, touchpads,
// tablets. Devices that appear later are picked up through inotify on Dir (or, while Dir
// does not exist, on its parent); devices that go away (ENODEV) are dropped quietly.
//
// Each device is opened non-blocking and read through Go's poller: a goroutine per device
// sleeps in the poller until the kernel has input. The first input after a quiet period
// is sent at once; while input keeps coming (mouse motion is a flood), a device sends at
// most one Event per Coalesce, the latest input's time at the end of the interval.
//
// Event.Time is the kernel's timestamp of the input event: the device's clock is switched
// to CLOCK_MONOTONIC (EVIOCSCLOCKID), immune to clock steps, and converted to wall-clock
// time when read. Only event types are looked at, never codes or values (package doc).
type Input struct {
	Dir      string        // default /dev/input
	Coalesce time.Duration // default DefaultCoalesce (250 ms)
	// Opened, when set, is called from Run's goroutine for each device Run starts to read
	// (err nil; name is the device's name, e.g. "AT Translated Set 2 keyboard") and for
	// each it cannot open (err set; Run retries when the node's attributes change, as
	// when udev fixes its permissions). For logs and tests.
	Opened func(path, name string, err error)
}

// Linux input event types (linux/input-event-codes.h).
const (
	evSyn = 0x00 // framing: SYN_REPORT, SYN_DROPPED
	evKey = 0x01 // keys and buttons
	evRel = 0x02 // mouse motion, wheels
	evAbs = 0x03 // touchpads, tablets, joysticks
	evSw  = 0x05 // switches: lid, tablet mode
)

// isInput tells input by a person from framing and from what the system itself sends
// through a device (EV_MSC scan codes that only accompany EV_KEY, EV_LED, EV_SND, EV_REP,
// EV_FF, EV_PWR). Only the type is looked at.
func isInput(typ uint16) bool {
	return typ == evKey || typ == evRel || typ == evAbs || typ == evSw
}

// struct input_event: struct timeval (two longs), __u16 type, __u16 code, __s32 value:
// 24 bytes on 64-bit systems.
const (
	wordSize     = int(unsafe.Sizeof(uintptr(0)))
	inputEvSize  = 2*wordSize + 8
	inputEvTypeO = 2 * wordSize
)

// ioctl numbers of evdev (linux/input.h): _IOW('E', 0xa0, int) and _IOC(_IOC_READ, 'E',
// 0x06, len).
const evIOCSClockID = 0x400445a0

func evIOCGName(n int) uint { return 2<<30 | uint(n)<<16 | 'E'<<8 | 0x06 }

var eventNode = regexp.MustCompile(`^event[0-9]+$`)

type evdev struct {
	name string // event3
	f    *os.File
	mono bool // timestamps are CLOCK_MONOTONIC (else CLOCK_REALTIME)
}

type inputBatch struct {
	dev         *evdev
	first, last time.Time
}

// Run watches the devices until ctx is done. It fails at once only when Dir's parent
// does not exist or inotify cannot be used.
func (s *Input) Run(ctx context.Context, out chan<- Event) error {
	dir := s.Dir
	if dir == "" {
		dir = "/dev/input"
	}
	dir = filepath.Clean(dir)
	parent := filepath.Dir(dir)
	if st, err := os.Stat(parent); err != nil || !st.IsDir() {
		return fmt.Errorf("input: %s: not a directory (%v)", parent, err)
	}
	in, err := newInotify()
	if err != nil {
		return fmt.Errorf("input: %w", err)
	}
	r := &inputRun{s: s, ctx: ctx, out: out, dir: dir, in: in, dirWD: -1, parentWD: -1,
		devs: map[string]*evdev{}, failed: map[string]bool{},
		batches: make(chan inputBatch, 16), gone: make(chan *evdev, 4), stop: make(chan struct{}),
		co: newCoalescer(s.Coalesce), timer: time.NewTimer(time.Hour)}
	r.timer.Stop()
	inoCh := make(chan []inotifyEvent, 4)
	r.wg.Add(1)
	go func() { defer r.wg.Done(); in.run(inoCh, r.stop) }()
	defer r.shutdown()

	if err := r.watch(); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case evs, ok := <-inoCh:
			if !ok {
				return errors.New("input: inotify ended")
			}
			if err := r.handle(evs); err != nil {
				return err
			}
		case b := <-r.batches:
			if r.devs[b.dev.name] != b.dev {
				continue // closed meanwhile
			}
			now := time.Now()
			src := "input:" + b.dev.name
			ev := Event{Kind: KindInput, Time: b.first, Source: src}
			if r.co.add(ev, now) && !send(ctx, out, ev) {
				return nil
			}
			if b.last.After(b.first) {
				r.co.add(Event{Kind: KindInput, Time: b.last, Source: src}, now)
			}
			if !r.flush() {
				return nil
			}
		case d := <-r.gone:
			r.drop(d)
		case <-r.timer.C:
			if !r.flush() {
				return nil
			}
		}
	}
}

type inputRun struct {
	s               *Input
	ctx             context.Context
	out             chan<- Event
	dir             string
	in              *inotify
	dirWD, parentWD int
	devs            map[string]*evdev
	failed          map[string]bool
	batches         chan inputBatch
	gone            chan *evdev
	stop            chan struct{}
	wg              sync.WaitGroup
	co              *coalescer
	timer           *time.Timer
}

// flush sends the held events that are due and sets the timer for the next.
func (r *inputRun) flush() bool {
	evs, next := r.co.due(time.Now())
	for _, ev := range evs {
		if !send(r.ctx, r.out, ev) {
			return false
		}
	}
	resetTimer(r.timer, next)
	return true
}

const (
	dirMask    = unix.IN_CREATE | unix.IN_ATTRIB | unix.IN_DELETE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR
	parentMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_ONLYDIR
)

// watch watches the device directory and opens its devices, or, while it does not exist,
// watches its parent for it.
func (r *inputRun) watch() error {
	for {
		wd, err := r.in.add(r.dir, dirMask)
		if err == nil {
			r.dirWD = wd
			if r.parentWD >= 0 {
				r.in.rm(r.parentWD)
				r.parentWD = -1
			}
			r.scan()
			return nil
		}
		if !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("input: %w", err)
		}
		if r.parentWD >= 0 {
			return nil // already waiting for the directory
		}
		pwd, err := r.in.add(filepath.Dir(r.dir), parentMask)
		if err != nil {
			return fmt.Errorf("input: %w", err)
		}
		r.parentWD = pwd
		// Loop: the directory may have appeared before the parent's watch existed.
	}
}

func (r *inputRun) scan() {
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return // gone again: inotify says so
	}
	for _, e := range entries {
		if eventNode.MatchString(e.Name()) {
			r.open(e.Name())
		}
	}
}

func (r *inputRun) handle(evs []inotifyEvent) error {
	for _, ev := range evs {
		switch {
		case ev.wd == r.parentWD && r.parentWD >= 0:
			if ev.name == filepath.Base(r.dir) && ev.mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
				if err := r.watch(); err != nil {
					return err
				}
			}
		case ev.wd == r.dirWD && r.dirWD >= 0:
			if ev.mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
				// The directory went away: its devices with it. Wait for a new one.
				if ev.mask&unix.IN_IGNORED == 0 {
					r.in.rm(r.dirWD)
				}
				r.dirWD = -1
				for _, d := range r.devs {
					r.drop(d)
				}
				r.failed = map[string]bool{}
				if err := r.watch(); err != nil {
					return err
				}
				continue
			}
			if !eventNode.MatchString(ev.name) {
				continue
			}
			switch {
			case ev.mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0:
				if d := r.devs[ev.name]; d != nil {
					r.drop(d)
				}
				delete(r.failed, ev.name)
			case ev.mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
				r.open(ev.name)
			case ev.mask&unix.IN_ATTRIB != 0 && r.failed[ev.name]:
				r.open(ev.name) // permissions changed: try again
			}
		}
	}
	return nil
}

func (r *inputRun) open(name string) {
	if r.devs[name] != nil {
		return
	}
	path := filepath.Join(r.dir, name)
	d, devName, err := openEvdev(path, name)
	if err != nil {
		r.failed[name] = true
		if r.s.Opened != nil {
			r.s.Opened(path, "", err)
		}
		return
	}
	delete(r.failed, name)
	r.devs[name] = d
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		d.read(r.batches, r.gone, r.stop)
	}()
	if r.s.Opened != nil {
		r.s.Opened(path, devName, nil)
	}
}

func (r *inputRun) drop(d *evdev) {
	if r.devs[d.name] == d {
		delete(r.devs, d.name)
		r.co.forget("input:" + d.name)
	}
	d.f.Close()
}

func (r *inputRun) shutdown() {
	close(r.stop)
	r.in.close()
	for _, d := range r.devs {
		d.f.Close()
	}
	r.wg.Wait()
	r.timer.Stop()
}

// openEvdev opens a device non-blocking (so that its reads go through Go's poller) and
// switches its timestamps to CLOCK_MONOTONIC. A node that is not an evdev device (a FIFO
// in tests) keeps CLOCK_REALTIME timestamps.
func openEvdev(path, name string) (*evdev, string, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", &os.PathError{Op: "open", Path: path, Err: err}
	}
	var buf [256]byte
	devName := ""
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(evIOCGName(len(buf))), uintptr(unsafe.Pointer(&buf[0]))); e == 0 {
		devName = unix.ByteSliceToString(buf[:])
	}
	mono := unix.IoctlSetPointerInt(fd, evIOCSClockID, unix.CLOCK_MONOTONIC) == nil
	return &evdev{name: name, f: os.NewFile(uintptr(fd), path), mono: mono}, devName, nil
}

// read reads the device until it is closed or gone, sending the times of the first and
// the last input event of each read.
func (d *evdev) read(batches chan<- inputBatch, gone chan<- *evdev, stop <-chan struct{}) {
	buf := make([]byte, 64*inputEvSize)
	keep := 0
	for {
		n, err := d.f.Read(buf[keep:])
		if n > 0 {
			now := time.Now()
			var mono unix.Timespec
			_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono)
			n += keep
			var first, last time.Time
			off := 0
			for ; off+inputEvSize <= n; off += inputEvSize {
				rec := buf[off : off+inputEvSize]
				if !isInput(binary.NativeEndian.Uint16(rec[inputEvTypeO:])) {
					continue
				}
				t := d.wall(rec, now, mono)
				if first.IsZero() || t.Before(first) {
					first = t
				}
				if t.After(last) {
					last = t
				}
			}
			keep = copy(buf, buf[off:n]) // a partial record (only from a non-device)
			clear(buf[keep:n])
			if !first.IsZero() {
				select {
				case batches <- inputBatch{dev: d, first: first, last: last}:
				case <-stop:
					return
				}
			}
		}
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			// ENODEV (unplugged), EOF (a FIFO's writer left) or another failure: the
			// device is dropped quietly.
			select {
			case gone <- d:
			case <-stop:
			}
			return
		}
	}
}

// wall converts a record's timestamp to wall-clock time, relative to now (read with the
// monotonic clock mono right after the read): the result carries a monotonic reading.
func (d *evdev) wall(rec []byte, now time.Time, mono unix.Timespec) time.Time {
	var sec, usec int64
	if wordSize == 8 {
		sec = int64(binary.NativeEndian.Uint64(rec[0:]))
		usec = int64(binary.NativeEndian.Uint64(rec[8:]))
	} else {
		sec = int64(int32(binary.NativeEndian.Uint32(rec[0:])))
		usec = int64(int32(binary.NativeEndian.Uint32(rec[4:])))
	}
	ts := sec*1e9 + usec*1e3
	var ago time.Duration
	if d.mono {
		ago = time.Duration(mono.Nano() - ts)
	} else {
		ago = now.Sub(time.Unix(0, ts))
	}
	if ago < 0 {
		ago = 0
	}
	return now.Add(-ago)
}
