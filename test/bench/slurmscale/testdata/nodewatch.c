/* nodewatch: the benchmark's observer of slurmctld's node records (the public
 * libslurm client API, as scontrol uses it). Every INTERVAL_MS it asks for the
 * node table changed since the last answer (slurm_load_node with the last
 * update time: slurmctld answers "no change" cheaply), and prints one line per
 * node whose features or weight differ from the previous answer:
 *
 *	<unix time ns after the answer arrived> <node> <weight> <features>
 *
 * plus "# loads <n>" on stderr at exit. Built by the benchmark with cc -lslurm. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	node_info_msg_t *cur = NULL;
	time_t last = 0;
	char **feat = NULL;
	uint32_t *weight = NULL, n = 0;
	long interval_ms = argc > 1 ? atol(argv[1]) : 50, loads = 0, errs = 0;
	struct timespec iv = { interval_ms / 1000, (interval_ms % 1000) * 1000000L };

	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	while (!stop) {
		struct timespec ts;
		int rc = slurm_load_node(last, &cur, SHOW_ALL);

		clock_gettime(CLOCK_REALTIME, &ts);
		if (rc == SLURM_SUCCESS) {
			long long ns = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;

			loads++;
			last = cur->last_update;
			if (cur->record_count != n) {
				for (uint32_t i = 0; i < n; i++)
					free(feat[i]);
				free(feat);
				free(weight);
				n = cur->record_count;
				feat = calloc(n, sizeof(*feat));
				weight = calloc(n, sizeof(*weight));
				if (!feat || !weight)
					return 1;
			}
			for (uint32_t i = 0; i < n; i++) {
				const node_info_t *ni = &cur->node_array[i];
				const char *f = ni->features ? ni->features : "";

				if (!ni->name)
					continue;
				if (feat[i] && !strcmp(feat[i], f) &&
				    weight[i] == ni->weight)
					continue;
				free(feat[i]);
				feat[i] = strdup(f);
				weight[i] = ni->weight;
				printf("%lld %s %u %s\n", ns, ni->name, ni->weight,
				       *f ? f : "-");
			}
			fflush(stdout);
			slurm_free_node_info_msg(cur);
			cur = NULL;
		} else if (slurm_get_errno() != SLURM_NO_CHANGE_IN_DATA) {
			errs++;
			fprintf(stderr, "nodewatch: slurm_load_node: %s\n",
				slurm_strerror(slurm_get_errno()));
		}
		nanosleep(&iv, NULL);
	}
	fprintf(stderr, "# loads %ld errors %ld\n", loads, errs);
	return 0;
}
