// Package wol wakes hosts with Wake-on-LAN magic packets. The site manager's
// ResumeProgram uses it to power on desktops Slurm wants back in the cluster; a desktop
// that is off has no agent to talk to, so a packet its network card recognises is the
// only way in.
package wol

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// sends is how many copies of the packet Send transmits. UDP broadcasts are not
// acknowledged and are easily dropped by a busy switch or a card still negotiating its
// link; etherwake and wakeonlan repeat for the same reason, and a card that is already
// waking ignores the extra copies.
const sends = 3

// MagicPacket returns the Wake-on-LAN payload for mac: six 0xFF bytes followed by the
// MAC repeated 16 times (102 bytes). mac is parsed as net.ParseMAC does ("00:11:22:33:44:55",
// "00-11-22-33-44-55", "0011.2233.4455"), but only 6-byte EUI-48 addresses are accepted:
// network cards only match their own 48-bit address, so a longer one cannot wake anything.
func MagicPacket(mac string) ([]byte, error) {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return nil, fmt.Errorf("wol: %w", err)
	}
	if len(hw) != 6 {
		return nil, fmt.Errorf("wol: MAC address %q is %d bytes, want a 6-byte (EUI-48) address", mac, len(hw))
	}
	return append(bytes.Repeat([]byte{0xff}, 6), bytes.Repeat(hw, 16)...), nil
}

// Send sends the magic packet for mac as a UDP datagram to addr ("host:port", usually a
// broadcast address and the discard port 9, e.g. "10.31.0.255:9"), three times in a row.
// SO_BROADCAST is set on the socket because the kernel refuses to send to a broadcast
// address without it. ctx bounds name resolution and the writes; cancelling it aborts
// the remaining sends. Success means the datagrams left this host, not that the target
// woke: Wake-on-LAN has no reply.
func Send(ctx context.Context, addr string, mac string) error {
	// Dialing (a connected UDP socket) rather than ListenPacket+WriteTo lets the Dialer
	// resolve addr under ctx. Control runs before connect(2), which matters: Linux
	// rejects connecting to a broadcast address with EACCES unless SO_BROADCAST is
	// already set. Go's net package happens to enable SO_BROADCAST on every IPv4
	// datagram socket today, but that is undocumented; setting it here keeps Send
	// correct should that default ever change.
	d := net.Dialer{Control: setBroadcast}
	return SendWith(ctx, d.DialContext, addr, mac)
}

// Dialer makes the UDP socket SendWith writes to.
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// SendWith is Send with the socket made by dial: a boot server's tests send from inside
// a network namespace. dial must allow broadcast destinations (SO_BROADCAST).
func SendWith(ctx context.Context, dial Dialer, addr string, mac string) error {
	pkt, err := MagicPacket(mac)
	if err != nil {
		return err
	}
	conn, err := dial(ctx, "udp", addr)
	if err != nil {
		return fmt.Errorf("wol: send to %s: %w", addr, err)
	}
	defer conn.Close()

	if dl, ok := ctx.Deadline(); ok {
		if err := conn.SetWriteDeadline(dl); err != nil {
			return fmt.Errorf("wol: send to %s: %w", addr, err)
		}
	}
	// A deadline in the past makes a blocked or later Write fail at once; that is how
	// cancellation without a deadline reaches the socket.
	stop := context.AfterFunc(ctx, func() { conn.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()

	for range sends {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("wol: send to %s: %w", addr, err)
		}
		if _, err := conn.Write(pkt); err != nil {
			// Report the context's error rather than the i/o timeout it caused.
			if cerr := ctx.Err(); cerr != nil {
				err = cerr
			}
			return fmt.Errorf("wol: send to %s: %w", addr, err)
		}
	}
	return nil
}

// BroadcastAddr returns the directed broadcast address of the IPv4 subnet cidr with port,
// as "host:port" for Send, e.g. ("10.31.0.0/24", 9) -> "10.31.0.255:9". A directed
// broadcast reaches a subnet the site manager is not attached to, provided the router
// forwards it; the limited broadcast 255.255.255.255 never leaves the local link.
// Host bits in cidr are ignored ("10.31.0.7/24" is the same subnet). A /31 or /32 has no
// broadcast address proper; the all-ones address of the prefix is returned anyway, which
// there is simply a host, so the packet is unicast to it. IPv6 has no broadcast, so IPv6
// prefixes (including IPv4-mapped ones) are an error.
func BroadcastAddr(cidr string, port int) (string, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "", fmt.Errorf("wol: %w", err)
	}
	if !p.Addr().Is4() {
		return "", fmt.Errorf("wol: %q is not an IPv4 subnet; IPv6 has no broadcast", cidr)
	}
	if port < 1 || port > 65535 {
		return "", fmt.Errorf("wol: port %d out of range 1-65535", port)
	}
	a := p.Masked().Addr().As4()
	host := ^uint32(0) >> p.Bits() // Go defines a shift by 32 as 0: /32 has no host bits.
	for i := range a {
		a[i] |= byte(host >> (24 - 8*i))
	}
	return netip.AddrPortFrom(netip.AddrFrom4(a), uint16(port)).String(), nil
}

// setBroadcast is a net.Dialer Control func that enables SO_BROADCAST on an IPv4 socket
// before it is connected.
func setBroadcast(network, address string, c syscall.RawConn) error {
	// Broadcast is IPv4-only, so IPv6 sockets are left alone.
	if network != "udp4" {
		return nil
	}
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 1)
	}); err != nil {
		return err
	}
	return serr
}
