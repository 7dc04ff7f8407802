// Package tools finds external programs. Daemons and the programs slurmctld runs often
// have a PATH without the sbin directories, or none at all, so PATH alone is not enough.
package tools

import (
	"os"
	"os/exec"
	"path/filepath"
)

// Find resolves a program name: a name with a slash is taken as is, else PATH is
// searched, then dirs in order. It returns "" when nothing executable is found.
func Find(name string, dirs ...string) string {
	if filepath.Base(name) != name {
		return name
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}
