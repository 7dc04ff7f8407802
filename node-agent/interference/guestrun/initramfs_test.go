package guestrun

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

type cpioEntry struct {
	mode uint32
	rdev [2]uint32
	data []byte
}

// readNewc parses a newc archive (what the kernel does with an initramfs).
func readNewc(t *testing.T, b []byte) map[string]cpioEntry {
	t.Helper()
	out := map[string]cpioEntry{}
	align := func(n int) int { return (n + 3) &^ 3 }
	for off := 0; ; {
		if len(b) < off+110 || string(b[off:off+6]) != "070701" {
			t.Fatalf("offset %d: no newc header", off)
		}
		field := func(i int) uint32 {
			v, err := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
			if err != nil {
				t.Fatalf("offset %d field %d: %v", off, i, err)
			}
			return uint32(v)
		}
		mode, size, namesize := field(1), int(field(6)), int(field(11))
		name := string(b[off+110 : off+110+namesize-1])
		data := align(off + 110 + namesize)
		if name == "TRAILER!!!" {
			return out
		}
		out[name] = cpioEntry{mode: mode, rdev: [2]uint32{field(9), field(10)}, data: b[data : data+size]}
		off = align(data + size)
	}
}

func TestWriteInitramfs(t *testing.T) {
	dir := t.TempDir()
	agent := filepath.Join(dir, "agent")
	content := []byte("not really an agent, 39 bytes long....")
	if err := os.WriteFile(agent, content, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "initramfs.cpio")
	if err := WriteInitramfs(out, agent); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	ents := readNewc(t, b)
	init := ents["init"]
	if init.mode != unix.S_IFREG|0o755 || !bytes.Equal(init.data, content) {
		t.Errorf("init: mode %o, data %q", init.mode, init.data)
	}
	if c := ents["dev/console"]; c.mode&unix.S_IFMT != unix.S_IFCHR || c.rdev != [2]uint32{5, 1} {
		t.Errorf("dev/console: mode %o rdev %v, want a character device 5:1", c.mode, c.rdev)
	}
	for _, d := range []string{"dev", "proc", "sys", "tmp"} {
		if ents[d].mode&unix.S_IFMT != unix.S_IFDIR {
			t.Errorf("%s: mode %o, want a directory", d, ents[d].mode)
		}
	}
	if err := WriteInitramfs(out, filepath.Join(dir, "missing")); err == nil {
		t.Error("WriteInitramfs of a missing binary: no error")
	}
}
