package slapdenv

import "syscall"

// sysProcAttr: attached servers get SIGKILL when the thread that started them dies (a test
// binary killed by -timeout must not leave slapd running); detached ones get a session of
// their own so that the terminal's signals (Ctrl-C in `make demo`) do not reach them.
func sysProcAttr(attached bool) *syscall.SysProcAttr {
	if attached {
		return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	return &syscall.SysProcAttr{Setsid: true}
}
