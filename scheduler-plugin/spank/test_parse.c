/*
 * Tests of everything but the plugin entry points and HTTP: plugin argument
 * parsing, the agent's JSON answers, the report record, the --desktop option
 * and task priority.  Links config.o report.o options.o task.o and the stubs
 * (identity.c has its own, test_identity).
 */
#define _GNU_SOURCE /* SCHED_IDLE */

#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "options.h"
#include "report.h"
#include "task.h"
#include "test_check.h"
#include "test_stubs.h"

static const char valid_report[] =
	"{\"job\":\"123\",\"host\":\"pc1\",\"mode\":\"desktop\","
	"\"start\":\"2024-05-01T10:00:00Z\",\"end\":\"2024-05-01T10:00:12.5Z\","
	"\"seconds\":12.5,\"throttledSeconds\":3.1,\"frozenSeconds\":2.0,"
	"\"ownerActiveFraction\":0.25,\"guestCPUSeconds\":9.8,"
	"\"stealSeconds\":0.4,\"desktopSlowdown\":0.03,"
	"\"actions\":{\"throttle\":2,\"freeze\":1,\"evict\":0},"
	"\"summary\":\"one-line human text\","
	"\"somethingNew\":{\"nested\":[1,2,3]}}\n";

static void test_config(void)
{
	struct ot_config cfg;
	char err[256];

	{
		char *av[] = { NULL };

		CHECK(ot_config_parse(0, av, &cfg, err, sizeof(err)) == 0);
		CHECK(cfg.agent == NULL);
		CHECK(cfg.tasks == OT_TASKS_IDLE);
		CHECK(cfg.timeout_ms == 2000);
		CHECK(cfg.home == NULL); /* the prolog uses OT_HOME_DEFAULT */
		ot_config_free(&cfg);
	}
	{
		char *av[] = { "home=/scratch/%u", "home=/data/%u/home" };

		CHECK(ot_config_parse(2, av, &cfg, err, sizeof(err)) == 0);
		CHECK_STR(cfg.home, "/data/%u/home");
		ot_config_free(&cfg);
		CHECK(cfg.home == NULL);
	}
	{
		char *av[] = { "agent=http://10.31.0.1:9101", "tasks=normal",
			       "timeout=500" };

		CHECK(ot_config_parse(3, av, &cfg, err, sizeof(err)) == 0);
		CHECK_STR(cfg.agent, "http://10.31.0.1:9101");
		CHECK(cfg.tasks == OT_TASKS_NORMAL);
		CHECK(cfg.timeout_ms == 500);
		ot_config_free(&cfg);
		CHECK(cfg.agent == NULL);
	}
	{
		/* Last one wins, and the first agent string is not leaked. */
		char *av[] = { "agent=http://a", "agent=https://b:1/",
			       "tasks=idle" };

		CHECK(ot_config_parse(3, av, &cfg, err, sizeof(err)) == 0);
		CHECK_STR(cfg.agent, "https://b:1/");
		CHECK(cfg.tasks == OT_TASKS_IDLE);
		ot_config_free(&cfg);
	}

	struct {
		const char *arg;
		const char *msg;
	} bad[] = {
		{ "agnet=http://x", "unknown plugin argument \"agnet=http://x\"" },
		{ "verbose", "unknown plugin argument" },
		{ "agent=10.31.0.1:9101", "must be an http:// or https:// URL" },
		{ "agent=file:///etc/passwd", "takes an absolute path" },
		{ "agent=file:run/x", "takes an absolute path" },
		{ "agent=http://", "URL has no host" },
		{ "agent=", "must be an http" },
		{ "tasks=nice", "tasks=nice: must be idle or normal" },
		{ "timeout=0", "between 1 and" },
		{ "timeout=-5", "between 1 and" },
		{ "timeout=2s", "between 1 and" },
		{ "timeout=", "between 1 and" },
		{ "timeout=99999999999999999999", "between 1 and" },
		{ "home=", "home=: must be an absolute path" },
		{ "home=home/%u", "must be an absolute path" },
		{ "home=/home/%n", "home=/home/%n: only %u (the user name) and %% may follow '%'" },
		{ "home=/home:/%u", "must not contain ':'" },
		{ "home=/home/%u\nx::0:0::/:/bin/sh", "control characters" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *av[] = { "agent=http://ok", (char *)bad[i].arg };

		err[0] = '\0';
		CHECK(ot_config_parse(2, av, &cfg, err, sizeof(err)) == -1);
		CHECK_CONTAINS(err, bad[i].msg);
		CHECK(cfg.agent == NULL); /* freed on error */
	}
}

/* agent=file:PATH: the URL is read when a job needs it, and checked then. */
static void test_agent_file(void)
{
	struct ot_config cfg;
	char err[512];
	char path[] = "/tmp/ot-agent-url-XXXXXX";
	int fd = mkstemp(path);
	char *av[1];
	char arg[64];

	CHECK(fd >= 0);
	snprintf(arg, sizeof(arg), "agent=file:%s", path);
	av[0] = arg;
	CHECK(write(fd, "http://10.31.0.2:9101\n", 22) == 22);
	close(fd);
	CHECK(ot_config_parse(1, av, &cfg, err, sizeof(err)) == 0);
	CHECK(cfg.agent == NULL);
	CHECK(ot_config_resolve_agent(&cfg, err, sizeof(err)) == 0);
	CHECK_STR(cfg.agent, "http://10.31.0.2:9101");
	ot_config_free(&cfg);

	/* Not a URL in the file: refused when resolved. */
	fd = open(path, O_WRONLY | O_TRUNC);
	CHECK(write(fd, "10.31.0.2\n", 10) == 10);
	close(fd);
	CHECK(ot_config_parse(1, av, &cfg, err, sizeof(err)) == 0);
	CHECK(ot_config_resolve_agent(&cfg, err, sizeof(err)) == -1);
	CHECK_CONTAINS(err, "must be an http");
	ot_config_free(&cfg);

	/* Missing file (a submit host): an error only when a job needs it. */
	unlink(path);
	CHECK(ot_config_parse(1, av, &cfg, err, sizeof(err)) == 0);
	CHECK(ot_config_resolve_agent(&cfg, err, sizeof(err)) == -1);
	CHECK_CONTAINS(err, "No such file");
	ot_config_free(&cfg);
}

static void test_valid_report(void)
{
	struct ot_job_report r;
	char err[256] = "";
	char rec[1024];

	CHECK(ot_parse_report(valid_report, strlen(valid_report), &r, err,
			      sizeof(err)) == 0);
	CHECK_STR(err, "");
	CHECK_STR(r.job, "123");
	CHECK_STR(r.host, "pc1");
	CHECK_STR(r.mode, "desktop");
	CHECK_STR(r.start, "2024-05-01T10:00:00Z");
	CHECK_STR(r.end, "2024-05-01T10:00:12.5Z");
	CHECK(r.seconds == 12.5);
	CHECK(r.throttled_seconds == 3.1);
	CHECK(r.frozen_seconds == 2.0);
	CHECK(r.owner_active_fraction == 0.25);
	CHECK(r.guest_cpu_seconds == 9.8);
	CHECK(r.steal_seconds == 0.4);
	CHECK(r.desktop_slowdown == 0.03);
	CHECK(r.actions_throttle == 2);
	CHECK(r.actions_freeze == 1);
	CHECK(r.actions_evict == 0);
	CHECK_STR(r.summary, "one-line human text");

	ot_format_report(&r, rec, sizeof(rec));
	CHECK_STR(rec, "job=123 host=pc1 mode=desktop "
		       "start=2024-05-01T10:00:00Z end=2024-05-01T10:00:12.5Z "
		       "seconds=12.5 throttled=3.1 frozen=2 owner_active=0.25 "
		       "guest_cpu=9.8 steal=0.4 desktop_slowdown=0.03 "
		       "actions=throttle:2,freeze:1,evict:0");

	/* Truncation is safe and terminated. */
	ot_format_report(&r, rec, 10);
	CHECK(strlen(rec) == 9);
	CHECK(strncmp(rec, "job=123 h", 9) == 0);
}

/*
 * The calibrated estimate: interval, method and the guest's slowdown are read
 * and appended after desktop_slowdown; the method is quoted (it has spaces),
 * with '"' and control characters neutralised.  A mistyped one is left out.
 */
static void test_slowdown_fields(void)
{
	struct ot_job_report r;
	char err[256];
	char rec[1024];
	const char *body =
		"{\"job\":\"9\",\"desktopSlowdown\":0.004,"
		"\"slowdownLow\":0.001,\"slowdownHigh\":0.009,"
		"\"slowdownMethod\":\"run-queue \\\"wait\\\"\\n+ canary\","
		"\"guestSlowdown\":0.016}";
	const char *mistyped =
		"{\"job\":\"9\",\"desktopSlowdown\":0.004,"
		"\"slowdownLow\":\"0.001\",\"slowdownHigh\":null,"
		"\"slowdownMethod\":7.5,\"guestSlowdown\":[1]}";

	CHECK(ot_parse_report(body, strlen(body), &r, err, sizeof(err)) == 0);
	CHECK(r.desktop_slowdown == 0.004);
	CHECK(r.slowdown_low == 0.001);
	CHECK(r.slowdown_high == 0.009);
	CHECK(r.guest_slowdown == 0.016);
	CHECK_STR(r.slowdown_method, "run-queue \"wait\"?+ canary");
	ot_format_report(&r, rec, sizeof(rec));
	CHECK_STR(rec, "job=9 desktop_slowdown=0.004 slowdown_low=0.001 "
		       "slowdown_high=0.009 "
		       "slowdown_method=\"run-queue 'wait'?+ canary\" "
		       "guest_slowdown=0.016 "
		       "actions=throttle:0,freeze:0,evict:0");

	CHECK(ot_parse_report(mistyped, strlen(mistyped), &r, err,
			      sizeof(err)) == 0);
	CHECK(isnan(r.slowdown_low) && isnan(r.slowdown_high) &&
	      isnan(r.guest_slowdown));
	ot_format_report(&r, rec, sizeof(rec));
	CHECK_STR(rec, "job=9 desktop_slowdown=0.004 "
		       "actions=throttle:0,freeze:0,evict:0");
}

static void test_missing_fields(void)
{
	struct ot_job_report r;
	struct ot_job_start st;
	char err[256];
	char rec[1024];
	/* What the agent sends with no actions (omitempty) and an integer. */
	const char *minimal = "{\"job\":\"7\",\"seconds\":3}";
	/* Wrong types are treated as missing, not trusted. */
	const char *mistyped =
		"{\"job\":[1],\"host\":42.5,\"seconds\":\"12\","
		"\"actions\":{\"freeze\":\"x\",\"throttle\":1.5},"
		"\"summary\":null}";

	CHECK(ot_parse_report(minimal, strlen(minimal), &r, err,
			      sizeof(err)) == 0);
	CHECK_STR(r.job, "7");
	CHECK_STR(r.host, "");
	CHECK_STR(r.summary, "");
	CHECK(r.seconds == 3.0);
	CHECK(isnan(r.throttled_seconds));
	CHECK(isnan(r.desktop_slowdown));
	CHECK(r.actions_throttle == 0 && r.actions_freeze == 0 &&
	      r.actions_evict == 0);
	ot_format_report(&r, rec, sizeof(rec));
	CHECK_STR(rec, "job=7 seconds=3 actions=throttle:0,freeze:0,evict:0");

	/*
	 * json-c accepts NaN/Infinity even in strict mode; they must not reach
	 * the log as numbers.
	 */
	const char *nonfinite = "{\"seconds\":NaN,\"frozenSeconds\":-Infinity,"
				"\"stealSeconds\":1e999}";

	CHECK(ot_parse_report(nonfinite, strlen(nonfinite), &r, err,
			      sizeof(err)) == 0);
	CHECK(isnan(r.seconds));
	CHECK(isnan(r.frozen_seconds));
	CHECK(isnan(r.steal_seconds));

	CHECK(ot_parse_report("{}", 2, &r, err, sizeof(err)) == 0);
	CHECK(isnan(r.seconds));

	CHECK(ot_parse_report(mistyped, strlen(mistyped), &r, err,
			      sizeof(err)) == 0);
	CHECK_STR(r.job, "");
	CHECK_STR(r.host, "");
	CHECK(isnan(r.seconds));
	CHECK(r.actions_freeze == -1);
	CHECK(r.actions_throttle == -1);

	/* Start answer: complete, with a numeric job id, and empty. */
	const char *start = "{\"job\":\"123\",\"host\":\"pc1\",\"mode\":\"desktop\"}";

	CHECK(ot_parse_start(start, strlen(start), &st, err, sizeof(err)) == 0);
	CHECK_STR(st.job, "123");
	CHECK_STR(st.host, "pc1");
	CHECK_STR(st.mode, "desktop");
	CHECK(ot_parse_start("{\"job\":123}", 11, &st, err, sizeof(err)) == 0);
	CHECK_STR(st.job, "123");
	CHECK_STR(st.host, "");
}

static void test_malformed(void)
{
	const char *bad[] = {
		"{",
		"{\"job\":\"1\"",
		"{\"job\":\"1\",}",
		"{'job':'1'}",
		"[1,2,3]",
		"\"just a string\"",
		"42",
		"null",
		"<html><body>502 Bad Gateway</body></html>",
		"{\"job\":\"1\"} trailing",
		"{\"job\":\"1\"}{\"job\":\"2\"}",
		"{\"job\":\"\xff\xfe\"}",
		"   ",
	};
	struct ot_job_report r;
	struct ot_job_start st;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		CHECK(ot_parse_report(bad[i], strlen(bad[i]), &r, err,
				      sizeof(err)) == -1);
		CHECK(err[0] != '\0');
		CHECK(ot_parse_start(bad[i], strlen(bad[i]), &st, err,
				     sizeof(err)) == -1);
	}

	/* Empty, NULL, and an embedded NUL byte. */
	CHECK(ot_parse_report("", 0, &r, err, sizeof(err)) == -1);
	CHECK_STR(err, "empty response");
	CHECK(ot_parse_report(NULL, 0, &r, err, sizeof(err)) == -1);
	CHECK(ot_parse_report("{\"a\":1}\0{", 9, &r, err, sizeof(err)) == -1);

	/* Not NUL-terminated: parsing must respect len. */
	char unterminated[7] = { '{', '"', 'a', '"', ':', '1', '}' };

	CHECK(ot_parse_report(unterminated, sizeof(unterminated), &r, err,
			      sizeof(err)) == 0);
	CHECK(ot_parse_report(unterminated, 6, &r, err, sizeof(err)) == -1);

	/* Deep nesting is refused by the tokener, not a stack overflow. */
	size_t depth = 10000;
	char *deep = malloc(2 * depth + 1);

	CHECK(deep != NULL);
	if (deep) {
		memset(deep, '[', depth);
		memset(deep + depth, ']', depth);
		deep[2 * depth] = '\0';
		CHECK(ot_parse_report(deep, 2 * depth, &r, err,
				      sizeof(err)) == -1);
		free(deep);
	}
}

