package libvirt

import (
	"archive/tar"
	"bytes"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/vocab/names"
)

// The configuration disk: what a VM guest needs from its agent and no image may carry —
// its host name (the Slurm NodeName), the agent's URL, its size, the cluster storage to
// mount, and its secrets (the munge key) — as a ustar archive on a second read-only disk
// (vdb; xvdb on Xen). A container guest gets the same as its init's environment and
// /run/secrets. A tar archive is a disk the guest reads with no driver, module or file
// system of its own (`tar -x -f /dev/vdb`), and libvirt labels it for QEMU like any other
// disk; it lives in the guest's state directory (tmpfs, 0700, root) and goes with it.
//
// In the archive:
//
//	overtime/guest.env      KEY='value' lines (sh-quoted): OVERTIME_HOST, OVERTIME_AGENT_URL,
//	                        OVERTIME_GUEST_CPUS, OVERTIME_GUEST_MEMORY_MB, and per cluster file
//	                        system OVERTIME_STORAGE_<N>='SERVER:EXPORT PATH' (N from 1)
//	secrets/NAME            each of Spec.Secrets, mode 0400
const (
	configFile = "guest-config.tar"
	configDev  = "vdb"
)

// hasConfig says whether the guest gets a configuration disk: compute guests do (their
// agent names the host); a course VM or a bare test guest does not.
func hasConfig(s guest.Spec) bool {
	return s.Host != "" || len(s.Secrets) > 0 || len(s.Storage) > 0
}

// shQuote is s as one single-quoted sh word.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// guestConfig renders the configuration disk's archive. Everything in it was validated
// by the site manager and is checked again here: a name that is not a plain file name,
// or text with a newline, is refused rather than written.
func guestConfig(s guest.Spec) ([]byte, error) {
	var env strings.Builder
	env.WriteString("# Written by the Overtime node agent for this guest (its configuration disk).\n")
	add := func(k, v string) error {
		if strings.ContainsAny(v, "\n\r\x00") {
			return fmt.Errorf("libvirt: guest %s: %s holds a line break", s.Name, k)
		}
		fmt.Fprintf(&env, "%s=%s\n", k, shQuote(v))
		return nil
	}
	if s.Host != "" {
		if err := names.Hostname(s.Host); err != nil {
			return nil, fmt.Errorf("libvirt: guest %s: host name: %w", s.Name, err)
		}
	}
	for _, kv := range [][2]string{{"OVERTIME_HOST", s.Host}, {"OVERTIME_AGENT_URL", s.AgentURL},
		{"OVERTIME_GUEST_CPUS", fmt.Sprint(s.VCPUs)}, {"OVERTIME_GUEST_MEMORY_MB", fmt.Sprint(s.MemoryMB)}} {
		if err := add(kv[0], kv[1]); err != nil {
			return nil, err
		}
	}
	for i, st := range s.Storage {
		v := st.Server + ":" + st.Export + " " + st.Path
		if strings.ContainsAny(st.Server+st.Export+st.Path, " \t") {
			return nil, fmt.Errorf("libvirt: guest %s: cluster storage %s: blanks in a server, export or path", s.Name, st)
		}
		if err := add(fmt.Sprintf("OVERTIME_STORAGE_%d", i+1), v); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// A fixed time: the archive is the same for the same spec (no clock in the guest's
	// view of it).
	mtime := time.Unix(0, 0)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: mtime, Format: tar.FormatUSTAR})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mtime, Format: tar.FormatUSTAR}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := dir("overtime", 0o755); err != nil {
		return nil, err
	}
	if err := file("overtime/guest.env", 0o644, []byte(env.String())); err != nil {
		return nil, err
	}
	if len(s.Secrets) > 0 {
		if err := dir("secrets", 0o700); err != nil {
			return nil, err
		}
		secretNames := make([]string, 0, len(s.Secrets))
		for n := range s.Secrets {
			secretNames = append(secretNames, n)
		}
		sort.Strings(secretNames)
		for _, n := range secretNames {
			if n == "" || n == "." || n == ".." || strings.ContainsAny(n, "/\x00") {
				return nil, fmt.Errorf("libvirt: guest %s: secret name %q is not a file name", s.Name, n)
			}
			if err := file("secrets/"+n, 0o400, s.Secrets[n]); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
