/* The libslurm side of the reconcile: load nodes, jobs and reservations,
 * describe them to the pure decisions (reconcile.c, resv.c), and carry out
 * the actions they return. */
#ifndef OT_SLURM_APPLY_H
#define OT_SLURM_APPLY_H

#include <stdbool.h>

#include "feed.h"
#include "resv.h"

struct apply_opts {
	/* The schedule's windows without a guest; NULL: not known (never
	 * fetched, or the last fetch is too old), so reservations are left as
	 * they are and no job is warned or requeued for a window. */
	const struct windows *windows;
	int warn_lead_s;      /* signal this long before a window starts */
	int warn_signal;      /* e.g. SIGUSR1 */
	const char *warn_signame; /* "USR1", for comments and logs */
	bool declare_nodes;   /* create unseen feed nodes State=CLOUD */
	/* Send identical node updates as one slurm_update_node with a
	 * hostlist (false: --no-batch, one call per node). */
	bool batch;
};

/* One reconcile cycle against slurmctld: with a whole feed every node Slurm
 * has and the reservations; with a delta (feed->delta) only the feed's nodes,
 * each loaded on its own. Returns the number of libslurm calls that failed
 * (0: everything applied), or -1 if nodes or jobs could not be loaded at all.
 * Failures are logged and never stop the cycle. */
int apply_cycle(const struct feed *feed, const struct apply_opts *o);

/* slurm_power_saving: slurmctld has a SuspendProgram (power saving is on). */
bool slurm_power_saving(void);

/* slurmctld's own Slurm version, from its configuration (slurm_conf_t
 * version, as `scontrol show config` prints SLURM_VERSION); NULL when
 * slurmctld cannot be asked. The caller frees it. */
char *slurm_controller_version(void);

#endif
