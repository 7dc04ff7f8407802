/*
 * Task priority on desktop nodes.
 *
 * The guest already runs in an idle cgroup on the host, but inside the guest
 * slurmd, sshd and the agent's helpers share the vCPUs with the job; running
 * job tasks at nice 19 + SCHED_IDLE keeps the guest's own services responsive
 * (node health checks, slurmd pings) when the host throttles the guest.
 */
#define _GNU_SOURCE /* SCHED_IDLE */

#include "task.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>

#include <slurm/spank.h>

int ot_task_make_idle(void)
{
	struct sched_param param = { .sched_priority = 0 };
	int failures = 0;

	/*
	 * Called from slurm_spank_task_init: we are the forked task, single-
	 * threaded and already the job user, just before exec.  Both settings
	 * are inherited by everything the job starts.  Raising one's own nice
	 * value and switching to SCHED_IDLE need no privilege.
	 */
	if (setpriority(PRIO_PROCESS, 0, 19) < 0) {
		slurm_error("overtime: setpriority(19) failed: %s; task keeps its nice value",
			    strerror(errno));
		failures++;
	}
	/*
	 * Not SCHED_RESET_ON_FORK: the job's children must stay idle too.
	 * SCHED_IDLE is for the calling thread, i.e. the whole task here.
	 */
	if (sched_setscheduler(0, SCHED_IDLE, &param) < 0) {
		slurm_error("overtime: sched_setscheduler(SCHED_IDLE) failed: %s; task keeps its scheduling policy",
			    strerror(errno));
		failures++;
	}
	if (failures == 0)
		slurm_verbose("overtime: task runs at nice 19, SCHED_IDLE");
	return failures;
}
