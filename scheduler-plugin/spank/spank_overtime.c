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
 *   home=PATTERN        home directory of the passwd entries the prolog
 *                       writes (default /home/%u, %u = user name, %% = %).
 * Unknown or malformed arguments make slurm_spank_init fail (return -1), so a
 * "required" plugin stops srun/sbatch/slurmd/slurmstepd loudly instead of
 * letting jobs run without it.
 *
 * What runs where (spank_context()):
 *   all contexts            slurm_spank_init: check arguments, register
 *                           --desktop=allow|avoid|only-dedicated.
 *                           In S_CTX_REMOTE (slurmstepd, root, before any
 *                           task): fail the step if the job's uid, gid or a
 *                           supplementary gid is not mapped in the guest's
 *                           user namespace (identity.c).
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
 *                           slurm_spank_job_prolog: give the job user a
 *                           name in the guest's /etc/passwd (identity.c),
 *                           then POST {agent}/v1/jobs/ID/start
 *                           slurm_spank_job_epilog: POST {agent}/v1/jobs/ID/end,
 *                           log the job's interference report.
 *
 * Agent failures never fail a job: the job runs, only its Overtime report is
 * missing, and the log says so.  Neither does a passwd entry that cannot be
 * written: the job runs by uid.  An unmapped id does fail the step, which
 * would fail anyway, at setgroups/setresuid with a bare EINVAL.
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
#include "identity.h"
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

/*
 * slurmstepd, before it forks the tasks: every id the step will take must be
 * mapped in the guest's user namespace, or setgroups/setresuid fail with
 * EINVAL and the user sees a launch failure with no reason.  Returns -1 for
 * an unmapped id; 0 otherwise, also when the ids or maps cannot be read (the
 * check explains a failure, it must not cause one).
 */
static int check_job_ids(spank_t sp)
{
	uid_t uid;
	gid_t gid;
	gid_t *gids = NULL;
	int ngids = 0;
	char err[1024];
	spank_err_t rc;

	if ((rc = spank_get_item(sp, S_JOB_UID, &uid)) != ESPANK_SUCCESS ||
	    (rc = spank_get_item(sp, S_JOB_GID, &gid)) != ESPANK_SUCCESS) {
		slurm_error("overtime: cannot get the job's uid and gid: %s; not checking them against the guest's user namespace",
			    spank_strerror(rc));
		return 0;
	}
	rc = spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &gids, &ngids);
	if (rc != ESPANK_SUCCESS) {
		slurm_error("overtime: cannot get the job's supplementary gids: %s; checking only its uid and gid",
			    spank_strerror(rc));
		gids = NULL;
		ngids = 0;
	}
	switch (ot_check_ids(uid, gid, gids, ngids, err, sizeof(err))) {
	case OT_IDS_MAPPED:
		return 0;
	case OT_IDS_UNMAPPED:
		slurm_error("overtime: %s", err);
		return -1;
	case OT_IDS_UNCHECKED:
	default:
		slurm_error("overtime: cannot check the job's ids against the guest's user namespace: %s",
			    err);
		return 0;
	}
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

	if (ctx == S_CTX_REMOTE && check_job_ids(sp) < 0)
		return -1;

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
	job_array_resp_msg_t *tasks = NULL;
	char err[256];
	char id[16];
	int rc;

	if (ot_parse_report(resp->body, resp->len, &rep, err, sizeof(err)) < 0 || !rep.summary[0]) {
		slurm_error("overtime: job %" PRIu32 ": unusable report from the agent: %s; AdminComment not set",
			    jobid, err);
		return;
	}
	slurm_init_job_desc_msg(&desc);
	/*
	 * The job by its id's text: job_id_str is in every release from 22.05 on,
	 * the numeric job_id is gone from job_desc_msg_t in 25.11.  With
	 * job_id_str, slurm_update_job2: slurm_update_job logs "Use
	 * slurm_update_job2() ..." as an error, into the job's own output.
	 */
	snprintf(id, sizeof(id), "%" PRIu32, jobid);
	desc.job_id_str = id;
	desc.admin_comment = rep.summary;
	rc = slurm_update_job2(&desc, &tasks);
	if (rc == SLURM_SUCCESS && tasks && tasks->job_array_count > 0 && tasks->error_code[0]) {
		errno = (int)tasks->error_code[0];
		rc = SLURM_ERROR;
	}
	slurm_free_job_array_resp(tasks);
	if (rc != SLURM_SUCCESS)
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

/*
 * The prolog's half of identity.c: the job user gets a name in the guest
 * (Debian 12 has no nss_slurm, and the guest's image knows no site users).
 * Never fails the prolog, which would drain the node: without a name the job
 * still runs, by uid.  A bad argument is left to job_call, which logs it and
 * fails the prolog.
 */
static void name_job_user(spank_t sp, int ac, char **av)
{
	struct ot_config cfg;
	struct ot_job_user user;
	char msg[1024];
	uint32_t jobid = 0;

	if (ot_config_parse(ac, av, &cfg, msg, sizeof(msg)) < 0)
		return;
	(void)spank_get_item(sp, S_JOB_ID, &jobid);
	if (ot_job_user_from_env(&user, msg, sizeof(msg)) < 0) {
		slurm_error("overtime: job %" PRIu32 ": %s; the job runs by uid, without a passwd entry",
			    jobid, msg);
		goto out;
	}
	/*
	 * A batch job's launch fails before slurmstepd's init can check the ids
	 * (slurmstepd chowns the job's spool directory first, EINVAL): say here,
	 * in slurmd's log, which id the guest lacks.  The prolog still succeeds:
	 * a failed prolog would drain the node for everyone else's jobs.
	 */
	if (ot_check_ids(user.uid, user.gid, NULL, 0, msg, sizeof(msg)) == OT_IDS_UNMAPPED) {
		slurm_error("overtime: job %" PRIu32 ": %s; its launch fails", jobid, msg);
		goto out;
	}
	switch (ot_ensure_job_user("/etc", &user,
				   cfg.home ? cfg.home : OT_HOME_DEFAULT,
				   msg, sizeof(msg))) {
	case OT_ENSURE_ADDED:
		slurm_info("overtime: job %" PRIu32 ": %s", jobid, msg);
		break;
	case OT_ENSURE_PRESENT:
		slurm_verbose("overtime: job %" PRIu32 ": %s", jobid, msg);
		break;
	case OT_ENSURE_ERROR:
	default:
		slurm_error("overtime: job %" PRIu32 ": %s; the job still runs, by uid",
			    jobid, msg);
		break;
	}
out:
	ot_config_free(&cfg);
}

int slurm_spank_job_prolog(spank_t sp, int ac, char **av)
{
	if (spank_context() == S_CTX_JOB_SCRIPT)
		name_job_user(sp, ac, av);
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
