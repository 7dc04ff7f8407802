package guestrun

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// cpioWriter writes a newc ("070701") cpio archive, the format the kernel unpacks as an
// initramfs (Documentation/driver-api/early-userspace/buffer-format.rst): a 110-byte
// header of 13 hex fields, the NUL-terminated name, padding to 4 bytes, the data, padding
// to 4 bytes; the archive ends with an entry named TRAILER!!!.
type cpioWriter struct {
	w   *bufio.Writer
	ino int
	err error
}

func (c *cpioWriter) header(name string, mode uint32, size int64, rdevMajor, rdevMinor uint32) {
	if c.err != nil {
		return
	}
	c.ino++
	nlink := 1
	if mode&unix.S_IFMT == unix.S_IFDIR {
		nlink = 2
	}
	_, c.err = fmt.Fprintf(c.w, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%s\x00",
		c.ino, mode, 0, 0, nlink, 0, size, 0, 0, rdevMajor, rdevMinor, len(name)+1, 0, name)
	c.pad(110 + len(name) + 1)
}

func (c *cpioWriter) pad(n int) {
	if c.err == nil && n%4 != 0 {
		_, c.err = c.w.Write(make([]byte, 4-n%4))
	}
}

func (c *cpioWriter) dir(name string) { c.header(name, unix.S_IFDIR|0o755, 0, 0, 0) }

func (c *cpioWriter) charDev(name string, major, minor uint32) {
	c.header(name, unix.S_IFCHR|0o600, 0, major, minor)
}

func (c *cpioWriter) file(name string, mode uint32, r io.Reader, size int64) {
	c.header(name, unix.S_IFREG|mode, size, 0, 0)
	if c.err != nil {
		return
	}
	var n int64
	n, c.err = io.Copy(c.w, r)
	if c.err == nil && n != size {
		c.err = fmt.Errorf("cpio: %s: copied %d bytes of %d", name, n, size)
	}
	c.pad(int(size % 4))
}

func (c *cpioWriter) close() error {
	c.header("TRAILER!!!", 0, 0, 0, 0)
	if c.err != nil {
		return c.err
	}
	return c.w.Flush()
}

// WriteInitramfs writes an uncompressed newc initramfs to path whose /init is the agent
// binary: what `rdinit=/init -- bench guest-load ...` needs. /dev/console must be in the
// archive: the kernel opens it for init's stdin, stdout and stderr before devtmpfs exists
// (without it, init would run with no output at all). /proc, /sys and /tmp are empty
// directories (guest-load mounts nothing; the io workload writes to /tmp, in the
// initramfs's own memory).
func WriteInitramfs(path, agent string) error {
	in, err := os.Open(agent)
	if err != nil {
		return fmt.Errorf("guestrun: initramfs: %w", err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return fmt.Errorf("guestrun: initramfs: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("guestrun: initramfs: %w", err)
	}
	c := &cpioWriter{w: bufio.NewWriterSize(f, 1<<20)}
	for _, d := range []string{"dev", "proc", "sys", "tmp", "root"} {
		c.dir(d)
	}
	c.charDev("dev/console", 5, 1)
	c.charDev("dev/null", 1, 3)
	c.file("init", 0o755, in, st.Size())
	err = c.close()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("guestrun: initramfs %s: %w", path, err)
	}
	return nil
}

// FindKernel returns a bootable x86-64 kernel for the QEMU runner: the Debian cloud
// kernel that the test image build (images/testimage/build.sh) caches, else the host's
// own. Searched in order:
//
//   - $OVERTIME_CACHE, then the .cache directory of the working directory and each of its
//     parents (build.sh's default cache, <repo>/.cache): kernel/VERSION/boot/vmlinuz-*
//     (the unpacked kernel package) and testimage/KEY/vmlinuz;
//   - /boot/vmlinuz-$(uname -r), /boot/vmlinuz, /vmlinuz.
//
// The cloud kernel has the 8250 serial console and everything an initramfs-only boot
// needs built in.
func FindKernel() (string, error) {
	var caches []string
	if d := os.Getenv("OVERTIME_CACHE"); d != "" {
		caches = append(caches, d)
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			caches = append(caches, filepath.Join(d, ".cache"))
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	var patterns []string
	for _, c := range caches {
		patterns = append(patterns, filepath.Join(c, "kernel", "*", "boot", "vmlinuz-*"), filepath.Join(c, "testimage", "*", "vmlinuz"))
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		patterns = append(patterns, "/boot/vmlinuz-"+unix.ByteSliceToString(u.Release[:]))
	}
	patterns = append(patterns, "/boot/vmlinuz", "/vmlinuz")
	for _, p := range patterns {
		matches, _ := filepath.Glob(p)
		for i := len(matches) - 1; i >= 0; i-- { // the newest version sorts last
			if st, err := os.Stat(matches[i]); err == nil && st.Mode().IsRegular() && st.Size() > 0 {
				return matches[i], nil
			}
		}
	}
	if runtime.GOARCH != "amd64" {
		return "", fmt.Errorf("guestrun: no kernel found (and QEMU guests are x86-64 only, this is %s)", runtime.GOARCH)
	}
	return "", fmt.Errorf("guestrun: no kernel found in %s (build the test image, images/testimage/build.sh, or pass a kernel)", strings.Join(patterns, ", "))
}
