package slurmlab

import (
	"bufio"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// The test compute guest: until the compute guest image recipe exists (images/), tests
// build a small root with exactly what a Slurm node needs — slurmd, slurmstepd, munged,
// Slurm's plugins, the Overtime SPANK plugin, each with the shared libraries ldd finds,
// and busybox for a shell — and publish it as a squashfs the way production images are
// published. Its init gets an address by DHCP, starts munged and runs slurmd as a
// dynamic node named after its host (OVERTIME_HOST, set by the node agent).

// slurmPluginDir is Debian's Slurm plugin directory (also holds libslurmfull.so).
const slurmPluginDir = "/usr/lib/x86_64-linux-gnu/slurm-wlm"

// guestInit is the guest's /init. Settings come from /etc/overtime-guest.env (baked per
// test: the munge socket path and the controller) and from the node agent's environment.
const guestInit = `#!/bin/sh
# Overtime test compute guest: DHCP, munge, slurmd as a dynamic node.
. /etc/overtime-guest.env
ip link set lo up
ip link set eth0 up
udhcpc -i eth0 -s /etc/udhcpc.script -q -n -t 20 -T 1 || { echo "guest: no DHCP lease"; exit 1; }
mkdir -p /var/spool/slurmd /run/overtime /run/munge "$(dirname "$MUNGE_SOCKET")" /var/lib/munge /var/log/munge
echo "$OVERTIME_AGENT_URL" > /run/overtime/agent-url
# The munge key: the agent's hand-over from the site manager (never in the image), as
# the production guest's init installs it (scheduler-plugin/guest/guest-init).
[ -s /run/secrets/munge.key ] || { echo "guest: no munge key at /run/secrets/munge.key"; exit 1; }
cp /run/secrets/munge.key /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
# slurmd fetches its configuration (configless) through munge's default socket, then uses
# the one slurm.conf names: the same daemon answers on both paths.
ln -sf /run/munge/munge.socket.2 "$MUNGE_SOCKET"
munged --force -S /run/munge/munge.socket.2 --key-file=/etc/munge/munge.key --pid-file=/run/munged.pid \
	--log-file=/run/munged.log --seed-file=/run/munged.seed || { echo "guest: munged failed"; cat /run/munged.log; exit 1; }
echo "guest: $OVERTIME_HOST up, agent $OVERTIME_AGENT_URL, controller $CONF_SERVER"
exec slurmd -D -Z -N "$OVERTIME_HOST" --conf-server "$CONF_SERVER" --conf "Feature=overtime CPUs=$GUEST_CPUS RealMemory=$GUEST_MEMORY_MB"
`

// udhcpcScript applies busybox udhcpc's lease.
const udhcpcScript = `#!/bin/sh
case "$1" in
bound|renew)
	ip addr flush dev "$interface"
	ip addr add "$ip/${mask:-24}" dev "$interface"
	[ -n "$router" ] && ip route replace default via "${router%% *}"
	echo "$ip $(hostname)" >> /etc/hosts
	echo "guest: lease $ip on $interface"
	;;
esac
exit 0
`

// buildGuestImage stages the root in dir/root and squashes it to dir/root.squashfs;
// mpi adds the Open MPI runtime (image_mpi.go).
func buildGuestImage(dir, spankSO string, mpi bool, env map[string]string) (string, error) {
	root := filepath.Join(dir, "root")
	files := map[string]bool{}
	for _, b := range []string{"/usr/sbin/slurmd", "/usr/sbin/slurmstepd", "/usr/sbin/munged", "/bin/busybox"} {
		files[b] = true
	}
	plugins, err := filepath.Glob(slurmPluginDir + "/*.so")
	if err != nil {
		return "", err
	}
	for _, p := range plugins {
		files[p] = true
	}
	files[spankSO] = true
	if mpi {
		m, err := mpiFiles()
		if err != nil {
			return "", err
		}
		for _, f := range m {
			files[f] = true
		}
	}
	// Shared libraries, by ldd (libraries a plugin needs but Debian did not install are
	// left out: slurmd loads only the configured plugins).
	for f := range maps.Clone(files) {
		if !isELF(f) {
			continue
		}
		libs, err := lddClosure(f)
		if err != nil {
			return "", err
		}
		for _, l := range libs {
			files[l] = true
		}
	}
	for f := range files {
		dst := filepath.Join(root, f)
		if f == spankSO {
			dst = filepath.Join(root, slurmPluginDir, "spank_overtime.so")
		}
		if err := copyFile(f, dst); err != nil {
			return "", err
		}
	}
	out, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		return "", fmt.Errorf("busybox --list: %w", err)
	}
	// PluginDir lists the submit host's build directory after Debian's: every directory
	// in it must exist on every node, so the guest has it (empty).
	for _, d := range []string{"bin", "sbin", "etc/munge", "etc/slurm", "proc", "sys", "dev", "run", "tmp", "var/spool/slurmd", "root", filepath.Dir(spankSO)[1:]} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return "", err
		}
	}
	os.Chmod(filepath.Join(root, "tmp"), 0o1777)
	for _, applet := range strings.Fields(string(out)) {
		link := filepath.Join(root, "bin", applet)
		if _, err := os.Lstat(link); err == nil || applet == "busybox" {
			continue
		}
		if err := os.Symlink("busybox", link); err != nil {
			return "", err
		}
	}
	var envFile strings.Builder
	for k, v := range env {
		fmt.Fprintf(&envFile, "%s=%q\nexport %s\n", k, v, k)
	}
	for name, f := range map[string]struct {
		body string
		mode os.FileMode
	}{
		"init":                   {guestInit, 0o755},
		"etc/udhcpc.script":      {udhcpcScript, 0o755},
		"etc/overtime-guest.env": {envFile.String(), 0o644},
		"etc/passwd":             {"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n", 0o644},
		"etc/group":              {"root:x:0:\nnogroup:x:65534:\n", 0o644},
		"etc/nsswitch.conf":      {"passwd: files\ngroup: files\nhosts: files dns\n", 0o644},
		"etc/hosts":              {"127.0.0.1 localhost\n", 0o644},
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(f.body), f.mode); err != nil {
			return "", err
		}
	}
	img := filepath.Join(dir, "root.squashfs")
	// No compression: built once per test run, read from local disk; speed wins.
	cmd := exec.Command("mksquashfs", root, img, "-noappend", "-all-root", "-noI", "-noD", "-noF", "-noX", "-quiet")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mksquashfs: %v: %s", err, out)
	}
	return img, nil
}

var lddLine = regexp.MustCompile(`(?:=>\s*)?(/\S+)\s+\(0x`)

// lddClosure lists the shared objects f loads (ldd resolves the whole closure).
func lddClosure(f string) ([]string, error) {
	out, err := exec.Command("ldd", f).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "not a dynamic executable") || strings.Contains(string(out), "statically linked") {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %v: %s", f, err, out)
	}
	var libs []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if m := lddLine.FindStringSubmatch(sc.Text()); m != nil {
			libs = append(libs, m[1])
		}
	}
	return libs, nil
}

// copyFile copies src (following symlinks) to dst, keeping the mode.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, fi.Mode().Perm()&fs.ModePerm)
}
