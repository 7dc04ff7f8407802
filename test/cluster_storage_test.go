package test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/overtime-hpc/overtime/internal/netns"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/nfsenv"
	"github.com/overtime-hpc/overtime/internal/testenv/slurmlab"
)

// The HPC cluster's file server of the desktop test: nfs-ganesha in a namespace of its
// own on the lab's bridge at clusterStorageIP, exporting a read-write directory as
// /export/hpc with a cluster home (mode 0700) for each of the given users in it. The
// compute guest mounts it at /home for its jobs (docs/slurm.md "5a"). It is not the
// university's desktop home server (homeServer): a cluster's storage seldom is, and the
// desktop test takes that server down while the guest runs (docs/slurm.md "Known gaps":
// one server for both is not yet safe).
const clusterStorageIP = "10.20.0.8"

type clusterStorage struct {
	*nfsenv.Server
	dir string // the exported directory on this machine
}

func startClusterStorage(t testing.TB, l *bootlab.Lab, users ...slurmlab.User) *clusterStorage {
	t.Helper()
	ns, err := netns.New("hpcfs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	if err := l.NS.AddVeth("vhpcfs", bootlab.Bridge, ns, "eth0", clusterStorageIP+"/24"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	// Each user's cluster home, theirs alone.
	for _, u := range users {
		home := filepath.Join(dir, u.Name)
		if err := os.Mkdir(home, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(home, int(u.UID), int(u.GID)); err != nil {
			t.Fatal(err)
		}
	}
	s := nfsenv.StartT(t, nfsenv.Config{NS: ns, Addr: clusterStorageIP, Export: dir, Pseudo: "/export/hpc", ReadWrite: true, Dir: t.TempDir()})
	return &clusterStorage{Server: s, dir: dir}
}
