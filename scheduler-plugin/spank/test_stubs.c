/*
 * Stand-ins for the functions slurmd/slurmstepd provide to plugins, so the
 * tests can link config.c, report.c, options.c and task.c, or dlopen the
 * plugin (test_plugin, linked with -rdynamic).  Log lines are printed and
 * kept for assertions.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "test_stubs.h"

/* Exported despite -fvisibility=hidden: test_plugin's dlopened .so needs them. */
#pragma GCC visibility push(default)

char test_last_log[1024];
char test_log[8192];
spank_context_t test_context = S_CTX_LOCAL;
uint32_t test_jobid = 42;
/* The job's ids as slurmstepd hands them out (S_JOB_UID & co.). */
uid_t test_uid;
gid_t test_gid;
gid_t *test_gids;
int test_ngids;
struct spank_option test_registered_option;
int test_registered_count;

static void log_line(const char *level, const char *fmt, va_list ap)
{
	size_t used = strlen(test_log);

	vsnprintf(test_last_log, sizeof(test_last_log), fmt, ap);
	fprintf(stderr, "  [%s] %s\n", level, test_last_log);
	/* Everything logged since the last test_log_reset(), one per line. */
	snprintf(test_log + used, sizeof(test_log) - used, "[%s] %s\n", level,
		 test_last_log);
}

void slurm_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line("info", fmt, ap);
	va_end(ap);
}

void slurm_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line("error", fmt, ap);
	va_end(ap);
}

void slurm_verbose(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line("verbose", fmt, ap);
	va_end(ap);
}

spank_err_t spank_option_register(spank_t sp, struct spank_option *opt)
{
	(void)sp;
	test_registered_option = *opt;
	test_registered_count++;
	return ESPANK_SUCCESS;
}

const char *spank_strerror(spank_err_t err)
{
	(void)err;
	return "stub error";
}

void test_log_reset(void)
{
	test_log[0] = '\0';
	test_last_log[0] = '\0';
}

spank_context_t spank_context(void)
{
	return test_context;
}

spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...)
{
	spank_err_t rc = ESPANK_SUCCESS;
	va_list ap;

	(void)sp;
	va_start(ap, item);
	switch (item) {
	case S_JOB_ID:
		*va_arg(ap, uint32_t *) = test_jobid;
		break;
	case S_JOB_UID:
		*va_arg(ap, uid_t *) = test_uid;
		break;
	case S_JOB_GID:
		*va_arg(ap, gid_t *) = test_gid;
		break;
	case S_JOB_SUPPLEMENTARY_GIDS:
		*va_arg(ap, gid_t **) = test_gids;
		*va_arg(ap, int *) = test_ngids;
		break;
	default:
		rc = ESPANK_NOT_AVAIL;
	}
	va_end(ap);
	return rc;
}

/* libslurm, as slurmstepd provides it: the AdminComment written last. */
char test_admin_comment[1024];

void slurm_init_job_desc_msg(job_desc_msg_t *d)
{
	memset(d, 0, sizeof(*d));
}

int slurm_update_job2(job_desc_msg_t *d, job_array_resp_msg_t **resp)
{
	snprintf(test_admin_comment, sizeof(test_admin_comment), "%s %s",
		 d->job_id_str ? d->job_id_str : "", d->admin_comment ? d->admin_comment : "");
	*resp = NULL;
	return SLURM_SUCCESS;
}

void slurm_free_job_array_resp(job_array_resp_msg_t *resp)
{
	(void)resp;
}

char *slurm_strerror(int err)
{
	return strerror(err);
}

#pragma GCC visibility pop
