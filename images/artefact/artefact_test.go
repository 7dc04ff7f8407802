package artefact

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteVerify(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"vmlinuz": "kernel", "root.squashfs": "root image"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Write(dir, "vmlinuz", "root.squashfs"); err != nil {
		t.Fatal(err)
	}
	if files, err := Verify(dir); err != nil || len(files) != 2 || files[0].Name != "root.squashfs" {
		t.Fatalf("Verify = %v, %v", files, err)
	}
	// GNU sha256sum reads what we write.
	if sha, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command(sha, "-c", "--quiet", SumsFile)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sha256sum -c: %v\n%s", err, out)
		}
	}
	// Truncated, changed, missing, replaced by a symlink: all refused by name.
	for _, damage := range []func(p string) error{
		func(p string) error { return os.Truncate(p, 3) },
		func(p string) error { return os.WriteFile(p, []byte("root imagf"), 0o644) },
		os.Remove,
		func(p string) error { os.Remove(p); return os.Symlink("vmlinuz", p) },
	} {
		p := filepath.Join(dir, "root.squashfs")
		if err := damage(p); err != nil {
			t.Fatal(err)
		}
		_, err := Verify(dir)
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "root.squashfs") {
			t.Errorf("Verify after damage = %v, want ErrMismatch naming root.squashfs", err)
		}
		os.Remove(p)
		if err := os.WriteFile(p, []byte("root image"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	good := strings.Repeat("a", 64)
	for _, doc := range []string{
		"",
		good + " vmlinuz\n",                     // one space
		good + "  ../etc/passwd\n",              // path
		good + "  a/b\n",                        // path
		good + "  " + SumsFile + "\n",           // itself
		strings.Repeat("g", 64) + "  vmlinuz\n", // not hex
		good + "  vmlinuz\n" + good + "  vmlinuz\n",
		good + "  vm linuz\n",
		good + "  .hidden\n",
	} {
		if _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("Parse(%q) accepted", doc)
		}
	}
	if fs, err := Parse([]byte(strings.ToUpper(good) + " *disk.qcow2\n")); err != nil || fs[0].SHA256 != good {
		t.Errorf("binary-mode line: %v %v", fs, err)
	}
}
