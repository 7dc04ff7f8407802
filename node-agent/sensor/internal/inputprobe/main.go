// Command inputprobe runs the input sensor (sensor.Input) on a machine's real input
// devices and reports on stdout, for TestInputInVM (node-agent/sensor), which runs it in a
// QEMU VM whose emulated PS/2 keyboard gets keys from QEMU's monitor:
//
//	inputprobe: device PATH "NAME"        a device the sensor reads (or: device PATH error ERR)
//	inputprobe: mark N GUEST_NS           after a line "mark N" on stdin: the time now
//	inputprobe: event SOURCE T_NS RECV_NS an Event: its time (the kernel's timestamp) and
//	                                      when the probe received it, both wall clock in ns
//
// A line "quit" (or the end of stdin) ends it. Like the sensor, it never sees what was
// typed.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/sensor"
)

func main() {
	dir := flag.String("dir", "/dev/input", "input device directory")
	flag.Parse()
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf("inputprobe: "+format+"\n", args...)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan sensor.Event, 64)
	in := &sensor.Input{Dir: *dir, Opened: func(path, name string, err error) {
		if err != nil {
			say("device %s error %v", path, err)
			return
		}
		say("device %s %q", path, name)
	}}
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx, out) }()
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 2 && f[0] == "mark":
				say("mark %s %d", f[1], time.Now().UnixNano())
			case len(f) == 1 && f[0] == "quit":
				cancel()
				return
			}
		}
		cancel()
	}()
	for {
		select {
		case ev := <-out:
			recv := time.Now()
			say("event %s %d %d", ev.Source, ev.Time.UnixNano(), recv.UnixNano())
		case err := <-done:
			if err != nil {
				say("error %v", err)
				os.Exit(1)
			}
			say("done")
			return
		}
	}
}
