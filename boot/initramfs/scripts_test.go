package initramfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

// Host-side tests of the boot script's pure parts, run by the shell of the initrd
// (busybox ash from busybox-static) on this machine: much cheaper than a VM per case.

const busybox = "/bin/busybox"

// shell runs script with busybox sh in this directory after sourcing scripts/overtime,
// and returns its output. cmdline, when not empty, is shown as /proc/cmdline (a bind mount
// in a private mount namespace).
func shell(t *testing.T, cmdline, script string) string {
	t.Helper()
	needs.Servers(t, "busybox (Debian package busybox-static)", "root for unshare")
	if _, err := os.Stat(busybox); err != nil {
		t.Fatalf("%v (Debian package busybox-static)", err)
	}
	full := ". ./scripts/overtime\n" + script
	var cmd *exec.Cmd
	if cmdline != "" {
		f := filepath.Join(t.TempDir(), "cmdline")
		if err := os.WriteFile(f, []byte(cmdline+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd = exec.Command("unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
			`mount --bind "$1" /proc/cmdline && exec "$2" sh -c "$3"`, "sh", f, busybox, full)
	} else {
		cmd = exec.Command(busybox, "sh", "-c", full)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("busybox sh: %v\n%s", err, out)
	}
	return string(out)
}

// TestParams: 10-params reads the overtime.* arguments, defaults the optional ones, and
// rejects malformed values with a message naming the argument.
func TestParams(t *testing.T) {
	const sha = "AB12cd34ab12cd34ab12cd34ab12cd34ab12cd34ab12cd34ab12cd34ab12cd34"
	report := `p() { . ./scripts/overtime.d/10-params; }
if p >/dev/null; then
	echo "ok|$OT_SERVER|$OT_PATH|$OT_SHA256|$OT_SIZE|$OT_MODE|$OT_KIND|$OT_HOST|$OT_URL|$OT_VERIFY|$OT_OVERLAY_SIZE|$OT_NFS_OPTS|$OT_NFS_WAIT|$OT_BRIDGE"
else
	echo "error|$OT_ERROR"
fi`
	for _, c := range []struct {
		cmdline, want string
	}{
		{"ip=dhcp boot=overtime overtime.root=nfs:10.0.0.1:/srv/overtime/images/desktop/v1/root.squashfs overtime.sha256=" + sha +
			" overtime.size=123 overtime.mode=cluster overtime.kind=cluster overtime.host=pc-a04 overtime.url=http://10.0.0.1:8080/overtime mitigations=auto",
			"ok|10.0.0.1|/srv/overtime/images/desktop/v1/root.squashfs|" + strings.ToLower(sha) + "|123|cluster|cluster|pc-a04|http://10.0.0.1:8080/overtime|size|50%||600"},
		// Unknown PC, no checksum, every option given; a name as server.
		{"boot=overtime overtime.root=nfs:nfs.example.org:/export/dir overtime.mode=m overtime.kind=desktop overtime.url=http://b overtime.verify=sha256 overtime.overlay_size=2g overtime.nfs_opts=vers=4.2,timeo=50 overtime.nfs_wait=30",
			"ok|nfs.example.org|/export/dir|||m|desktop||http://b|sha256|2g|vers=4.2,timeo=50|30"},
		{"overtime.root=nfs:[fd00::1]:/srv/img/root.squashfs", "ok|[fd00::1]|/srv/img/root.squashfs|||||||size|50%||600"},
		// No globbing of arguments.
		{"overtime.root=nfs:s:/x overtime.host=* overtime.mode=/*", "ok|s|/x|||/*||*||size|50%||600"},
		{"boot=overtime overtime.mode=maint", "error|no overtime.root= on the kernel command line: this mode boots no image (the site manager leaves it out for modes with a kernel of their own)"},
		{"overtime.root=/srv/x", "error|overtime.root=/srv/x is not of the form nfs:SERVER:/PATH or disk:/dev/NAME"},
		{"overtime.root=nfs:/srv/x", "error|overtime.root=nfs:/srv/x is not of the form nfs:SERVER:/PATH or disk:/dev/NAME"},
		// A VM guest's own disk: messages name it disk:/dev/vda.
		{"boot=overtime overtime.root=disk:/dev/vda overtime.host=pc1", "ok|disk|/dev/vda|||||pc1||size|50%||600"},
		{"overtime.root=disk:/dev/", "error|overtime.root=disk:/dev/ does not name a block device (/dev/NAME, letters, digits, _ and -)"},
		{"overtime.root=disk:/dev/../etc/x", "error|overtime.root=disk:/dev/../etc/x does not name a block device (/dev/NAME, letters, digits, _ and -)"},
		{"overtime.root=disk:vda", "error|overtime.root=disk:vda is not of the form nfs:SERVER:/PATH or disk:/dev/NAME"},
		{"overtime.root=nfs::/srv/x", "error|overtime.root=nfs::/srv/x names no server"},
		{"overtime.root=nfs:s:/x overtime.verify=md5", "error|overtime.verify=md5 is not one of size, sha256, none"},
		{"overtime.root=nfs:s:/x overtime.sha256=abc", "error|overtime.sha256=abc has 3 hex digits, not 64"},
		{"overtime.root=nfs:s:/x overtime.sha256=" + strings.Repeat("g", 64), "error|overtime.sha256=" + strings.Repeat("g", 64) + " is not a hexadecimal SHA-256"},
		{"overtime.root=nfs:s:/x overtime.size=1k", "error|overtime.size=1k is not a number of bytes"},
		{"overtime.root=nfs:s:/x overtime.nfs_wait=forever", "error|overtime.nfs_wait=forever is not a number of seconds"},
		{"overtime.root=nfs:s:/x overtime.overlay_size=half", "error|overtime.overlay_size=half is not a tmpfs size (e.g. 50% or 4g)"},
		{"overtime.root=nfs:s:/x overtime.bridge=br0", "ok|s|/x|||||||size|50%||600|br0"},
		{"overtime.root=nfs:s:/x overtime.bridge=br0;reboot", "error|overtime.bridge=br0;reboot is not an interface name (letters, digits, . _ -, at most 15)"},
		{"overtime.root=nfs:s:/x overtime.bridge=a23456789012345x", "error|overtime.bridge=a23456789012345x is not an interface name (letters, digits, . _ -, at most 15)"},
	} {
		if !strings.Contains(c.cmdline, "overtime.bridge=") && strings.HasPrefix(c.want, "ok|") {
			c.want += "|"
		}
		got := strings.TrimSpace(shell(t, c.cmdline, report))
		if got != c.want {
			t.Errorf("cmdline %q:\n got %s\nwant %s", c.cmdline, got, c.want)
		}
	}
}

// TestBootEnvAPI: with overtime.api (a site whose API is HTTPS while the firmware's boot
// files stay on HTTP), boot.env names the API as OVERTIME_URL, what the agent and the seat
// talk to, and the boot files' server as OVERTIME_BOOT_URL; without it both are overtime.url.
func TestBootEnvAPI(t *testing.T) {
	for _, c := range []struct{ cmdline, want string }{
		{"overtime.root=nfs:s:/x overtime.url=http://10.0.0.1:8080 overtime.api=https://ot.example.org:8443/api", "https://ot.example.org:8443/api|http://10.0.0.1:8080"},
		{"overtime.root=nfs:s:/x overtime.url=http://10.0.0.1:8080", "http://10.0.0.1:8080|http://10.0.0.1:8080"},
	} {
		dir := t.TempDir()
		got := strings.TrimSpace(shell(t, c.cmdline, `. ./scripts/overtime.d/10-params >/dev/null && OT_RUN=`+dir+` && . ./scripts/overtime.d/70-bootenv >/dev/null && . `+dir+`/boot.env && echo "$OVERTIME_URL|$OVERTIME_BOOT_URL"`))
		if got != c.want {
			t.Errorf("cmdline %q: boot.env gives %s, want %s", c.cmdline, got, c.want)
		}
	}
}

// TestNFSOptions: overtime.nfs_opts replaces defaults of the same name and adds the rest.
func TestNFSOptions(t *testing.T) {
	const def = "ro,vers=3,proto=tcp,nolock,retry=0"
	for _, c := range []struct{ extra, want string }{
		{"", def},
		{"vers=4.2", "ro,proto=tcp,nolock,retry=0,vers=4.2"},
		{"nfsvers=4", "ro,proto=tcp,nolock,retry=0,nfsvers=4"},
		{"lock", "ro,vers=3,proto=tcp,retry=0,lock"},
		{"timeo=50,proto=udp", "ro,vers=3,nolock,retry=0,timeo=50,proto=udp"},
		{"*", def + ",*"},
	} {
		got := strings.TrimSpace(shell(t, "", `ot_nfs_options "`+def+`" "`+c.extra+`"`))
		if got != c.want {
			t.Errorf("extra %q: got %q, want %q", c.extra, got, c.want)
		}
	}
}

// TestQuote: boot.env values survive any characters when the file is sourced.
func TestQuote(t *testing.T) {
	for _, v := range []string{"", "plain", "it's", `"$HOME" $(id) ` + "`id`", `back\slash`, "two\nlines", "'''"} {
		script := `v=$(cat <<'OTEOF'
` + v + `
OTEOF
)
eval "w=$(ot_quote "$v")"
[ "$v" = "$w" ] && echo same || echo "differs: $(ot_quote "$v")"`
		if got := strings.TrimSpace(shell(t, "", script)); got != "same" {
			t.Errorf("value %q: %s", v, got)
		}
	}
}

// TestShellcheck: the boot script, its fragments, the hook and the test image's scripts
// pass shellcheck (the project's standard for shell).
func TestShellcheck(t *testing.T) {
	needs.Servers(t, "shellcheck (Debian package shellcheck)")
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Fatalf("shellcheck not found (Debian package shellcheck): %v", err)
	}
	frags, _ := filepath.Glob("scripts/overtime.d/*")
	args := append([]string{"-s", "sh", "-x", "scripts/overtime", "hooks/zz-overtime", "scripts/init-bottom/overtime",
		"../../images/testimage/build.sh", "../../images/testimage/init"}, frags...)
	if out, err := exec.Command(sc, args...).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

// TestIdentity: 65-identity copies agent.token from a real ext4 image (mounted by
// busybox in a private mount namespace; blkid is stubbed to name that image) and refuses
// a symbolic link, an oversized or empty file, a file others can read or that root does
// not own. Nothing of the token is printed. The checks other than owner and mode are the
// same for every file system; vfat's own mount options (owner root, umask 077) are
// checked where a Debian kernel mounts a real vfat disk: vm3 in test/pxe_test.go (the
// development machines' kernel has no vfat).
func TestIdentity(t *testing.T) {
	needs.Servers(t, "mkfs.ext4 (e2fsprogs)", "root for unshare and loop mounts")
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Fatalf("%v (Debian package e2fsprogs)", err)
	}
	const token = "ott_0123456789abcdef0123456789abcdef"
	type file struct {
		mode    os.FileMode
		uid     int
		content string
		symlink bool
	}
	for _, c := range []struct {
		name, fs string
		f        *file // nil: no agent.token
		want     string
	}{
		{"ext4", "ext4", &file{mode: 0o600, content: token + "\n"}, "overtime: host credential: RUN/agent.token from IMG (LABEL=OVERTIME-ID, read-only)|0:0 600 " + token},
		{"ext4 0400", "ext4", &file{mode: 0o400, content: token}, "overtime: host credential: RUN/agent.token from IMG (LABEL=OVERTIME-ID, read-only)|0:0 600 " + token},
		{"readable by others", "ext4", &file{mode: 0o644, content: token}, "overtime: WARNING: host credential refused: IMG (ext4): agent.token has mode 644: readable or writable by others than root (chmod 600 it)|none"},
		{"group", "ext4", &file{mode: 0o640, content: token}, "overtime: WARNING: host credential refused: IMG (ext4): agent.token has mode 640: readable or writable by others than root (chmod 600 it)|none"},
		{"not root's", "ext4", &file{mode: 0o600, uid: 1000, content: token}, "overtime: WARNING: host credential refused: IMG (ext4): agent.token is owned by uid 1000, not root|none"},
		{"symlink", "ext4", &file{symlink: true}, "overtime: WARNING: host credential refused: IMG (ext4): agent.token is a symbolic link|none"},
		{"oversized", "ext4", &file{mode: 0o600, content: strings.Repeat("x", 4097)}, "overtime: WARNING: host credential refused: IMG (ext4): agent.token has 4097 bytes (at most 4096)|none"},
		{"empty", "ext4", &file{mode: 0o600}, "overtime: WARNING: host credential refused: IMG (ext4): agent.token is empty|none"},
		{"no token file", "ext4", nil, "overtime: WARNING: host credential refused: IMG (ext4): it has no agent.token|none"},
		{"no partition", "", nil, "overtime: host credential: no file system labelled OVERTIME-ID (waited 0s); the agent needs another credential (TPM)|none"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "src")
			run := filepath.Join(dir, "run")
			for _, d := range []string{src, run} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			img := filepath.Join(dir, "id.img")
			tok := filepath.Join(src, "agent.token")
			if c.f != nil {
				if c.f.symlink {
					if err := os.WriteFile(filepath.Join(src, "elsewhere"), []byte(token), 0o600); err != nil {
						t.Fatal(err)
					}
					if err := os.Symlink("elsewhere", tok); err != nil {
						t.Fatal(err)
					}
				} else {
					if err := os.WriteFile(tok, []byte(c.f.content), 0o600); err != nil {
						t.Fatal(err)
					}
					if err := os.Chmod(tok, c.f.mode); err != nil {
						t.Fatal(err)
					}
					if err := os.Chown(tok, c.f.uid, c.f.uid); err != nil {
						t.Fatal(err)
					}
				}
			}
			if c.fs == "ext4" {
				if out, err := exec.Command("mkfs.ext4", "-q", "-L", "OVERTIME-ID", "-d", src, img, "4M").CombinedOutput(); err != nil {
					t.Fatalf("mkfs.ext4: %v\n%s", err, out)
				}
			}
			devs := ""
			if c.fs != "" {
				devs = img
			}
			// blkid stands in for the probe: the image is "the device" labelled OVERTIME-ID.
			script := `blkid() {
	case "$*" in
	*LABEL=*) [ -n "$DEVS" ] && echo "$DEVS" ;;
	*TYPE*) echo "$FSTYPE" ;;
	esac
}
OT_RUN=$RUNDIR OT_ID_MNT=$RUNDIR/mnt
. ./scripts/overtime.d/65-identity
if [ -e "$RUNDIR/agent.token" ]; then
	echo "|$(stat -c '%u:%g %a' "$RUNDIR/agent.token") $(cat "$RUNDIR/agent.token")"
else
	echo "|none"
fi
grep -q " $RUNDIR/mnt " /proc/mounts && echo "still mounted"
ls -A "$RUNDIR"`
			script = "DEVS=" + devs + " FSTYPE=" + c.fs + " RUNDIR=" + run + "\n" + script
			got := shell(t, "boot=overtime overtime.id_wait=0", script)
			got = strings.ReplaceAll(got, run, "RUN")
			if devs != "" {
				got = strings.ReplaceAll(got, img, "IMG")
			}
			lines := strings.Split(strings.TrimSpace(got), "\n")
			// The message, then "|" and the result, then the run directory's listing.
			if len(lines) < 2 || lines[0]+lines[1] != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
			if strings.Contains(lines[0], token) {
				t.Errorf("the token was printed: %s", lines[0])
			}
			want := "agent.token"
			if strings.HasSuffix(c.want, "|none") {
				want = ""
			}
			if listing := strings.Join(lines[2:], " "); listing != want {
				t.Errorf("left in the run directory: %q, want %q", listing, want)
			}
		})
	}
}
