package wol

import "syscall"

// setBroadcast is a net.Dialer Control func that enables SO_BROADCAST on an IPv4 socket
// before it is connected. Windows needs its own file only because socket handles are
// syscall.Handle there, not int.
func setBroadcast(network, address string, c syscall.RawConn) error {
	// Broadcast is IPv4-only, and Windows rejects the option on IPv6 sockets.
	if network != "udp4" {
		return nil
	}
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(syscall.Handle(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 1)
	}); err != nil {
		return err
	}
	return serr
}
