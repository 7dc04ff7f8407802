/* Scheduling priority of job tasks (tasks=idle). */
#ifndef OVERTIME_TASK_H
#define OVERTIME_TASK_H

/*
 * Make the calling process nice 19 and SCHED_IDLE.  Failures are logged with
 * slurm_error and otherwise ignored.  Returns the number of failures (0..2)
 * so tests can check it.
 */
int ot_task_make_idle(void);

#endif
