package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/overtime-hpc/overtime/internal/netns"
)

// The reaper is a small child process that outlives a killed benchmark: the benchmark
// tells it each namespace and directory it creates and each one it has removed; when
// its stdin closes (the benchmark exited, however it exited) it removes what is left.
// Pdeathsig takes care of the processes (dnsmasq, the HTTP server, the load generator,
// slapd); namespaces and files are not processes.

var reaper struct {
	sync.Mutex
	w io.WriteCloser
}

// startReaper starts the reaper (best effort: without it a killed run leaves its
// namespaces to the next run's sweepStale).
func startReaper() {
	self, err := os.Executable()
	if err != nil {
		return
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "BOOTSTORM_ROLE=reaper")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // not in our process group: a ^C is for us
	w, err := cmd.StdinPipe()
	if err != nil {
		return
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return
	}
	go func() { _ = cmd.Wait() }()
	reaper.Lock()
	reaper.w = w
	reaper.Unlock()
}

// reaperTell sends "add|done ns|dir NAME" to the reaper, if there is one.
func reaperTell(verb, kind, name string) {
	reaper.Lock()
	defer reaper.Unlock()
	if reaper.w != nil {
		if _, err := fmt.Fprintf(reaper.w, "%s %s %s\n", verb, kind, name); err != nil {
			reaper.w = nil
		}
	}
}

func reaperMain() {
	signal.Ignore(os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	left := map[string]bool{} // "ns NAME" / "dir PATH"
	var order []string
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		verb, item, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch verb {
		case "add":
			if !left[item] {
				order = append(order, item)
			}
			left[item] = true
		case "done":
			delete(left, item)
		}
	}
	for i := len(order) - 1; i >= 0; i-- {
		item := order[i]
		if !left[item] {
			continue
		}
		kind, name, _ := strings.Cut(item, " ")
		switch kind {
		case "ns":
			if err := (&netns.NS{Name: name}).Close(); err == nil {
				fmt.Fprintf(os.Stderr, "bootstorm reaper: removed namespace %s\n", name)
			}
		case "dir":
			_ = os.RemoveAll(name)
		}
	}
}
