/*
 * The JSON contract with Go: parse the node agent's job API answers as Go
 * writes them (scheduler-plugin/testdata, produced by the tests of
 * node-agent/agent and vocab/wire) with the plugin's own parsers, and check
 * every field.  A field renamed or retyped in Go changes a fixture and fails
 * here.  The plugin sends no JSON to the agent (its POSTs have empty bodies),
 * so the contract runs one way only.
 *
 * Usage: test_fixtures TESTDATA_DIR
 */
#include <math.h>
#include <stdlib.h>

#include "report.h"
#include "test_check.h"

static const char *testdata;

/* Read testdata/name whole into a malloc'd buffer; NULL on failure. */
static char *read_fixture(const char *name, size_t *len)
{
	char path[4096];
	FILE *f;
	char *buf = NULL;
	long n;

	snprintf(path, sizeof(path), "%s/%s", testdata, name);
	f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "%s: cannot open (go test ./vocab/wire "
				"./node-agent/agent -update writes it)\n", path);
		test_failures++;
		return NULL;
	}
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) &&
	    fread(buf, 1, (size_t)n, f) == (size_t)n) {
		buf[n] = '\0';
		*len = (size_t)n;
	} else {
		fprintf(stderr, "%s: cannot read\n", path);
		test_failures++;
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

/* Parse a report fixture; 0 if it parsed. */
static int parse_report(const char *name, struct ot_job_report *r)
{
	char err[256] = "";
	size_t len;
	char *body = read_fixture(name, &len);
	int rc;

	if (!body)
		return -1;
	rc = ot_parse_report(body, len, r, err, sizeof(err));
	free(body);
	if (rc)
		fprintf(stderr, "%s: %s\n", name, err);
	CHECK(rc == 0);
	return rc;
}

/* POST /v1/jobs/{id}/start: the handler's answer. */
static void test_start(void)
{
	struct ot_job_start st;
	char err[256] = "";
	size_t len;
	char *body = read_fixture("agent_job_start.json", &len);

	if (!body)
		return;
	CHECK(ot_parse_start(body, len, &st, err, sizeof(err)) == 0);
	CHECK_STR(err, "");
	CHECK_STR(st.job, "123");
	CHECK_STR(st.host, "pc-a03");
	CHECK_STR(st.mode, "desktop");
	free(body);
}

/* POST /v1/jobs/{id}/end: the handler's answer from its own counters. */
static void test_end(void)
{
	struct ot_job_report r;
	char rec[1024];

	if (parse_report("agent_job_end.json", &r))
		return;
	CHECK_STR(r.job, "123");
	CHECK_STR(r.host, "pc-a03");
	CHECK_STR(r.mode, "desktop");
	CHECK_STR(r.start, "2026-11-22T10:00:10Z");
	CHECK_STR(r.end, "2026-11-22T10:02:10Z");
	CHECK(r.seconds == 120);
	CHECK(r.throttled_seconds == 60);
	CHECK(r.frozen_seconds == 30);
	CHECK(r.owner_active_fraction == 0.75);
	CHECK(r.guest_cpu_seconds == 150);
	CHECK(r.steal_seconds == 6);
	CHECK(r.desktop_slowdown == 0.05);
	/* The agent counts "run" too; the plugin only reports these three. */
	CHECK(r.actions_throttle == 0);
	CHECK(r.actions_freeze == 1);
	CHECK(r.actions_evict == 0);
	CHECK_STR(r.summary, "overtime: job 123 on pc-a03 120 s: throttled 60 s, "
			     "frozen 30 s, owner active 75%, guest CPU 150 s, "
			     "steal 6.0 s (guest slowdown 3.8%), desktop slowdown 5.0% "
			     "(0.0-10.5%, run-queue wait)");
	ot_format_report(&r, rec, sizeof(rec));
	CHECK_STR(rec, "job=123 host=pc-a03 mode=desktop "
		       "start=2026-11-22T10:00:10Z end=2026-11-22T10:02:10Z "
		       "seconds=120 throttled=60 frozen=30 owner_active=0.75 "
		       "guest_cpu=150 steal=6 desktop_slowdown=0.05 "
		       "slowdown_high=0.105 "
		       "slowdown_method=\"run-queue wait\" guest_slowdown=0.0384615 "
		       "actions=throttle:0,freeze:1,evict:0");
}

/* A wire.JobReport with every field set and every action counted. */
static void test_full_report(void)
{
	struct ot_job_report r;
	char rec[1024];

	if (parse_report("job_report.json", &r))
		return;
	CHECK_STR(r.job, "123");
	CHECK_STR(r.host, "pc-a03");
	CHECK_STR(r.mode, "desktop");
	CHECK_STR(r.start, "2026-11-22T10:00:00Z");
	CHECK_STR(r.end, "2026-11-22T10:03:20.5Z");
	CHECK(r.seconds == 200.5);
	CHECK(r.throttled_seconds == 30);
	CHECK(r.frozen_seconds == 10.25);
	CHECK(r.owner_active_fraction == 0.25);
	CHECK(r.guest_cpu_seconds == 150.5);
	CHECK(r.steal_seconds == 2.5);
	CHECK(r.desktop_slowdown == 0.004);
	CHECK(r.slowdown_low == 0.001);
	CHECK(r.slowdown_high == 0.009);
	CHECK_STR(r.slowdown_method, "run-queue wait + memory canary");
	CHECK(r.guest_slowdown == 0.016);
	CHECK(r.actions_throttle == 2);
	CHECK(r.actions_freeze == 1);
	CHECK(r.actions_evict == 1);
	/* The AdminComment the plugin sets. */
	CHECK_STR(r.summary, "overtime: job 123 on pc-a03 200 s: throttled 30 s, "
			     "frozen 10 s, owner active 25%, guest CPU 150 s, "
			     "steal 2.5 s (guest slowdown 1.6%), desktop "
			     "slowdown 0.4% (0.1-0.9%, run-queue wait + memory "
			     "canary)");
	ot_format_report(&r, rec, sizeof(rec));
	CHECK_STR(rec, "job=123 host=pc-a03 mode=desktop "
		       "start=2026-11-22T10:00:00Z end=2026-11-22T10:03:20.5Z "
		       "seconds=200.5 throttled=30 frozen=10.25 "
		       "owner_active=0.25 guest_cpu=150.5 steal=2.5 "
		       "desktop_slowdown=0.004 slowdown_low=0.001 "
		       "slowdown_high=0.009 "
		       "slowdown_method=\"run-queue wait + memory canary\" "
		       "guest_slowdown=0.016 "
		       "actions=throttle:2,freeze:1,evict:1");
}

/*
 * A wire.JobReport without its optional fields (mode, actions, the slowdown's
 * interval, method and guest slowdown, as an older agent sends it): strings
 * empty, counts 0, the always-sent numbers 0 and the omitted ones NAN, so that
 * the key=value record leaves them out.
 */
static void test_minimal_report(void)
{
	struct ot_job_report r;
	char rec[1024];

	if (parse_report("job_report_minimal.json", &r))
		return;
	CHECK_STR(r.job, "124");
	CHECK_STR(r.host, "pc-a02");
	CHECK_STR(r.mode, "");
	CHECK_STR(r.start, "2026-11-22T10:00:00Z");
	CHECK_STR(r.end, "2026-11-22T10:01:00Z");
	CHECK(r.seconds == 60);
	CHECK(r.throttled_seconds == 0 && r.frozen_seconds == 0 &&
	      r.owner_active_fraction == 0 && r.guest_cpu_seconds == 0 &&
	      r.steal_seconds == 0 && r.desktop_slowdown == 0);
	CHECK(r.actions_throttle == 0 && r.actions_freeze == 0 &&
	      r.actions_evict == 0);
	CHECK(isnan(r.slowdown_low) && isnan(r.slowdown_high) &&
	      isnan(r.guest_slowdown));
	CHECK_STR(r.slowdown_method, "");
	CHECK_CONTAINS(r.summary, "overtime: job 124 on pc-a02 60 s");
	CHECK_CONTAINS(r.summary, "desktop slowdown ~0%");
	ot_format_report(&r, rec, sizeof(rec));
	CHECK(!strstr(rec, "slowdown_low") && !strstr(rec, "slowdown_method") &&
	      !strstr(rec, "guest_slowdown"));
}

/* The agent's error answer (409: end without a start). */
static void test_error(void)
{
	char msg[512];
	size_t len;
	char *body = read_fixture("agent_job_error.json", &len);

	if (!body)
		return;
	CHECK(ot_parse_error(body, len, msg, sizeof(msg)) == 0);
	CHECK_STR(msg, "no start recorded for job 123 on this agent "
		       "(agent restarted, or the start call failed)");
	free(body);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s TESTDATA_DIR\n", argv[0]);
		return 2;
	}
	testdata = argv[1];
	test_start();
	test_end();
	test_full_report();
	test_minimal_report();
	test_error();
	if (test_failures) {
		fprintf(stderr, "test_fixtures: %d failure(s)\n", test_failures);
		return 1;
	}
	printf("test_fixtures: ok\n");
	return 0;
}
