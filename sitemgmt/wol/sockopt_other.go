//go:build !unix && !windows

package wol

import "syscall"

// setBroadcast does nothing on platforms without BSD socket options (js, wasip1, plan9);
// unicast sends still work there, broadcasts fail with the platform's own error.
func setBroadcast(network, address string, c syscall.RawConn) error { return nil }
