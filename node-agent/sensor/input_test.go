package sensor

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCoalescer: the first event of a source goes out at once, later ones within the
// window are held and the latest of them goes out when the window ends; after a quiet
// window the next event goes out at once again; sources are independent.
func TestCoalescer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ev := func(src string, ms int) Event { return Event{Kind: KindInput, Source: src, Time: at(ms)} }
	c := newCoalescer(250 * time.Millisecond)

	if !c.add(ev("a", 0), at(0)) {
		t.Fatal("first event held")
	}
	if !c.add(ev("b", 10), at(10)) {
		t.Fatal("another source's first event held")
	}
	for _, ms := range []int{50, 120, 100} { // 100 arrives late: the latest time wins
		if c.add(ev("a", ms), at(ms)) {
			t.Fatalf("event at %d ms within the window went out", ms)
		}
	}
	if out, next := c.due(at(200)); len(out) != 0 || !next.Equal(at(250)) {
		t.Fatalf("due at 200 ms: %v, next %v (want nothing, next at 250 ms)", out, next)
	}
	out, next := c.due(at(251))
	if len(out) != 1 || !out[0].Time.Equal(at(120)) || !next.IsZero() {
		t.Fatalf("due at 251 ms: %v, next %v (want the event of 120 ms)", out, next)
	}
	// Within the window after the held event went out: held again.
	if c.add(ev("a", 300), at(300)) {
		t.Fatal("event 49 ms after the last one sent went out")
	}
	if out, _ := c.due(at(501)); len(out) != 1 || !out[0].Time.Equal(at(300)) {
		t.Fatalf("due at 501 ms: %v", out)
	}
	// Quiet since 501: the next one goes out at once.
	if !c.add(ev("a", 800), at(800)) {
		t.Fatal("first event after a quiet window held")
	}
	c.forget("a")
	if !c.add(ev("a", 810), at(810)) {
		t.Fatal("first event after forget held")
	}
}

// inputRecord is a struct input_event with a CLOCK_REALTIME timestamp (a FIFO cannot
// switch clocks as evdev devices do).
func inputRecord(t time.Time, typ, code uint16, value int32) []byte {
	b := make([]byte, inputEvSize)
	binary.NativeEndian.PutUint64(b[0:], uint64(t.Unix()))
	binary.NativeEndian.PutUint64(b[8:], uint64(t.Nanosecond()/1000))
	binary.NativeEndian.PutUint16(b[16:], typ)
	binary.NativeEndian.PutUint16(b[18:], code)
	binary.NativeEndian.PutUint32(b[20:], uint32(value))
	return b
}

type opened struct {
	path, name string
	err        error
}

