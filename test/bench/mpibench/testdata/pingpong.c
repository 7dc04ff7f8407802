/*
 * OSU-style point-to-point benchmark for two MPI ranks (test/bench/mpibench).
 *
 * Latency: rank 0 sends an 8-byte message, rank 1 answers with its bitwise complement;
 * every round trip is timed on its own (clock_gettime, CLOCK_MONOTONIC) after a warm-up,
 * latency = half the round trip. Both ranks check every message: rank 1 that it carries
 * this iteration's value, rank 0 that the answer is its complement.
 *
 * Bandwidth: windowed streaming as OSU's osu_bw: rank 0 posts W non-blocking sends of
 * SIZE bytes (W distinct buffers), rank 1 W receives into W distinct buffers, then rank 1
 * returns a 4-byte acknowledgement; a window is timed on rank 0 from the first send to
 * the acknowledgement. Each buffer holds a fixed pattern of its slot; rank 0 stamps the
 * first and last word of each buffer with the window number before each window, rank 1
 * checks the stamps of every message (so each window's data is fresh) and, at the end,
 * every word of every buffer against the pattern.
 *
 * Usage: pingpong LAT_WARMUP LAT_ITERS BW_WARMUP BW_WINDOWS WINDOW SIZE
 * Rank 0 prints one "mpibench ok key=value ..." line (or "mpibench FAILED ..."), and each
 * rank a line with its host, scheduling policy and nice value, and one with the CPUs it
 * was on at the start and end of the latency loop and how often it moved in between.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define MAGIC 0x6d706962656e6368ull /* "mpibench" */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* pct: the p-th percentile (nearest rank) of sorted v[n]. */
static double pct(const double *v, int n, double p)
{
	int i = (int)(p / 100.0 * (n - 1) + 0.5);
	return v[i];
}

static uint64_t pattern(int slot, size_t j)
{
	return (uint64_t)(slot + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)j;
}

static uint64_t stamp(int window, int slot)
{
	return MAGIC ^ ((uint64_t)(window + 1000) << 16) ^ (uint64_t)slot;
}