static void test_oversized(void)
{
	struct ot_job_report r;
	char err[256];
	size_t len = OT_RESPONSE_MAX + 1;
	char *big = malloc(len + 1);

	CHECK(big != NULL);
	if (!big)
		return;
	/* A syntactically valid object, just too large. */
	memset(big, ' ', len);
	big[0] = '{';
	big[len - 1] = '}';
	big[len] = '\0';
	CHECK(ot_parse_report(big, len, &r, err, sizeof(err)) == -1);
	CHECK_CONTAINS(err, "too large");
	/* At the limit it is accepted. */
	big[len - 2] = '}';
	CHECK(ot_parse_report(big, len - 1, &r, err, sizeof(err)) == 0);
	free(big);
}

static void test_sanitize(void)
{
	const char *evil = "{\"summary\":\"line1\\nfake: line2\\u0007\","
			   "\"host\":\"pc\\r1\"}";
	struct ot_job_report r;
	char err[256];
	char buf[32] = "a\tb\x7f";

	CHECK(ot_parse_report(evil, strlen(evil), &r, err, sizeof(err)) == 0);
	CHECK_STR(r.summary, "line1?fake: line2?");
	CHECK_STR(r.host, "pc?1");
	ot_sanitize(buf);
	CHECK_STR(buf, "a?b?");

	/* Long strings are truncated to the field, not overflowed. */
	char longjson[2048];
	char longval[1200];

	memset(longval, 'x', sizeof(longval) - 1);
	longval[sizeof(longval) - 1] = '\0';
	snprintf(longjson, sizeof(longjson), "{\"summary\":\"%s\"}", longval);
	CHECK(ot_parse_report(longjson, strlen(longjson), &r, err,
			      sizeof(err)) == 0);
	CHECK(strlen(r.summary) == sizeof(r.summary) - 1);
}

