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
// closed (a VM that vanished without closing its own leaves nothing to wait for).
func (l *Lab) Expose(t testing.TB, listen, to string) {
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
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		done = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
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
}
