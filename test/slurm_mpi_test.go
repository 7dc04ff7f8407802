package test

// An MPI job across two container guests: Open MPI ranks started by `srun --mpi=pmix`
// (Slurm's PMIx plugin in the guests' slurmstepd), two per guest, so that messages go
// both between guests (TCP over the pool's LAN) and within one guest through shared
// memory — Open MPI's vader BTL with CMA (process_vm_readv), which the guest's seccomp
// profile must allow (node-agent/guest/container/oci.go).

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/slurmlab"
)

// mpiRing passes 1 MiB from each rank to the next (far above vader's eager and
// rendezvous limits, so within a node the receiver reads the sender's buffer with a CMA
// get) and checks every word; rank 0 prints "ring ok N ranks on M nodes, A-B per node".
// With --deny-cma each rank first adds a seccomp filter of its own that refuses
// process_vm_readv/writev with EPERM, exactly as the guest's profile did before (filters
// stack; no_new_privs is set in the guest anyway).
const mpiRing = `#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#define N (1 << 18) /* uint32 words: 1 MiB */

static void deny_cma(void) {
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	};
	struct sock_fprog p = {sizeof f / sizeof f[0], f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p)) {
		perror("seccomp");
		exit(2);
	}
}

int main(int argc, char **argv) {
	if (argc > 1 && strcmp(argv[1], "--deny-cma") == 0)
		deny_cma();
	MPI_Init(&argc, &argv);
	int rank, size, lrank, lsize, first, nodes, minper, maxper, hl;
	char host[MPI_MAX_PROCESSOR_NAME];
	MPI_Comm local;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
	MPI_Comm_rank(local, &lrank);
	MPI_Comm_size(local, &lsize);
	first = lrank == 0;
	MPI_Allreduce(&first, &nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	MPI_Allreduce(&lsize, &minper, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	MPI_Allreduce(&lsize, &maxper, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	MPI_Get_processor_name(host, &hl);
	printf("rank %d of %d on %s, local rank %d of %d\n", rank, size, host, lrank, lsize);
	fflush(stdout);

	uint32_t *out = malloc(N * sizeof *out), *in = malloc(N * sizeof *in);
	int right = (rank + 1) % size, left = (rank + size - 1) % size, bad = 0, allbad;
	for (int i = 0; i < N; i++)
		out[i] = (uint32_t)rank * 2654435761u + i;
	MPI_Sendrecv(out, N, MPI_UINT32_T, right, 7, in, N, MPI_UINT32_T, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	for (int i = 0; i < N; i++)
		if (in[i] != (uint32_t)left * 2654435761u + i)
			bad++;
	long mine = rank, sum, want = (long)size * (size - 1) / 2;
	MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	MPI_Allreduce(&bad, &allbad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0) {
		if (allbad || sum != want)
			printf("ring FAILED: %d bad words, rank sum %ld, want %ld\n", allbad, sum, want);
		else
			printf("ring ok %d ranks on %d nodes, %d-%d per node\n", size, nodes, minper, maxper);
	}
	MPI_Finalize();
	return allbad || sum != want;
}
`

// mpiEnv is the ranks' environment (srun exports the submitter's): the BTLs and single
// copy mechanism the test insists on, and a temporary directory that exists in the guest.
var mpiEnv = []string{
	// self, shared memory (vader) within a guest and TCP between guests: nothing else may
	// carry a message, so a rank pair on one guest uses vader.
	"OMPI_MCA_btl=self,vader,tcp",
	"OMPI_MCA_pml=ob1",
	// vader's large messages by CMA (process_vm_readv), not by a copy through the
	// shared segment (which works without CMA and would prove nothing).
	"OMPI_MCA_btl_vader_single_copy_mechanism=cma",
	// The submit host's TMPDIR (a test runner's) would not exist in the guest.
	"TMPDIR=/tmp",
}

