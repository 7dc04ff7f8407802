/*
 * spank_overtime: SPANK plugin for Overtime compute guests.
 *
 * Overtime turns pool PCs into Slurm nodes: a node agent on each desktop runs
 * a compute guest, and slurmd runs inside the guest.  This plugin connects a
 * job's life in the guest to the node agent on the host, and lets users keep
 * their jobs off desktops people are working at.
 *
 * plugstack.conf (on the controller, login and compute nodes alike):
 *
 *   required spank_overtime.so agent=file:/run/overtime/agent-url tasks=idle
 *
 * Arguments:
 *   agent=URL           node agent's HTTP endpoint on the host side of the
 *                       guest network; without it the job calls are skipped
 *                       (logged).
 *   agent=file:PATH     read that URL from PATH when a job needs it (the
 *                       guest's init writes it from OVERTIME_AGENT_URL).
 *   tasks=idle|normal   idle (default): job tasks run at nice 19 + SCHED_IDLE.
 *   timeout=MS          HTTP timeout of the agent calls (default 2000).
 * Unknown or malformed arguments make slurm_spank_init fail (return -1), so a
 * "required" plugin stops srun/sbatch/slurmd/slurmstepd loudly instead of
 * letting jobs run without it.
 *
 * What runs where (spank_context()):
 *   all contexts            slurm_spank_init: check arguments, register
 *                           --desktop=allow|avoid|only-dedicated.
 *   S_CTX_LOCAL/ALLOCATOR   (srun, sbatch, salloc) the --desktop callback
 *                           validates the value; Slurm forwards it to the
 *                           controller as _SLURM_SPANK_OPTION_overtime_desktop,
 *                           where job_submit.lua turns it into a constraint.
 *   S_CTX_REMOTE            (slurmstepd) slurm_spank_task_init, as the job
 *                           user right before exec: tasks=idle priority.
 *                           slurm_spank_exit of the batch step (root, job
 *                           still running): POST {agent}/v1/jobs/ID/progress,
 *                           the report so far into the job's AdminComment.
 *   S_CTX_JOB_SCRIPT        (slurmd prolog/epilog, as root; note that Slurm
 *                           does not call slurm_spank_init here)
 *                           slurm_spank_job_prolog: POST {agent}/v1/jobs/ID/start
 *                           slurm_spank_job_epilog: POST {agent}/v1/jobs/ID/end,
 *                           log the job's interference report.
 *
 * Agent failures never fail a job: the job runs, only its Overtime report is
 * missing, and the log says so.
 *
 * There is no global state: each callback parses its arguments (Slurm passes
 * them to every callback) and frees them before returning.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <slurm/spank.h>

#include "agent_client.h"
#include "config.h"
#include "options.h"
#include "report.h"
#include "task.h"

/*
 * Built with -fvisibility=hidden so that only what Slurm looks up is
 * exported; everything between push and pop is.
 */
#pragma GCC visibility push(default)

SPANK_PLUGIN(overtime, 1)

/* Parse plugin arguments, logging the error.  Returns 0 or -1. */
static int load_config(int ac, char **av, struct ot_config *cfg)
{
	char err[512];

	if (ot_config_parse(ac, av, cfg, err, sizeof(err)) < 0) {
		slurm_error("overtime: plugstack.conf: %s", err);
		return -1;
	}
	return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	struct ot_config cfg;
	spank_context_t ctx = spank_context();

	if (ctx == S_CTX_ERROR) {
		slurm_error("overtime: cannot determine the SPANK context");
		return -1;
	}
	/*
	 * -1, not ESPANK_BAD_ARG: Slurm 22.05 logs any non-zero return of a
	 * required plugin, but srun, sbatch, slurmd and slurmstepd only abort
	 * when spank init returns < 0, and ESPANK_BAD_ARG (3001) is positive.
	 * With it, a job was submitted and ran without the plugin.
	 */
	if (load_config(ac, av, &cfg) < 0)
		return -1;
	ot_config_free(&cfg);

	/*
	 * Register in every context, as spank.h requires: srun, sbatch and
	 * salloc parse --desktop, slurmstepd receives the forwarded value, and
	 * slurmd and the prolog/epilog need it known to read it back.
	 */
	if (ot_options_register(sp) < 0)
		return -1;
	return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	struct ot_config cfg;

	(void)sp;
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	/* Arguments were checked in slurm_spank_init of this same process. */
	if (load_config(ac, av, &cfg) < 0)
		return 0;
	/* Failures are logged inside; a job must not fail for its nice value. */
	if (cfg.tasks == OT_TASKS_IDLE)
		ot_task_make_idle();
	ot_config_free(&cfg);
	return 0;
}

enum job_call { CALL_START, CALL_END, CALL_PROGRESS };

static void handle_start(uint32_t jobid, const struct ot_http_response *resp)
{
	struct ot_job_start st;
	char err[256];

	if (ot_parse_start(resp->body, resp->len, &st, err, sizeof(err)) < 0) {
		slurm_error("overtime: job %" PRIu32 ": unusable answer to the start call: %s; the job runs, its report may be missing",
			    jobid, err);
		return;
	}
	slurm_info("overtime: job %" PRIu32 " started on host %s (mode %s)",
		   jobid, st.host[0] ? st.host : "?",
		   st.mode[0] ? st.mode : "?");
}

