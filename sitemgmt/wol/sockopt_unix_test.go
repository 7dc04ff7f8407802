//go:build unix

package wol

import (
	"os"
	"syscall"
	"testing"
)

// TestSetBroadcast checks setBroadcast on a socket that starts without SO_BROADCAST.
// Sockets made by the net package cannot show this, as Go already enables the option on
// them; a raw socket from syscall.Socket starts with the kernel default (off).
func TestSetBroadcast(t *testing.T) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	if err != nil {
		t.Skipf("cannot create socket: %v", err)
	}
	f := os.NewFile(uintptr(fd), "udp4")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	get := func() int {
		t.Helper()
		var v int
		var gerr error
		if err := rc.Control(func(fd uintptr) {
			v, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST)
		}); err != nil {
			t.Fatal(err)
		}
		if gerr != nil {
			t.Fatal(gerr)
		}
		return v
	}
	if get() != 0 {
		t.Fatal("SO_BROADCAST already set on a fresh socket")
	}
	if err := setBroadcast("udp6", "[::1]:9", rc); err != nil {
		t.Fatal(err)
	}
	if get() != 0 {
		t.Error("setBroadcast set SO_BROADCAST for udp6")
	}
	if err := setBroadcast("udp4", "127.0.0.1:9", rc); err != nil {
		t.Fatal(err)
	}
	if get() == 0 {
		t.Error("SO_BROADCAST not set after setBroadcast")
	}
}
