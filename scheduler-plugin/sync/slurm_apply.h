/* The libslurm side of the reconcile: load nodes and jobs, describe them to
 * reconcile_node(), and carry out the actions it returns. */
#ifndef OT_SLURM_APPLY_H
#define OT_SLURM_APPLY_H

#include "feed.h"

/* One reconcile cycle against slurmctld. Returns the number of libslurm calls
 * that failed (0: everything applied), or -1 if nodes or jobs could not be
 * loaded at all. Failures are logged and never stop the cycle. */
int apply_cycle(const struct feed *feed);

#endif
