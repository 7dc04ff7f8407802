//go:build unix && !linux

package slapdenv

import "syscall"

// sysProcAttr: only Linux has a parent-death signal; elsewhere an attached slapd is merely
// not put in a session of its own.
func sysProcAttr(attached bool) *syscall.SysProcAttr {
	if attached {
		return nil
	}
	return &syscall.SysProcAttr{Setsid: true}
}
