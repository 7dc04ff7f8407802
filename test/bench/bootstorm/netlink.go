package main

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// addrAdder puts leased addresses on the load generator's interface, one RTM_NEWADDR
// netlink request each (an `ip addr add` per client would fork 500 processes on the two
// cores the servers need). Safe for concurrent use.
type addrAdder struct {
	mu      sync.Mutex
	fd      int
	ifindex int
	seq     uint32
}

func newAddrAdder(ifindex int) (*addrAdder, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	return &addrAdder{fd: fd, ifindex: ifindex}, nil
}

func (a *addrAdder) Close() error { return unix.Close(a.fd) }

// Add adds addr/bits to the interface. An address that is already there is not an error
// (a client that is given the same lease twice).
func (a *addrAdder) Add(addr netip.Addr, bits int) error {
	if !addr.Is4() {
		return fmt.Errorf("not IPv4: %s", addr)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	ip := addr.As4()
	attr := func(typ uint16, val []byte) []byte {
		b := make([]byte, 4, 4+len(val))
		binary.NativeEndian.PutUint16(b[0:], uint16(4+len(val)))
		binary.NativeEndian.PutUint16(b[2:], typ)
		return append(b, val...)
	}
	body := []byte{unix.AF_INET, byte(bits), 0, unix.RT_SCOPE_UNIVERSE, 0, 0, 0, 0}
	binary.NativeEndian.PutUint32(body[4:], uint32(a.ifindex))
	body = append(body, attr(unix.IFA_LOCAL, ip[:])...)
	body = append(body, attr(unix.IFA_ADDRESS, ip[:])...)
	msg := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(body))
	binary.NativeEndian.PutUint32(msg[0:], uint32(unix.NLMSG_HDRLEN+len(body)))
	binary.NativeEndian.PutUint16(msg[4:], unix.RTM_NEWADDR)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL)
	binary.NativeEndian.PutUint32(msg[8:], a.seq)
	msg = append(msg, body...)
	if err := unix.Sendto(a.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	buf := make([]byte, 4096)
	for {
		n, _, err := unix.Recvfrom(a.fd, buf, 0)
		if err != nil {
			return fmt.Errorf("netlink recv: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return fmt.Errorf("netlink parse: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != a.seq || m.Header.Type != unix.NLMSG_ERROR || len(m.Data) < 4 {
				continue
			}
			errno := -int32(binary.NativeEndian.Uint32(m.Data[:4]))
			if errno == 0 || unix.Errno(errno) == unix.EEXIST {
				return nil
			}
			return fmt.Errorf("add address %s/%d: %w", addr, bits, unix.Errno(errno))
		}
	}
}