static void test_error_body(void)
{
	char msg[128];
	const char *body = "{\"error\":\"no start recorded for job 5\"}\n";

	CHECK(ot_parse_error(body, strlen(body), msg, sizeof(msg)) == 0);
	CHECK_STR(msg, "no start recorded for job 5");
	CHECK(ot_parse_error("oops", 4, msg, sizeof(msg)) == -1);
	CHECK_STR(msg, "");
	CHECK(ot_parse_error("{}", 2, msg, sizeof(msg)) == -1);
}

static void test_desktop_option(void)
{
	enum ot_desktop d;

	CHECK(ot_desktop_parse("allow", &d) == 0 && d == OT_DESKTOP_ALLOW);
	CHECK(ot_desktop_parse("avoid", &d) == 0 && d == OT_DESKTOP_AVOID);
	CHECK(ot_desktop_parse("only-dedicated", &d) == 0 &&
	      d == OT_DESKTOP_ONLY_DEDICATED);
	CHECK(ot_desktop_parse("Avoid", &d) == -1);
	CHECK(ot_desktop_parse("", &d) == -1);
	CHECK(ot_desktop_parse(NULL, &d) == -1);

	CHECK(ot_options_register(NULL) == 0);
	CHECK(test_registered_count == 1);
	CHECK_STR(test_registered_option.name, "desktop");
	CHECK_STR(test_registered_option.arginfo, "allow|avoid|only-dedicated");
	CHECK(test_registered_option.has_arg == 1);
	CHECK_CONTAINS(test_registered_option.usage, "dedicated|desk-empty");
	CHECK(test_registered_option.cb != NULL);
	if (test_registered_option.cb) {
		spank_opt_cb_f cb = test_registered_option.cb;

		CHECK(cb(0, "avoid", 0) == 0);
		CHECK(cb(0, "only-dedicated", 1) == 0);
		CHECK(cb(0, "never", 0) == -1);
		CHECK_CONTAINS(test_last_log,
			       "--desktop: \"never\" is not valid: must be allow, avoid or only-dedicated");
	}
}

/* In a child, so the test runner keeps its own priority. */
static void test_task_idle(void)
{
	pid_t pid = fork();
	int status;

	CHECK(pid >= 0);
	if (pid == 0) {
		int fails = ot_task_make_idle();

		errno = 0;
		int nice_now = getpriority(PRIO_PROCESS, 0);
		int policy = sched_getscheduler(0);

		if (fails != 0 || nice_now != 19 || policy != SCHED_IDLE) {
			fprintf(stderr, "task: fails=%d nice=%d policy=%d\n",
				fails, nice_now, policy);
			_exit(1);
		}
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void)
{
	test_config();
	test_agent_file();
	test_valid_report();
	test_missing_fields();
	test_slowdown_fields();
	test_malformed();
	test_oversized();
	test_sanitize();
	test_error_body();
	test_desktop_option();
	test_task_idle();
	if (test_failures) {
		fprintf(stderr, "test_parse: %d failure(s)\n", test_failures);
		return 1;
	}
	printf("test_parse: ok\n");
	return 0;
}
