package bootlab

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Expose makes a TCP service of the host (to, e.g. a test's university directory on
// 127.0.0.1) reachable inside the lab at listen (e.g. ServerIP:636), so the lab's VMs
// reach it like a server of their network. Until the test ends, when every connection is
// closed (a VM that vanished without closing its own leaves nothing to wait for), or
// until Close: then the lab's VMs find nothing listening there, as when the server is
// down.
func (l *Lab) Expose(t testing.TB, listen, to string) *Exposed {
	t.Helper()
	ln, err := l.NS.Listen("tcp", listen)
	if err != nil {
		t.Fatalf("expose %s in the lab: %v", listen, err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
		done  bool
	)
	track := func(cs ...net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return false
		}
		for _, c := range cs {
			conns[c] = true
		}
		return true
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			ln.Close()
			mu.Lock()
			done = true
			for c := range conns {
				c.Close()
			}
			mu.Unlock()
			wg.Wait()
		})
	}
	t.Cleanup(stop)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", to)
			if err != nil {
				in.Close()
				continue
			}
			if !track(in, out) {
				in.Close()
				out.Close()
				return
			}
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(out, in); out.Close() }()
			go func() { defer wg.Done(); _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return &Exposed{stop: stop}
}

// Exposed is one service Expose made reachable in the lab.
type Exposed struct{ stop func() }

// Close stops the service being reachable: the listener is closed and every connection
// through it cut.
func (e *Exposed) Close() { e.stop() }
