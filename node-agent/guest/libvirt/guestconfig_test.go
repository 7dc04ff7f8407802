package libvirt

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// The configuration disk holds the guest's settings as sh-quoted lines a shell reads back
// exactly, and its secrets at mode 0400; text that could break a line is refused.
func TestGuestConfig(t *testing.T) {
	s := baseSpec()
	s.Host, s.AgentURL = "pc-a01", "http://10.0.0.2:9101"
	s.Storage = []model.GuestStorage{{Server: "nfs1", Export: "/export/home", Path: "/home"},
		{Server: "10.0.0.9", Export: "/scratch", Path: "/scratch/it's"}}
	key := bytes.Repeat([]byte{0, 0xff, '\n', '\''}, 256)
	s.Secrets = map[string][]byte{"munge.key": key}
	b, err := guestConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(b)%512 != 0 {
		t.Errorf("archive of %d bytes: not whole 512-byte sectors of a disk", len(b))
	}
	files := map[string][]byte{}
	modes := map[string]int64{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		files[h.Name], modes[h.Name] = data, h.Mode
	}
	if !bytes.Equal(files["secrets/munge.key"], key) || modes["secrets/munge.key"] != 0o400 || modes["secrets/"] != 0o700 {
		t.Errorf("munge key: %d bytes mode %o (dir %o)", len(files["secrets/munge.key"]), modes["secrets/munge.key"], modes["secrets/"])
	}
	env := files["overtime/guest.env"]
	// What a guest's shell reads from it.
	cmd := exec.Command("sh", "-c", `. /dev/stdin; printf '%s|%s|%s|%s|%s|%s|%s' "$OVERTIME_HOST" "$OVERTIME_AGENT_URL" "$OVERTIME_GUEST_CPUS" "$OVERTIME_GUEST_MEMORY_MB" "$OVERTIME_STORAGE_1" "$OVERTIME_STORAGE_2" "${OVERTIME_STORAGE_3-unset}"`)
	cmd.Stdin = bytes.NewReader(env)
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("sh reading guest.env: %v\n%s", err, env)
	}
	if want := "pc-a01|http://10.0.0.2:9101|2|1024|nfs1:/export/home /home|10.0.0.9:/scratch /scratch/it's|unset"; string(got) != want {
		t.Errorf("guest.env read back as %q, want %q:\n%s", got, want, env)
	}
	// The same spec makes the same disk.
	if again, _ := guestConfig(s); !bytes.Equal(again, b) {
		t.Error("two archives of one spec differ")
	}

	for name, mod := range map[string]func(*guest.Spec){
		"a line break in the agent's URL": func(s *guest.Spec) { s.AgentURL = "http://x\nOVERTIME_HOST=evil" },
		"a secret named with a slash":     func(s *guest.Spec) { s.Secrets = map[string][]byte{"../munge.key": nil} },
		"a host name that is none":        func(s *guest.Spec) { s.Host = "pc a01" },
		"a blank in a storage path":       func(s *guest.Spec) { s.Storage = []model.GuestStorage{{Server: "s", Export: "/e", Path: "/a b"}} },
	} {
		s := baseSpec()
		s.Host = "pc-a01"
		mod(&s)
		if _, err := guestConfig(s); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), "overtime-pc-a01") {
			t.Errorf("%s: error %q does not name the guest", name, err)
		}
	}
}

// TestLastWords: the init's reason from the console of the guest's last start, through
// the state link Start makes; nothing when there is no link or no reason.
func TestLastWords(t *testing.T) {
	b := New(Options{RunDir: t.TempDir()})
	if got := b.LastWords("overtime-pc1"); got != "" {
		t.Errorf("no guest: %q", got)
	}
	dir := filepath.Join(t.TempDir(), "overtime-pc1")
	os.MkdirAll(dir, 0o700)
	if err := b.linkStateDir("overtime-pc1", dir); err != nil {
		t.Fatal(err)
	}
	if got := b.LastWords("overtime-pc1"); got != "" {
		t.Errorf("no console yet: %q", got)
	}
	// A long console: the reason is at its end.
	console := strings.Repeat("[    1.000000] a kernel line of some length\r\n", 4000) +
		"guest-init: ERROR: cluster storage 10.0.0.9:/export/home at /home: mount failed: no answer within 30 s\r\n[   40.1] reboot: Power down\r\n"
	os.WriteFile(filepath.Join(dir, consoleLog), []byte(console), 0o600)
	if got, want := b.LastWords("overtime-pc1"), "cluster storage 10.0.0.9:/export/home at /home: mount failed: no answer within 30 s"; got != want {
		t.Errorf("LastWords = %q, want %q", got, want)
	}
}
