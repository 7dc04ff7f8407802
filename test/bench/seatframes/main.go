// Command seatframes is the seat benchmark's frame loop (docs/benchmarks/seat.md): an X11
// client that draws a picture into a window of its own at a fixed rate, as a video or a
// scrolling document does, and measures each frame from its start until the X server has
// drawn it. It runs in the booted desktop's graphical session (DISPLAY, XAUTHORITY), is
// built by the benchmark (CGO off: a static binary), and is never packaged.
//
// A frame: PutImage of a 320x200 picture (different each frame, so nothing is cached),
// then a GetInputFocus round trip, which the X server answers only after it has
// executed everything sent before it. A frame is missed when that answer comes after
// the frame's deadline (its start plus one period); the next frame then starts at the
// next period boundary, as a compositor would skip to the next vblank. Prints one JSON
// line: frames, missed, per-frame time quantiles, and frames per second.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// The picture: 320x200 at 32 bits per pixel is 256,000 bytes, under the core
// protocol's request limit (262,140 bytes) without BIG-REQUESTS.
const width, height = 320, 200

// Result is what the benchmark reads.
type Result struct {
	Frames  int     `json:"frames"`
	Missed  int     `json:"missed"`
	Seconds float64 `json:"seconds"`
	FPS     float64 `json:"fps"`   // frames drawn per second
	P50ms   float64 `json:"p50ms"` // frame time: start to the X server's answer
	P99ms   float64 `json:"p99ms"`
	MaxMs   float64 `json:"maxMs"`
	Rate    float64 `json:"rate"`   // the target frames per second
	Depth   byte    `json:"depth"`  // the window's depth
	Pixels  int     `json:"pixels"` // per frame
}

func main() {
	seconds := flag.Duration("for", 15*time.Second, "how long to draw")
	rate := flag.Float64("rate", 60, "frames per second to aim for")
	flag.Parse()
	r, err := run(*seconds, *rate)
	if err != nil {
		fmt.Fprintln(os.Stderr, "seatframes:", err)
		os.Exit(1)
	}
	b, _ := json.Marshal(r)
	fmt.Printf("SEATFRAMES %s\n", b)
}

func run(d time.Duration, rate float64) (*Result, error) {
	c, err := xgb.NewConn()
	if err != nil {
		return nil, fmt.Errorf("X display %q: %w", os.Getenv("DISPLAY"), err)
	}
	defer c.Close()
	screen := xproto.Setup(c).DefaultScreen(c)
	if screen.RootDepth != 24 && screen.RootDepth != 32 {
		return nil, fmt.Errorf("root depth %d: want 24 or 32 (32 bits per pixel)", screen.RootDepth)
	}
	win, err := xproto.NewWindowId(c)
	if err != nil {
		return nil, err
	}
	if err := xproto.CreateWindowChecked(c, screen.RootDepth, win, screen.Root, 40, 40, width, height, 0,
		xproto.WindowClassInputOutput, screen.RootVisual, xproto.CwBackPixel, []uint32{screen.BlackPixel}).Check(); err != nil {
		return nil, fmt.Errorf("create window: %w", err)
	}
	title := "overtime seat benchmark"
	xproto.ChangeProperty(c, xproto.PropModeReplace, win, xproto.AtomWmName, xproto.AtomString, 8, uint32(len(title)), []byte(title))
	if err := xproto.MapWindowChecked(c, win).Check(); err != nil {
		return nil, fmt.Errorf("map window: %w", err)
	}
	gc, err := xproto.NewGcontextId(c)
	if err != nil {
		return nil, err
	}
	if err := xproto.CreateGCChecked(c, gc, xproto.Drawable(win), 0, nil).Check(); err != nil {
		return nil, fmt.Errorf("create gc: %w", err)
	}
	// The first frames wait for the window manager to map the window: not measured.
	img := make([]byte, width*height*4)
	for i := 0; i < 10; i++ {
		draw(c, win, gc, screen.RootDepth, img, i)
	}

	period := time.Duration(float64(time.Second) / rate)
	var times []time.Duration
	missed := 0
	start := time.Now()
	next := start
	for frame := 0; time.Since(start) < d; frame++ {
		t0 := time.Now()
		if err := draw(c, win, gc, screen.RootDepth, img, frame); err != nil {
			return nil, err
		}
		took := time.Since(t0)
		times = append(times, took)
		deadline := next.Add(period)
		if time.Now().After(deadline) {
			missed++
			// The next frame starts at the next period boundary after now.
			late := time.Since(next)
			next = next.Add((late/period + 1) * period)
		} else {
			next = deadline
		}
		time.Sleep(time.Until(next))
	}
	wall := time.Since(start)
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	q := func(p float64) float64 {
		return float64(times[int(p*float64(len(times)-1))]) / float64(time.Millisecond)
	}
	return &Result{Frames: len(times), Missed: missed, Seconds: wall.Seconds(),
		FPS: float64(len(times)-missed) / wall.Seconds(), P50ms: q(0.5), P99ms: q(0.99), MaxMs: q(1),
		Rate: rate, Depth: screen.RootDepth, Pixels: width * height}, nil
}

// draw paints frame n's picture (a diagonal gradient that moves) and waits until the X
// server has executed it.
func draw(c *xgb.Conn, win xproto.Window, gc xproto.Gcontext, depth byte, img []byte, n int) error {
	for y := 0; y < height; y++ {
		row := img[y*width*4:]
		for x := 0; x < width; x++ {
			v := byte(x + y + 3*n)
			row[x*4], row[x*4+1], row[x*4+2] = v, byte(y+n), byte(x-n)
		}
	}
	xproto.PutImage(c, xproto.ImageFormatZPixmap, xproto.Drawable(win), gc, width, height, 0, 0, 0, depth, img)
	if _, err := xproto.GetInputFocus(c).Reply(); err != nil {
		return fmt.Errorf("X server: %w", err)
	}
	return nil
}
