/*
 * The job option --desktop=allow|avoid|only-dedicated.
 *
 * The plugin only validates it.  sbatch/salloc/srun forward SPANK options to
 * the controller in the job's spank environment as
 * _SLURM_SPANK_OPTION_overtime_desktop=VALUE, and job_submit.lua (next to
 * this file) turns the value into a node constraint there: node selection
 * happens in slurmctld, long before any code of ours runs on a node.
 */
#ifndef OVERTIME_OPTIONS_H
#define OVERTIME_OPTIONS_H

#include <slurm/spank.h>

enum ot_desktop {
	OT_DESKTOP_ALLOW,          /* any node */
	OT_DESKTOP_AVOID,          /* constraint dedicated|desk-empty */
	OT_DESKTOP_ONLY_DEDICATED, /* constraint dedicated */
};

/* Return 0 and set *out for a valid value, -1 otherwise. */
int ot_desktop_parse(const char *value, enum ot_desktop *out);

/* Register --desktop; must be called from slurm_spank_init in every context. */
int ot_options_register(spank_t sp);

#endif
