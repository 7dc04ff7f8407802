package wol

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMagicPacket(t *testing.T) {
	mac := []byte{0x00, 0x11, 0x22, 0xaa, 0xbb, 0xcc}
	for _, in := range []string{
		"00:11:22:aa:bb:cc",
		"00:11:22:AA:BB:CC",
		"00-11-22-aa-bb-cc",
		"0011.22aa.bbcc",
	} {
		t.Run(in, func(t *testing.T) {
			got, err := MagicPacket(in)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 102 {
				t.Fatalf("len = %d, want 102", len(got))
			}
			if !bytes.Equal(got[:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) {
				t.Errorf("header = % x, want six ff", got[:6])
			}
			for i := range 16 {
				if rep := got[6+6*i : 12+6*i]; !bytes.Equal(rep, mac) {
					t.Errorf("repetition %d = % x, want % x", i, rep, mac)
				}
			}
		})
	}
}

func TestMagicPacketErrors(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", "invalid MAC address"},
		{"00:11:22:33:44", "invalid MAC address"},
		{"00:11:22:33:44:gg", "invalid MAC address"},
		{"00:11:22:33:44:55:66", "invalid MAC address"},
		{"not a mac", "invalid MAC address"},
		{"00:11:22:33:44:55:66:77", "8 bytes, want a 6-byte (EUI-48)"},              // EUI-64
		{"00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01", "20 bytes"}, // InfiniBand
		{"0011.2233.4455.6677", `"0011.2233.4455.6677" is 8 bytes`},
	} {
		t.Run(tt.in, func(t *testing.T) {
			got, err := MagicPacket(tt.in)
			if err == nil {
				t.Fatalf("MagicPacket(%q) = % x, want error", tt.in, got)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("MagicPacket(%q) error = %q, want it to contain %q", tt.in, err, tt.want)
			}
		})
	}
}

func TestBroadcastAddr(t *testing.T) {
	for _, tt := range []struct {
		cidr string
		port int
		want string
	}{
		{"10.31.0.0/24", 9, "10.31.0.255:9"},
		{"10.31.0.7/24", 9, "10.31.0.255:9"}, // host bits ignored
		{"172.16.0.0/16", 7, "172.16.255.255:7"},
		{"192.168.4.0/22", 9, "192.168.7.255:9"},
		{"10.0.0.0/8", 40000, "10.255.255.255:40000"},
		{"10.1.2.3/32", 9, "10.1.2.3:9"},
		{"10.1.2.2/31", 9, "10.1.2.3:9"},
		{"10.1.2.3/31", 9, "10.1.2.3:9"},
		{"0.0.0.0/0", 9, "255.255.255.255:9"},
	} {
		got, err := BroadcastAddr(tt.cidr, tt.port)
		if err != nil {
			t.Errorf("BroadcastAddr(%q, %d): %v", tt.cidr, tt.port, err)
			continue
		}
		if got != tt.want {
			t.Errorf("BroadcastAddr(%q, %d) = %q, want %q", tt.cidr, tt.port, got, tt.want)
		}
	}
}

func TestBroadcastAddrErrors(t *testing.T) {
	for _, tt := range []struct {
		cidr string
		port int
		want string
	}{
		{"", 9, "wol:"},
		{"10.31.0.0", 9, "no '/'"},
		{"10.31.0.0/33", 9, "prefix length out of range"},
		{"10.31.0.300/24", 9, "wol:"},
		{"host.example/24", 9, "wol:"},
		{"2001:db8::/64", 9, "not an IPv4 subnet"},
		{"::ffff:10.31.0.0/120", 9, "not an IPv4 subnet"},
		{"10.31.0.0/24", 0, "port 0 out of range"},
		{"10.31.0.0/24", 65536, "port 65536 out of range"},
		{"10.31.0.0/24", -1, "out of range"},
	} {
		got, err := BroadcastAddr(tt.cidr, tt.port)
		if err == nil {
			t.Errorf("BroadcastAddr(%q, %d) = %q, want error", tt.cidr, tt.port, got)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("BroadcastAddr(%q, %d) error = %q, want it to contain %q", tt.cidr, tt.port, err, tt.want)
		}
	}
}

