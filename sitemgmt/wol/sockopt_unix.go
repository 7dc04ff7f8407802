//go:build unix

package wol

import "syscall"

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