// TestSlurmMPI: a 4-rank Open MPI job on two guests, 2 ranks each, launched by srun with
// PMIx, passes its data around a ring intact; with CMA refused the same job's vader gets
// fail on both guests, so the successful run did use CMA.
//
// A refused CMA get does not end the job: vader prints its error and ob1 has the sender
// send that message instead (a copy through vader's shared segment), so the job still
// completes, slower. The second run therefore proves the path by vader's error, not by a
// failed job.
func TestSlurmMPI(t *testing.T) {
	needs.Servers(t, "mpicc (Debian packages openmpi-bin, libopenmpi-dev)")
	if _, err := exec.LookPath("mpicc"); err != nil {
		t.Fatalf("mpicc: %v (scripts/deps.sh installs openmpi-bin and libopenmpi-dev)", err)
	}
	start := time.Now()
	l := slurmlab.Start(t, slurmlab.Options{
		Hosts: []slurmlab.Host{
			{Name: "mpi1", MAC: "52:54:00:0f:00:01", Cluster: true},
			{Name: "mpi2", MAC: "52:54:00:0f:00:02", Cluster: true},
		},
		Policy: "{idleAfter: 6s, hold: 1s, " + noLoad + "}",
		MPI:    true,
	})
	for _, n := range []string{"mpi1", "mpi2"} {
		bootlab.Eventually(t, n+" idle", 60*time.Second, func() bool { return strings.Contains(l.Node(n)["State"], "IDLE") })
	}
	t.Logf("lab up in %s", time.Since(start).Round(time.Second))

	// Compiled here with Debian's mpicc; srun --bcast copies it to each node's /tmp.
	src, bin := filepath.Join(l.Dir, "ring.c"), filepath.Join(l.Dir, "ring")
	if err := os.WriteFile(src, []byte(mpiRing), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mpicc", "-O2", "-Wall", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("mpicc: %v\n%s", err, out)
	}
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		c := l.NS.CommandContext(ctx, "srun", append([]string{"--mpi=pmix", "-N2", "-n4", "--ntasks-per-node=2",
			"-w", "mpi1,mpi2", "--chdir=/tmp", "--bcast=/tmp/ring", bin}, args...)...)
		c.Env = append(append(os.Environ(), "SLURM_CONF="+l.Conf), mpiEnv...)
		out, err := c.CombinedOutput()
		return string(out), err
	}
	// vader's own message when process_vm_readv fails (opal/mca/btl/vader/btl_vader_get.c).
	cmaRefused := regexp.MustCompile(`(?m)^\[([^:\]]+):\d+\] Read -1, expected 1048576, errno = 1$`)

	t.Run("ring over vader and tcp", func(t *testing.T) {
		at := time.Now()
		out, err := run()
		t.Logf("srun (%s):\n%s", time.Since(at).Round(time.Millisecond), out)
		if err != nil || !strings.Contains(out, "ring ok 4 ranks on 2 nodes, 2-2 per node") {
			t.Fatalf("MPI ring: %v; want \"ring ok 4 ranks on 2 nodes, 2-2 per node\"", err)
		}
		for _, n := range []string{"mpi1", "mpi2"} {
			if c := regexp.MustCompile(`(?m)^rank \d of 4 on [^,]*`+n+`\b`).FindAllString(out, -1); len(c) != 2 {
				t.Errorf("%d ranks on %s, want 2: %q", len(c), n, c)
			}
		}
		if m := cmaRefused.FindAllString(out, -1); len(m) > 0 {
			t.Errorf("vader's CMA get failed in the guest: %q", m)
		}
	})

	t.Run("CMA refused fails vader's gets", func(t *testing.T) {
		at := time.Now()
		out, err := run("--deny-cma")
		t.Logf("srun with process_vm_readv/writev denied (%s, %v):\n%s", time.Since(at).Round(time.Millisecond), err, out)
		hosts := map[string]bool{}
		for _, m := range cmaRefused.FindAllStringSubmatch(out, -1) {
			hosts[m[1]] = true
		}
		// One receiver per guest reads from its neighbour on the same guest.
		if len(hosts) != 2 {
			t.Errorf("vader's CMA get refused on %d guests (%v), want both: the first run's shared-memory path was not CMA", len(hosts), hosts)
		}
	})
	t.Logf("test ran %s", time.Since(start).Round(time.Second))
}