// listen opens a UDP socket for Send to target and returns it with its address.
func listen(t *testing.T, addr string) *net.UDPConn {
	t.Helper()
	pc, err := net.ListenPacket("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc.(*net.UDPConn)
}

// receive reads n datagrams from pc and checks each equals want. The read deadline
// stands in for sleeping: datagrams already queued are returned at once, and a missing
// one fails the test after the deadline instead of hanging it.
func receive(t *testing.T, pc *net.UDPConn, n int, want []byte) {
	t.Helper()
	if err := pc.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1500)
	for i := range n {
		m, _, err := pc.ReadFrom(buf)
		if err != nil {
			t.Fatalf("datagram %d of %d: %v", i+1, n, err)
		}
		if !bytes.Equal(buf[:m], want) {
			t.Fatalf("datagram %d = % x, want % x", i+1, buf[:m], want)
		}
	}
	// Nothing beyond the n copies. A short deadline is enough: an extra copy would
	// have been written before the ones already read.
	if err := pc.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if m, _, err := pc.ReadFrom(buf); err == nil {
		t.Fatalf("unexpected extra datagram % x", buf[:m])
	}
}

func TestSend(t *testing.T) {
	pc := listen(t, "127.0.0.1:0")
	const mac = "52:54:00:12:34:56"
	want, err := MagicPacket(mac)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := Send(ctx, pc.LocalAddr().String(), mac); err != nil {
		t.Fatal(err)
	}
	receive(t, pc, sends, want)
}

// TestSendBroadcast sends to a broadcast address end to end without putting packets on
// a real network: Linux routes 127.255.255.255 as the loopback broadcast address, which
// the kernel only lets a socket with SO_BROADCAST send to.
func TestSendBroadcast(t *testing.T) {
	// Broadcasts are delivered to sockets bound to the wildcard address.
	pc := listen(t, "0.0.0.0:0")
	addr := net.JoinHostPort("127.255.255.255", strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port))

	const mac = "52:54:00:12:34:56"
	want, err := MagicPacket(mac)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := Send(ctx, addr, mac); err != nil {
		t.Fatal(err)
	}
	receive(t, pc, sends, want)
}

func TestSendErrors(t *testing.T) {
	pc := listen(t, "127.0.0.1:0")
	addr := pc.LocalAddr().String()

	t.Run("bad MAC", func(t *testing.T) {
		err := Send(context.Background(), addr, "00:11:22")
		if err == nil || !strings.Contains(err.Error(), "invalid MAC") {
			t.Fatalf("err = %v, want invalid MAC", err)
		}
	})
	t.Run("bad address", func(t *testing.T) {
		err := Send(context.Background(), "10.31.0.255", "52:54:00:12:34:56")
		if err == nil || !strings.Contains(err.Error(), "send to 10.31.0.255:") {
			t.Fatalf("err = %v, want error naming the address", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := Send(ctx, addr, "52:54:00:12:34:56")
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), addr) {
			t.Fatalf("err = %v, want context.Canceled naming %s", err, addr)
		}
	})
	t.Run("deadline passed", func(t *testing.T) {
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		err := Send(ctx, addr, "52:54:00:12:34:56")
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), addr) {
			t.Fatalf("err = %v, want context.DeadlineExceeded naming %s", err, addr)
		}
	})
	// None of the failed calls may have sent anything.
	if err := pc.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1500)
	if m, _, err := pc.ReadFrom(buf); err == nil {
		t.Fatalf("failed Send delivered % x", buf[:m])
	}
}

// TestSetBroadcast checks setBroadcast on a socket that starts without SO_BROADCAST.
// Sockets made by the net package cannot show this, as Go already enables the option on
// them; a raw socket from syscall.Socket starts with the kernel default (off).
func TestSetBroadcast(t *testing.T) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatalf("socket: %v", err)
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
