// Package homes holds the desktop's fallback for homes from the site's file server: the
// seat-home-notice script (shipped in the overtime-agent package, run by pam_exec after
// pam_mount and pam_mkhomedir). Its tests run it against a stand-in root with stand-ins
// for id, mountpoint and logger.
package homes

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakes: id knows student (uid 1234567) and a system account; mountpoint answers from
// $MOUNTED; logger records its arguments.
var fakes = map[string]string{
	"id": `#!/bin/sh
case "$*" in
"-u -- student") echo 1234567 ;;
"-g -- student") echo 100 ;;
"-u -- daemon") echo 1 ;;
"-g -- daemon") echo 1 ;;
"-u -- "*|"-g -- "*) exit 1 ;;
*) exec /usr/bin/id "$@" ;;
esac
`,
	"mountpoint": "#!/bin/sh\n[ \"$1\" = -q ] && [ \"$2\" = \"$MOUNTED\" ]\n",
	"logger":     "#!/bin/sh\necho \"$*\" >>\"$LOGGER_LOG\"\n",
}

const volume = `<volume uid="1000-2147483647" fstype="nfs" server="files.uni.example" path="/export/homes/%(USER)" mountpoint="/home/%(USER)" options="nosuid,nodev" />`

// TestSeatHomeNotice: a temporary home (not a mount point) while the site gives homes
// gets HOME-NOT-SAVED.txt naming the server, the login's output says so and it is
// logged; a mounted home, a site without homes (no file, or the image's file without
// Overtime's volume), a system account, logout and hostile user names get nothing. The
// script never fails.
func TestSeatHomeNotice(t *testing.T) {
	bin := t.TempDir()
	for name, body := range fakes {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	type setup struct {
		conf    string // pam_mount.conf.xml's content; "" : none
		mounted bool
		pamType string
		user    string
	}
	for _, tc := range []struct {
		name   string
		s      setup
		notice bool
	}{
		{"temporary home", setup{conf: "<pam_mount>\n" + volume + "\n</pam_mount>\n", pamType: "open_session", user: "student"}, true},
		{"mounted home", setup{conf: volume, mounted: true, pamType: "open_session", user: "student"}, false},
		{"no homes configured", setup{pamType: "open_session", user: "student"}, false},
		{"the image's pam_mount.conf.xml", setup{conf: "<pam_mount>\n<!-- <volume fstype=\"nfs\" /> -->\n</pam_mount>\n", pamType: "open_session", user: "student"}, false},
		{"logout", setup{conf: volume, pamType: "close_session", user: "student"}, false},
		{"system account", setup{conf: volume, pamType: "open_session", user: "daemon"}, false},
		{"unknown user", setup{conf: volume, pamType: "open_session", user: "nobody-here"}, false},
		{"path in the name", setup{conf: volume, pamType: "open_session", user: "../student"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			home := filepath.Join(root, "home", strings.TrimPrefix(tc.s.user, "../"))
			if err := os.MkdirAll(home, 0o700); err != nil {
				t.Fatal(err)
			}
			// As pam_mkhomedir leaves it: the user's (as root, the script writes as them).
			if os.Geteuid() == 0 {
				for _, d := range []string{filepath.Dir(root), root, filepath.Dir(home)} {
					if err := os.Chmod(d, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Chown(home, 1234567, 100); err != nil {
					t.Fatal(err)
				}
			}
			if tc.s.conf != "" {
				if err := os.MkdirAll(filepath.Join(root, "etc/security"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, "etc/security/pam_mount.conf.xml"), []byte(tc.s.conf), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			mounted := "/nothing"
			if tc.s.mounted {
				mounted = home
			}
			log := filepath.Join(t.TempDir(), "logger")
			cmd := exec.Command("./seat-home-notice")
			cmd.Env = append(os.Environ(), "OVERTIME_HOMES_ROOT="+root, "PATH="+bin+":"+os.Getenv("PATH"),
				"PAM_TYPE="+tc.s.pamType, "PAM_USER="+tc.s.user, "MOUNTED="+mounted, "LOGGER_LOG="+log)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("seat-home-notice failed (a login must not): %v\n%s", err, out)
			}
			notice, nerr := os.ReadFile(filepath.Join(home, "HOME-NOT-SAVED.txt"))
			logged, _ := os.ReadFile(log)
			if !tc.notice {
				if nerr == nil || len(out) != 0 || len(logged) != 0 {
					t.Errorf("want nothing; notice %q (%v), output %q, log %q", notice, nerr, out, logged)
				}
				return
			}
			if nerr != nil {
				t.Fatalf("no notice: %v (output %q)", nerr, out)
			}
			for _, s := range []string{"Your home directory on files.uni.example could not be reached", "NOT kept", "gone when this PC restarts"} {
				if !strings.Contains(string(notice), s) || !strings.Contains(string(out), s) {
					t.Errorf("notice or output lacks %q:\n%s\n---\n%s", s, notice, out)
				}
			}
			if fi, err := os.Stat(filepath.Join(home, "HOME-NOT-SAVED.txt")); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("notice mode %v %v, want 0600", fi.Mode(), err)
			}
			if want := "-t overtime-homes -p auth.warning home of student (uid 1234567) not mounted from files.uni.example"; !strings.HasPrefix(string(logged), want) {
				t.Errorf("logged %q, want %q…", logged, want)
			}
		})
	}
}