static const char *policy_name(int p)
{
	switch (p) {
	case SCHED_OTHER:
		return "other";
	case SCHED_IDLE:
		return "idle";
	case SCHED_BATCH:
		return "batch";
	case SCHED_FIFO:
		return "fifo";
	case SCHED_RR:
		return "rr";
	}
	return "unknown";
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size, hl;
	char host[MPI_MAX_PROCESSOR_NAME];
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2 || argc != 7) {
		if (rank == 0)
			fprintf(stderr, "mpibench FAILED: want 2 ranks and 6 arguments, have %d ranks, %d arguments\n", size,
				argc - 1);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	int lat_warm = atoi(argv[1]), lat_iters = atoi(argv[2]), bw_warm = atoi(argv[3]), bw_windows = atoi(argv[4]),
	    window = atoi(argv[5]);
	size_t bytes = (size_t)atol(argv[6]), words = bytes / sizeof(uint64_t);
	if (lat_iters < 1 || bw_windows < 1 || window < 1 || words < 2) {
		if (rank == 0)
			fprintf(stderr, "mpibench FAILED: bad arguments\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	MPI_Get_processor_name(host, &hl);
	printf("rank %d host %s policy %s nice %d\n", rank, host, policy_name(sched_getscheduler(0)),
	       getpriority(PRIO_PROCESS, 0));
	fflush(stdout);
	long bad = 0;

	/* Latency: 8-byte ping-pong. Between round trips (outside the timed part) each rank
	 * notes the CPU it is on, to count its migrations. */
	double *rt = malloc((size_t)lat_iters * sizeof *rt);
	double lat_total = 0;
	int cpu_first = sched_getcpu(), cpu = cpu_first, moves = 0;
	MPI_Barrier(MPI_COMM_WORLD);
	for (int i = -lat_warm; i < lat_iters; i++) {
		uint64_t msg = MAGIC ^ (uint64_t)(i + lat_warm), back = 0;
		int c = sched_getcpu();
		if (c != cpu) {
			moves++;
			cpu = c;
		}
		if (rank == 0) {
			double t0 = now();
			MPI_Send(&msg, 8, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
			MPI_Recv(&back, 8, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			double t1 = now();
			if (back != ~msg)
				bad++;
			if (i >= 0) {
				rt[i] = (t1 - t0) / 2 * 1e6;
				lat_total += t1 - t0;
			}
		} else {
			uint64_t got = 0;
			MPI_Recv(&got, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			if (got != msg)
				bad++;
			back = ~got;
			MPI_Send(&back, 8, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
		}
	}

	printf("rank %d cpu %d..%d migrations %d\n", rank, cpu_first, cpu, moves);
	fflush(stdout);

	/* Bandwidth: windows of W messages of SIZE bytes, rank 0 -> rank 1. */
	uint64_t **buf = malloc((size_t)window * sizeof *buf);
	MPI_Request *req = malloc((size_t)window * sizeof *req);
	for (int s = 0; s < window; s++) {
		if (posix_memalign((void **)&buf[s], 4096, bytes)) {
			fprintf(stderr, "mpibench FAILED: out of memory\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		for (size_t j = 0; j < words; j++)
			buf[s][j] = rank == 0 ? pattern(s, j) : 0;
	}
	double *wt = malloc((size_t)bw_windows * sizeof *wt), bw_total = 0;
	MPI_Barrier(MPI_COMM_WORLD);
	for (int w = -bw_warm; w < bw_windows; w++) {
		int ack = w;
		if (rank == 0) {
			for (int s = 0; s < window; s++)
				buf[s][0] = buf[s][words - 1] = stamp(w, s);
			double t0 = now();
			for (int s = 0; s < window; s++)
				MPI_Isend(buf[s], (int)bytes, MPI_BYTE, 1, 100 + s, MPI_COMM_WORLD, &req[s]);
			MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
			MPI_Recv(&ack, 1, MPI_INT, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			double t1 = now();
			if (ack != w)
				bad++;
			if (w >= 0) {
				wt[w] = (double)window * (double)bytes / (t1 - t0) / 1e6;
				bw_total += t1 - t0;
			}
		} else {
			for (int s = 0; s < window; s++)
				MPI_Irecv(buf[s], (int)bytes, MPI_BYTE, 0, 100 + s, MPI_COMM_WORLD, &req[s]);
			MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
			for (int s = 0; s < window; s++)
				if (buf[s][0] != stamp(w, s) || buf[s][words - 1] != stamp(w, s))
					bad++;
			MPI_Send(&ack, 1, MPI_INT, 0, 99, MPI_COMM_WORLD);
		}
	}
	if (rank == 1)
		for (int s = 0; s < window; s++)
			for (size_t j = 1; j < words - 1; j++)
				if (buf[s][j] != pattern(s, j))
					bad++;

	long allbad = 0;
	MPI_Reduce(&bad, &allbad, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		if (allbad) {
			printf("mpibench FAILED: %ld bad messages or words\n", allbad);
		} else {
			double lat_mean = lat_total / lat_iters / 2 * 1e6;
			double bw_agg = (double)bw_windows * window * (double)bytes / bw_total / 1e6;
			qsort(rt, (size_t)lat_iters, sizeof *rt, cmp);
			qsort(wt, (size_t)bw_windows, sizeof *wt, cmp);
			printf("mpibench ok lat_median_us=%.4f lat_mean_us=%.4f lat_p10_us=%.4f lat_p90_us=%.4f lat_p99_us=%.4f "
			       "lat_max_us=%.2f bw_median_MBps=%.1f bw_agg_MBps=%.1f bw_min_MBps=%.1f bw_max_MBps=%.1f "
			       "lat_iters=%d bw_windows=%d window=%d bytes=%zu\n",
			       pct(rt, lat_iters, 50), lat_mean, pct(rt, lat_iters, 10), pct(rt, lat_iters, 90),
			       pct(rt, lat_iters, 99), rt[lat_iters - 1], pct(wt, bw_windows, 50), bw_agg, wt[0],
			       wt[bw_windows - 1], lat_iters, bw_windows, window, bytes);
		}
		fflush(stdout);
	}
	MPI_Finalize();
	return allbad != 0;
}
