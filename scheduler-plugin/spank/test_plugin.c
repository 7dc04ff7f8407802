/*
 * Smoke test of the built spank_overtime.so through its exported entry
 * points, the way Slurm uses it: dlopen, dlsym, call with plugstack.conf
 * arguments in each context.  Slurm's side is test_stubs.c, exported from
 * this executable with -rdynamic.
 */
#define _GNU_SOURCE

#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "test_check.h"
#include "test_server.h"
#include "test_stubs.h"

static spank_f *sym(void *h, const char *name)
{
	spank_f *f;

	*(void **)&f = dlsym(h, name);
	if (!f) {
		fprintf(stderr, "FAIL: %s not found: %s\n", name, dlerror());
		test_failures++;
	}
	return f;
}

static const char report[] =
	"{\"job\":\"42\",\"host\":\"pc1\",\"start\":\"2024-05-01T10:00:00Z\","
	"\"end\":\"2024-05-01T10:00:12.5Z\",\"seconds\":12.5,"
	"\"throttledSeconds\":3.1,\"frozenSeconds\":2.0,"
	"\"ownerActiveFraction\":0.25,\"guestCPUSeconds\":9.8,"
	"\"stealSeconds\":0.4,\"desktopSlowdown\":0.03,"
	"\"actions\":{\"throttle\":2,\"freeze\":1,\"evict\":0},"
	"\"summary\":\"one-line human text\"}\n";

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "./spank_overtime.so";
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	spank_f *init, *task_init, *prolog, *epilog;
	char agent[64];
	struct server srv;

	if (!h) {
		fprintf(stderr, "FAIL: dlopen %s: %s\n", path, dlerror());
		return 1;
	}
	const char *name = dlsym(h, "plugin_name");
	const char *type = dlsym(h, "plugin_type");

	CHECK(name && strcmp(name, "overtime") == 0);
	CHECK(type && strcmp(type, "spank") == 0);
	CHECK(dlsym(h, "plugin_version") != NULL);
	CHECK(dlsym(h, "ot_parse_report") == NULL); /* internals stay hidden */
	init = sym(h, "slurm_spank_init");
	task_init = sym(h, "slurm_spank_task_init");
	prolog = sym(h, "slurm_spank_job_prolog");
	epilog = sym(h, "slurm_spank_job_epilog");
	if (test_failures)
		return 1;

	/* init: good and bad plugstack.conf lines, in the allocator (sbatch). */
	{
		char *good[] = { "agent=http://10.31.0.1:9101", "tasks=idle",
				 "timeout=1500" };
		char *bad[] = { "agent=http://10.31.0.1:9101", "task=idle" };

		test_context = S_CTX_ALLOCATOR;
		CHECK(init(NULL, 3, good) == 0);
		CHECK(test_registered_count == 1);
		CHECK_STR(test_registered_option.name, "desktop");
		test_log_reset();
		CHECK(init(NULL, 2, bad) == -1);
		CHECK_CONTAINS(test_log, "[error] overtime: plugstack.conf: unknown plugin argument \"task=idle\"");
		CHECK(test_registered_count == 1); /* nothing registered */
	}

	/* A bad home= stops the plugin like any other bad argument. */
	{
		char *bad[] = { "home=home/%u" };

		test_log_reset();
		CHECK(init(NULL, 1, bad) == -1);
		CHECK_CONTAINS(test_log, "[error] overtime: plugstack.conf: home=home/%u: must be an absolute path");
	}

	/*
	 * slurmstepd (S_CTX_REMOTE): the job's ids against this process's own
	 * user namespace.  Its own ids are mapped; (uid_t)-1 never is, in any
	 * namespace, so the failures are the same wherever the tests run.
	 */
	{
		gid_t gids[] = { getgid(), (gid_t)-1 };
		int registered = test_registered_count;

		test_context = S_CTX_REMOTE;
		test_uid = getuid();
		test_gid = getgid();
		test_gids = gids;
		test_ngids = 1;
		test_log_reset();
		CHECK(init(NULL, 0, NULL) == 0);
		CHECK_STR(test_log, "");
		CHECK(test_registered_count == registered + 1);

		test_uid = (uid_t)-1;
		test_log_reset();
		CHECK(init(NULL, 0, NULL) == -1);
		CHECK_CONTAINS(test_log, "[error] overtime: the job's uid 4294967295 is outside this guest's user ids (");
		CHECK_CONTAINS(test_log, "): the site's guest definition (jobUsers) must cover it\n");

		test_uid = getuid();
		test_gid = (gid_t)-1;
		test_log_reset();
		CHECK(init(NULL, 0, NULL) == -1);
		CHECK_CONTAINS(test_log, "[error] overtime: the job's gid 4294967295 is outside this guest's group ids (");

		test_gid = getgid();
		test_ngids = 2;
		test_log_reset();
		CHECK(init(NULL, 0, NULL) == -1);
		CHECK_CONTAINS(test_log, "[error] overtime: the job's supplementary gid 4294967295 is outside");
		CHECK(test_registered_count == registered + 1);
		test_gids = NULL;
		test_ngids = 0;
	}

	/* Job script context without agent=: calls skipped, logged. */
	test_context = S_CTX_JOB_SCRIPT;
	unsetenv("SLURM_JOB_USER");
	test_log_reset();
	CHECK(prolog(NULL, 0, NULL) == 0);
	CHECK_CONTAINS(test_log, "[error] overtime: job 42: SLURM_JOB_USER is not set in the prolog's environment; the job runs by uid, without a passwd entry\n");
	CHECK_CONTAINS(test_log, "[info] overtime: job 42: no agent= in plugstack.conf");

	/*
	 * The job user's passwd entry, against the real /etc/passwd, so only
	 * cases that never write: root is there already (found without the
	 * lock, so this works unprivileged too), a name taken by another uid,
	 * a name refused.  Writing is test_identity's, in a directory of its own.
	 */
	setenv("SLURM_JOB_UID", "4294967294", 1);
	setenv("SLURM_JOB_GID", "4294967294", 1);
	setenv("SLURM_JOB_USER", "root", 1);
	test_log_reset();
	CHECK(prolog(NULL, 0, NULL) == 0);
	CHECK_CONTAINS(test_log, "[error] overtime: job 42: not adding root (uid 4294967294) to /etc/passwd: that name is uid 0 there; the job still runs, by uid\n");
	setenv("SLURM_JOB_USER", "ro:ot", 1);
	test_log_reset();
	CHECK(prolog(NULL, 0, NULL) == 0);
	CHECK_CONTAINS(test_log, "[error] overtime: job 42: SLURM_JOB_USER \"ro:ot\" is not a name this plugin writes into passwd");
	setenv("SLURM_JOB_USER", "root", 1);
	setenv("SLURM_JOB_UID", "0", 1);
	setenv("SLURM_JOB_GID", "0", 1);

	/* Prolog against an agent. */
	{
		const char *ok = "{\"job\":\"42\",\"host\":\"pc1\",\"mode\":\"desktop\"}";

		srv = serve_once("POST /v1/jobs/42/start HTTP/1.1", 200, ok,
				 strlen(ok), 0, 0);
		snprintf(agent, sizeof(agent), "agent=http://127.0.0.1:%d",
			 srv.port);
		char *av[] = { agent };

		test_log_reset();
		CHECK(prolog(NULL, 1, av) == 0);
		CHECK_STR(test_log, "[verbose] overtime: job 42: root (uid 0) is in /etc/passwd already\n"
				    "[info] overtime: job 42 started on host pc1 (mode desktop)\n");
		reap(srv);
	}

	/* Epilog with a report. */
	{
		srv = serve_once("POST /v1/jobs/42/end HTTP/1.1", 200, report,
				 strlen(report), 0, 0);
		snprintf(agent, sizeof(agent), "agent=http://127.0.0.1:%d/",
			 srv.port);
		char *av[] = { agent, "timeout=1000" };

		test_log_reset();
		CHECK(epilog(NULL, 2, av) == 0);
		CHECK_CONTAINS(test_log, "[info] overtime: job 42 report: one-line human text\n");
		CHECK_CONTAINS(test_log, "[verbose] overtime: job 42 record: job=42 host=pc1 ");
		reap(srv);
	}

	/* Failures: unreachable agent, agent error, garbage. None fails the job. */
	{
		char *av[] = { "agent=http://127.0.0.1:1", "timeout=500" };

		test_log_reset();
		CHECK(prolog(NULL, 2, av) == 0);
		CHECK_CONTAINS(test_log, "[error] overtime: job 42: POST http://127.0.0.1:1/v1/jobs/42/start failed: ");
		CHECK_CONTAINS(test_log, "; the job runs, but its Overtime report will be missing");

		const char *conflict = "{\"error\":\"no start recorded for job 42\"}";

		srv = serve_once("POST /v1/jobs/42/end ", 409, conflict,
				 strlen(conflict), 0, 0);
		snprintf(agent, sizeof(agent), "agent=http://127.0.0.1:%d",
			 srv.port);
		char *av2[] = { agent };

		test_log_reset();
		CHECK(epilog(NULL, 1, av2) == 0);
		CHECK_CONTAINS(test_log, "failed: HTTP 409: no start recorded for job 42; no Overtime report for this job");
		reap(srv);

		const char *junk = "{\"summary\": \"unterminated";

		srv = serve_once("POST /v1/jobs/42/end ", 200, junk,
				 strlen(junk), 0, 0);
		snprintf(agent, sizeof(agent), "agent=http://127.0.0.1:%d",
			 srv.port);
		test_log_reset();
		CHECK(epilog(NULL, 1, av2) == 0);
		CHECK_CONTAINS(test_log, "[error] overtime: job 42: unusable job report from the agent: malformed JSON");
		reap(srv);
	}

	/* Prolog and epilog do nothing outside the job script context. */
	test_context = S_CTX_REMOTE;
	test_log_reset();
	CHECK(prolog(NULL, 0, NULL) == 0);
	CHECK_STR(test_log, "");

	/*
	 * task_init: idle by default, untouched with tasks=normal (compared with
	 * our own values, in case the tests themselves run under nice).
	 */
	errno = 0;
	int own_nice = getpriority(PRIO_PROCESS, 0);
	int own_policy = sched_getscheduler(0);

	for (int idle = 1; idle >= 0; idle--) {
		pid_t pid = fork();
		int status;

		if (pid == 0) {
			char *av[] = { idle ? "tasks=idle" : "tasks=normal" };
			int rc = task_init(NULL, 1, av);
			int want_nice = idle ? 19 : own_nice;
			int want_policy = idle ? SCHED_IDLE : own_policy;

			_exit(rc == 0 &&
			      getpriority(PRIO_PROCESS, 0) == want_nice &&
			      sched_getscheduler(0) == want_policy ? 0 : 1);
		}
		CHECK(waitpid(pid, &status, 0) == pid);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}

	dlclose(h);
	if (test_failures) {
		fprintf(stderr, "test_plugin: %d failure(s)\n", test_failures);
		return 1;
	}
	printf("test_plugin: ok\n");
	return 0;
}
