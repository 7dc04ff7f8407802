// Package atomicfile replaces files so that a reader (dnsmasq, NFS servers, a restarted
// agent) or a crash sees either the old content or the whole new content, never part of it.
//
// The one fsync policy: the data is synced before the rename and the directory after it
// (best effort, see syncDir).
// Without the first sync a crash shortly after the rename can leave an empty file under the
// new name on ext4/xfs; without the second the rename itself may be lost. Both are cheap
// for the small configuration and state files written here, and free on tmpfs.
package atomicfile

import (
	"os"
	"path/filepath"
)

// WriteFile replaces path with data and gives it exactly mode perm (the umask does not
// apply, so a 0644 file stays readable by a daemon that dropped root and a 0600 secret is
// never readable by others, not even for a moment). The temporary file lives in path's
// directory, so that the rename does not cross file systems; it is removed when anything
// fails, and the old file at path is then left as it was.
func WriteFile(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*") // created with mode 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close() // harmless when already closed
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	syncDir(dir)
	return nil
}

// syncDir makes a rename in dir durable, as far as the file system allows: some (FUSE,
// network file systems) cannot sync a directory, and by then the new file is in place and
// its content on stable storage, so a failure here is not reported as a failed write.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