static void handle_end(uint32_t jobid, const struct ot_http_response *resp)
{
	struct ot_job_report rep;
	char err[256];
	char record[1024];

	if (ot_parse_report(resp->body, resp->len, &rep, err, sizeof(err)) < 0) {
		slurm_error("overtime: job %" PRIu32 ": unusable job report from the agent: %s; no Overtime report logged",
			    jobid, err);
		return;
	}
	ot_format_report(&rep, record, sizeof(record));
	slurm_info("overtime: job %" PRIu32 " report: %s", jobid,
		   rep.summary[0] ? rep.summary : record);
	slurm_verbose("overtime: job %" PRIu32 " record: %s", jobid, record);
}

/*
 * The batch step's end, still inside the running job: Slurm accepts a job
 * update only until the job completes (an epilog is too late: "Job has
 * already finished"), so this is where the report so far goes into the job's
 * AdminComment.  slurmstepd runs this as root and carries libslurm, which
 * resolves slurm_update_job.  The final report (epilog) goes to the site
 * manager (overtime job-report).
 */
static void handle_progress(uint32_t jobid, const struct ot_http_response *resp)
{
	struct ot_job_report rep;
	job_desc_msg_t desc;
	char err[256];

	if (ot_parse_report(resp->body, resp->len, &rep, err, sizeof(err)) < 0 || !rep.summary[0]) {
		slurm_error("overtime: job %" PRIu32 ": unusable report from the agent: %s; AdminComment not set",
			    jobid, err);
		return;
	}
	slurm_init_job_desc_msg(&desc);
	desc.job_id = jobid;
	desc.admin_comment = rep.summary;
	if (slurm_update_job(&desc) != SLURM_SUCCESS)
		slurm_error("overtime: job %" PRIu32 ": AdminComment not set: %s",
			    jobid, slurm_strerror(errno));
	else
		slurm_verbose("overtime: job %" PRIu32 ": AdminComment set", jobid);
}

/* Shared body of the prolog, epilog and batch step exit: never fails the job. */
static int job_call(spank_t sp, int ac, char **av, enum job_call call)
{
	const char *verb = call == CALL_START ? "start" : call == CALL_END ? "end" : "progress";
	const char *consequence = call == CALL_START ?
		"the job runs, but its Overtime report will be missing" :
		"no Overtime report for this job";
	struct ot_http_response resp = { 0 };
	struct ot_config cfg;
	char url[1024];
	char err[768];
	uint32_t jobid = 0;
	spank_err_t rc;

	if (spank_context() != (call == CALL_PROGRESS ? S_CTX_REMOTE : S_CTX_JOB_SCRIPT))
		return 0;
	/*
	 * slurm_spank_init is not called in this context, so this is where a
	 * bad argument is seen; failing the prolog would drain the node, which
	 * is what "misconfiguration must be loud" means for a prolog.  (Normally
	 * slurmd already refused to start, its own slurm_spank_init failing.)
	 * -1 as in slurm_spank_init: a positive code is only logged.
	 */
	if (load_config(ac, av, &cfg) < 0)
		return -1;

	rc = spank_get_item(sp, S_JOB_ID, &jobid);
	if (rc != ESPANK_SUCCESS) {
		slurm_error("overtime: job %s: cannot get the job id: %s; %s",
			    verb, spank_strerror(rc), consequence);
		goto out;
	}
	if (ot_config_resolve_agent(&cfg, err, sizeof(err)) < 0) {
		slurm_error("overtime: job %" PRIu32 ": %s; %s", jobid, err, consequence);
		goto out;
	}
	if (!cfg.agent) {
		slurm_info("overtime: job %" PRIu32 ": no agent= in plugstack.conf, skipping the node agent's job %s call",
			   jobid, verb);
		goto out;
	}
	if (ot_agent_job_url(cfg.agent, jobid, verb, url, sizeof(url)) < 0) {
		slurm_error("overtime: job %" PRIu32 ": agent URL too long; %s",
			    jobid, consequence);
		goto out;
	}
	if (ot_agent_post(url, cfg.timeout_ms, &resp, err, sizeof(err)) < 0) {
		slurm_error("overtime: job %" PRIu32 ": POST %s failed: %s; %s",
			    jobid, url, err, consequence);
		goto out;
	}
	if (call == CALL_START)
		handle_start(jobid, &resp);
	else if (call == CALL_END)
		handle_end(jobid, &resp);
	else
		handle_progress(jobid, &resp);
out:
	ot_http_response_free(&resp);
	ot_config_free(&cfg);
	return 0;
}

int slurm_spank_job_prolog(spank_t sp, int ac, char **av)
{
	return job_call(sp, ac, av, CALL_START);
}

int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
	return job_call(sp, ac, av, CALL_END);
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	uint32_t step = 0;

	/* Only the batch script's step ends with the job still running. */
	if (spank_context() != S_CTX_REMOTE ||
	    spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS ||
	    step != SLURM_BATCH_SCRIPT)
		return 0;
	return job_call(sp, ac, av, CALL_PROGRESS);
}

#pragma GCC visibility pop
