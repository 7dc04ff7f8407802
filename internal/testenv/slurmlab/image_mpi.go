package slurmlab

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Open MPI in the test compute guest (Options.MPI): Debian's Open MPI 4.1 runtime and
// PMIx 4 (packages libopenmpi3, openmpi-common, openmpi-bin's /etc/openmpi, libpmix2 and
// libpmix-dev's libpmix.so; scripts/deps.sh installs them with openmpi-bin and
// libopenmpi-dev), so that `srun --mpi=pmix` starts the ranks of a job compiled with
// mpicc on this machine. Slurm's mpi_pmix plugins are in the guest already (every
// plugin of slurmPluginDir is); they dlopen PMIx from its directory.

const mpiLibDir = "/usr/lib/x86_64-linux-gnu"

// mpiTrees are copied whole: Open MPI's and PMIx's MCA components are dlopen'd from
// them (ldd of the libraries does not find them), with their help texts and defaults.
// Slurm's mpi_pmix plugin dlopens pmix2/lib/libpmix.so (the unversioned name).
var mpiTrees = []string{
	mpiLibDir + "/openmpi/lib", // libmpi.so links, openmpi3/mca_*.so components
	mpiLibDir + "/pmix2/lib",   // libpmix.so(.2), pmix/pmix_mca_*.so components
	mpiLibDir + "/pmix2/share", // pmix-mca-params.conf, help texts
	"/usr/share/openmpi",       // help texts (a rank's error messages), amca-param-sets
	"/etc/openmpi",             // Debian's openmpi-mca-params.conf: leaves out ucx, ofi, openib
}

// mpiLibs are the libraries a program linked by mpicc loads by name (with their ldd
// closure, added by buildGuestImage like every other file's).
var mpiLibs = []string{
	mpiLibDir + "/libmpi.so.40", mpiLibDir + "/libopen-rte.so.40", mpiLibDir + "/libopen-pal.so.40",
	mpiLibDir + "/libpmix.so.2",
}

// mpiFiles lists the files of the MPI runtime; a missing one names the packages.
func mpiFiles() ([]string, error) {
	files := append([]string(nil), mpiLibs...)
	plugins, err := filepath.Glob(slurmPluginDir + "/mpi_pmix*.so")
	if err != nil {
		return nil, err
	}
	if len(plugins) == 0 {
		return nil, fmt.Errorf("no %s/mpi_pmix*.so (Slurm's PMIx plugin)", slurmPluginDir)
	}
	files = append(files, plugins...)
	for _, tree := range mpiTrees {
		if _, err := os.Stat(tree); err != nil {
			return nil, fmt.Errorf("MPI in the guest: %w (Debian packages openmpi-bin libopenmpi-dev: scripts/deps.sh)", err)
		}
		err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch {
			case d.IsDir() && (d.Name() == "pkgconfig" || d.Name() == "include"):
				return fs.SkipDir
			case d.IsDir():
				return nil
			case strings.HasSuffix(p, ".a") || strings.HasSuffix(p, ".la"):
				return nil
			}
			// A link is copied as the file it names (copyFile follows it); one naming a
			// directory is left out.
			if fi, err := os.Stat(p); err != nil || fi.IsDir() {
				return nil
			}
			files = append(files, p)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("MPI in the guest: %w (Debian packages openmpi-bin libopenmpi-dev: scripts/deps.sh)", err)
		}
	}
	return files, nil
}

// isELF tells executables and shared objects (for ldd) from data files.
func isELF(f string) bool {
	fh, err := os.Open(f)
	if err != nil {
		return false
	}
	defer fh.Close()
	magic := make([]byte, 4)
	n, _ := fh.Read(magic)
	return n == 4 && bytes.Equal(magic, []byte("\x7fELF"))
}