// runSensor runs s until the test ends and checks that Run returned nil then. The
// channel is closed when Run returns (early: the error is reported by the next
// nextEvent).
func runSensor(t *testing.T, s Sensor) <-chan Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Event, 64)
	done := make(chan struct{})
	var runErr error
	go func() {
		runErr = s.Run(ctx, out)
		close(out) // Run sends nothing after it returned
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
			if runErr != nil {
				t.Errorf("Run: %v", runErr)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	return out
}

func nextEvent(t *testing.T, out <-chan Event, within time.Duration, what string) Event {
	t.Helper()
	select {
	case ev, ok := <-out:
		if !ok {
			t.Fatalf("the sensor stopped (see Run's error) while waiting for %s", what)
		}
		return ev
	case <-time.After(within):
		t.Fatalf("no event within %v: %s", within, what)
	}
	return Event{}
}

func noEvent(t *testing.T, out <-chan Event, during time.Duration, what string) {
	t.Helper()
	select {
	case ev, ok := <-out:
		if !ok {
			t.Fatalf("the sensor stopped (see Run's error): %s", what)
		}
		t.Fatalf("unexpected event %+v: %s", ev, what)
	case <-time.After(during):
	}
}

// TestInputFIFO: the input sensor on a device directory that does not exist yet, with
// FIFOs standing in for evdev nodes (the host has no /dev/input; TestInputInVM uses a real
// keyboard): the directory and a device appearing later are picked up, EV_SYN and system
// feedback (EV_LED) are no input, the first input goes out at once with the kernel's
// timestamp, a flood is coalesced to one event per window carrying the latest time, and a
// device whose writer goes away is dropped and picked up again when it reappears.
func TestInputFIFO(t *testing.T) {
	const window = 200 * time.Millisecond
	base := t.TempDir()
	dir := filepath.Join(base, "input")
	opens := make(chan opened, 8)
	out := runSensor(t, &Input{Dir: dir, Coalesce: window, Opened: func(path, name string, err error) {
		opens <- opened{path, name, err}
	}})

	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A node with another name is no device.
	if err := unix.Mkfifo(filepath.Join(dir, "mouse0"), 0o600); err != nil {
		t.Fatal(err)
	}
	plug := func() *os.File {
		t.Helper()
		tmp := filepath.Join(base, "fifo")
		if err := unix.Mkfifo(tmp, 0o600); err != nil {
			t.Fatal(err)
		}
		// Both ends held here, so that the sensor's non-blocking open finds a writer.
		w, err := os.OpenFile(tmp, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "event0")); err != nil {
			t.Fatal(err)
		}
		select {
		case o := <-opens:
			if o.err != nil || o.path != filepath.Join(dir, "event0") {
				t.Fatalf("Opened(%q, %q, %v), want event0", o.path, o.name, o.err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the new device was not opened")
		}
		return w
	}
	w := plug()
	write := func(recs ...[]byte) {
		t.Helper()
		var b []byte
		for _, r := range recs {
			b = append(b, r...)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}

	now := time.Now()
	write(inputRecord(now, evSyn, 0, 0), inputRecord(now, 0x11 /* EV_LED */, 1, 1), inputRecord(now, evSyn, 0, 0))
	noEvent(t, out, 300*time.Millisecond, "EV_SYN and EV_LED are no input")

	t1 := time.Now().Add(-5 * time.Millisecond)
	sent := time.Now()
	write(inputRecord(t1, 0x04 /* EV_MSC */, 4, 30), inputRecord(t1, evKey, 30, 1), inputRecord(t1, evSyn, 0, 0))
	ev := nextEvent(t, out, 2*time.Second, "first input")
	lat := time.Since(sent)
	if ev.Kind != KindInput || ev.Source != "input:event0" {
		t.Fatalf("event %+v", ev)
	}
	if d := ev.Time.Sub(t1); d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("event time %v, want the record's %v", ev.Time, t1)
	}
	if lat > 100*time.Millisecond {
		t.Errorf("the first input took %v to arrive (no coalescing delay expected)", lat)
	}
	t.Logf("first input: %v from write to event", lat)

	// A flood: every 20 ms for 600 ms. At most one event per window, the last carrying
	// the last record's time.
	floodStart := time.Now()
	var last time.Time
	var got []Event
	for i := 0; i < 30; i++ {
		last = time.Now().Truncate(time.Microsecond) // the record's resolution
		write(inputRecord(last, evRel, 0, 1), inputRecord(last, evSyn, 0, 0))
		select {
		case ev, ok := <-out:
			if !ok {
				t.Fatal("the sensor stopped")
			}
			got = append(got, ev)
		case <-time.After(20 * time.Millisecond):
		}
	}
	floodEnd := time.Now()
	for len(got) == 0 || !got[len(got)-1].Time.Equal(last) {
		got = append(got, nextEvent(t, out, 2*window, "the flood's last input"))
	}
	span := time.Since(floodStart)
	if max := int(span/window) + 2; len(got) > max {
		t.Errorf("%d events for %v of input (window %v): %v", len(got), floodEnd.Sub(floodStart), window, got)
	}
	if len(got) < 2 {
		t.Errorf("flood of %v gave %d events, want several", floodEnd.Sub(floodStart), len(got))
	}
	for i := 1; i < len(got); i++ {
		if !got[i].Time.After(got[i-1].Time) {
			t.Errorf("event %d time %v not after %v", i, got[i].Time, got[i-1].Time)
		}
	}
	t.Logf("flood of %v: %d events", floodEnd.Sub(floodStart), len(got))

	// Unplugged: the writer goes, the reader sees EOF; the node is replaced.
	w.Close()
	if err := os.Remove(filepath.Join(dir, "event0")); err != nil {
		t.Fatal(err)
	}
	w = plug()
	defer w.Close()
	// At the record's resolution and without a monotonic reading (Truncate strips it), so
	// that the comparison is of wall times: against time.Now() itself the truncated
	// microsecond and the clock's slew between two readings could pass 1 µs.
	t2 := time.Now().Truncate(time.Microsecond)
	write(inputRecord(t2, evAbs, 0, 100), inputRecord(t2, evSyn, 0, 0))
	ev = nextEvent(t, out, 2*time.Second, "input on the replugged device")
	if ev.Time.Sub(t2).Abs() > time.Microsecond {
		t.Errorf("replugged device: event time %v, want %v", ev.Time, t2)
	}
	select {
	case o := <-opens:
		t.Errorf("unexpected Opened(%q, %q, %v): mouse0 is no event device", o.path, o.name, o.err)
	default:
	}
}

// TestInputNoParent: without the device directory's parent the sensor cannot work, and
// says so at once.
func TestInputNoParent(t *testing.T) {
	err := (&Input{Dir: filepath.Join(t.TempDir(), "no", "input")}).Run(context.Background(), make(chan Event))
	if err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("Run: %v", err)
	}
}
