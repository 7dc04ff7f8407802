/* Unit tests for resv.c: the reservation reconcile (table-driven over wanted
 * windows x reservations Slurm has), its convergence (applying the actions
 * and reconciling again gives none), the short-notice decisions for jobs,
 * the warning comment that keeps a restarted daemon from signalling twice,
 * deadlines, node declaration lines and window parsing. No controller. */
#include "resv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_check.h"

#define NOW 1000000
#define H 3600

/* ---- reservations ------------------------------------------------------ */

static void test_reservation_table(void)
{
	static const struct window W_LEC = { "pc1", NOW + H, NOW + 3 * H, "course-bio",
					     NULL, "overtime: course-bio at 10:00", false };
	static const struct window W_LEC_LONGER = { "pc1", NOW + H, NOW + 4 * H,
						    "course-bio", NULL, "r", false };
	static const struct window W_NOW = { "pc1", NOW, NOW + H, "local", NULL, "r", true };
	static const struct window W_PC2 = { "pc2", NOW + H, NOW + 3 * H, "maint", NULL, "r", false };
	static const struct window W_OVER = { "pc1", NOW - 2 * H, NOW - H, "x", NULL, "r", false };
	static const struct {
		const char *name;
		struct window want[2];
		size_t nwant;
		struct cur_resv cur[2];
		size_t ncur;
		const char *expect; /* actions: C/U/D node start end, ";"-joined */
	} cases[] = {
		{ "nothing", { { 0 } }, 0, { { 0 } }, 0, "" },
		{ "new window is created", { W_LEC }, 1, { { 0 } }, 0,
		  "C pc1 3600 10800" },
		{ "matching reservation: nothing", { W_LEC }, 1,
		  { { "overtime-pc1-1003600", "pc1", NOW + H, NOW + 3 * H } }, 1, "" },
		{ "window grew: end updated", { W_LEC_LONGER }, 1,
		  { { "overtime-pc1-1003600", "pc1", NOW + H, NOW + 3 * H } }, 1,
		  "U pc1 3600 14400" },
		{ "window gone: deleted", { { 0 } }, 0,
		  { { "overtime-pc1-1003600", "pc1", NOW + H, NOW + 3 * H } }, 1,
		  "D pc1 3600 10800" },
		{ "window moved: old deleted, new created", { W_LEC }, 1,
		  { { "overtime-pc1-1007200", "pc1", NOW + 2 * H, NOW + 3 * H } }, 1,
		  "C pc1 3600 10800;D pc1 7200 10800" },
		{ "in progress: clipped start matches a started reservation",
		  { W_NOW }, 1, { { "overtime-pc1-996400", "pc1", NOW - H, NOW + H } }, 1, "" },
		{ "in progress, new: created from now", { W_NOW }, 1, { { 0 } }, 0,
		  "C pc1 0 3600" },
		{ "same start, other node: not a match", { W_PC2 }, 1,
		  { { "overtime-pc1-1003600", "pc1", NOW + H, NOW + 3 * H } }, 1,
		  "C pc2 3600 10800;D pc1 3600 10800" },
		{ "window already over: nothing", { W_OVER }, 1, { { 0 } }, 0, "" },
		{ "two windows, one kept one new", { W_LEC, W_PC2 }, 2,
		  { { "overtime-pc2-1003600", "pc2", NOW + H, NOW + 3 * H } }, 1,
		  "C pc1 3600 10800" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct resv_action out[4];
		char got[256] = "";
		size_t n = reconcile_reservations(cases[i].want, cases[i].nwant,
						  cases[i].cur, cases[i].ncur,
						  NOW, out);

		for (size_t k = 0; k < n; k++) {
			char one[64];

			snprintf(one, sizeof(one), "%s%c %s %lld %lld",
				 k ? ";" : "",
				 out[k].kind == RA_CREATE ? 'C' :
				 out[k].kind == RA_UPDATE ? 'U' : 'D',
				 out[k].node, (long long)(out[k].start - NOW),
				 (long long)(out[k].end - NOW));
			strncat(got, one, sizeof(got) - strlen(got) - 1);
			CHECK(out[k].kind == RA_CREATE || out[k].name,
			      "%s: update/delete without a name", cases[i].name);
		}
		CHECK(!strcmp(got, cases[i].expect), "%s: got \"%s\", want \"%s\"",
		      cases[i].name, got, cases[i].expect);
	}
}

/* Level-triggered: apply the actions to the current list, reconcile again
 * (also a little later, as the next cycle would), and nothing is left. */
static void test_reservations_converge(void)
{
	struct window want[] = {
		{ "pc1", NOW, NOW + H, "local", NULL, "r", false },
		{ "pc1", NOW + 5 * H, NOW + 6 * H, "course", NULL, "r", false },
		{ "pc2", NOW + 2 * H, NOW + 9 * H, "maint", NULL, "r", false },
	};
	struct cur_resv cur[8] = {
		{ "overtime-pc1-1", "pc1", NOW + 5 * H, NOW + 7 * H },
		{ "overtime-pc3-1", "pc3", NOW + 5 * H, NOW + 7 * H },
	};
	char names[8][64];
	size_t ncur = 2, n;
	struct resv_action out[16];

	n = reconcile_reservations(want, 3, cur, ncur, NOW, out);
	for (size_t k = 0; k < n; k++) {
		switch (out[k].kind) {
		case RA_CREATE:
			resv_name(names[ncur], sizeof(names[ncur]), out[k].node,
				  out[k].start);
			cur[ncur] = (struct cur_resv){ names[ncur], out[k].node,
				out[k].start, out[k].end };
			ncur++;
			break;
		case RA_UPDATE:
			for (size_t j = 0; j < ncur; j++)
				if (!strcmp(cur[j].name, out[k].name))
					cur[j].end = out[k].end;
			break;
		case RA_DELETE:
			for (size_t j = 0; j < ncur; j++)
				if (!strcmp(cur[j].name, out[k].name))
					cur[j].node_list = "(deleted)";
			break;
		}
	}
	/* Deleted ones drop out of Slurm's list. */
	for (size_t j = 0; j < ncur;)
		if (!strcmp(cur[j].node_list, "(deleted)"))
			cur[j] = cur[--ncur];
		else
			j++;
	CHECK(ncur == 3, "after applying: %zu reservations, want 3", ncur);
	CHECK(reconcile_reservations(want, 3, cur, ncur, NOW, out) == 0,
	      "second reconcile not empty");
	/* 30 s later the in-progress window is sent clipped to the new now. */
	want[0].start = NOW + 30;
	CHECK(reconcile_reservations(want, 3, cur, ncur, NOW + 30, out) == 0,
	      "in-progress window after 30 s not matched");
	{
		char b[64];

		CHECK(!strcmp(resv_name(b, sizeof(b), "pc1", 1700000000),
			      "overtime-pc1-1700000000"), "name %s", b);
	}
}

/* ---- short notice ------------------------------------------------------ */

static void test_short_notice_table(void)
{
	static const struct window WS[] = {
		{ "pc1", NOW + 200, NOW + 2 * H, "course-bio", NULL,
		  "overtime: course-bio at 10:00", false },
		{ "pc2", NOW - 10, NOW + H, "maint", NULL, "overtime: maint now", false },
		{ "pc3", NOW + 2 * H, NOW + 3 * H, "local", NULL, "r", false },
	};
	char *warned = comment_warned(NOW - 60, "USR1", &WS[0]);
	char *warned_other;
	struct window other = WS[0];

	other.start = NOW + 24 * H;
	warned_other = comment_warned(NOW - 60, "USR1", &other);
	const struct {
		const char *name, *node;
		struct warn_job j;
		int lead;
		enum warn_kind want;
	} cases[] = {
		{ "crosses the window, within lead: signal", "pc1",
		  { 1, CJ_RUNNING, NOW + H, NULL, NULL }, 300, WA_SIGNAL },
		{ "within lead but ends before it: nothing", "pc1",
		  { 1, CJ_RUNNING, NOW + 100, NULL, NULL }, 300, WA_NONE },
		{ "ends exactly at its start: nothing", "pc1",
		  { 1, CJ_RUNNING, NOW + 200, NULL, NULL }, 300, WA_NONE },
		{ "not yet within lead: nothing", "pc1",
		  { 1, CJ_RUNNING, NOW + H, NULL, NULL }, 100, WA_NONE },
		{ "already warned for this window: nothing", "pc1",
		  { 1, CJ_RUNNING, NOW + H, warned, NULL }, 300, WA_NONE },
		{ "warned for another window: signal", "pc1",
		  { 1, CJ_RUNNING, NOW + H, warned_other, NULL }, 300, WA_SIGNAL },
		{ "an administrator's comment: signal", "pc1",
		  { 1, CJ_RUNNING, NOW + H, "keep me", NULL }, 300, WA_SIGNAL },
		{ "suspended: no signal (it cannot act on it)", "pc1",
		  { 1, CJ_SUSPENDED, NOW + H, NULL, NULL }, 300, WA_NONE },
		{ "window in progress: requeue", "pc2",
		  { 1, CJ_RUNNING, NOW + H, NULL, NULL }, 300, WA_REQUEUE },
		{ "window in progress, suspended: requeue", "pc2",
		  { 1, CJ_SUSPENDED, NOW + H, NULL, NULL }, 300, WA_REQUEUE },
		{ "window in progress, job ends soon: requeue anyway", "pc2",
		  { 1, CJ_RUNNING, NOW + 5, NULL, NULL }, 300, WA_REQUEUE },
		{ "in our own reservation (put there on purpose): nothing", "pc2",
		  { 1, CJ_RUNNING, NOW + H, NULL, "overtime-pc2-999990" }, 300,
		  WA_NONE },
		{ "in an administrator's reservation: requeue", "pc2",
		  { 1, CJ_RUNNING, NOW + H, NULL, "maint-week" }, 300, WA_REQUEUE },
		{ "finished job: nothing", "pc2",
		  { 1, CJ_OTHER, NOW + H, NULL, NULL }, 300, WA_NONE },
		{ "far window: nothing", "pc3",
		  { 1, CJ_RUNNING, NOW + 9 * H, NULL, NULL }, 300, WA_NONE },
		{ "node without windows: nothing", "pc9",
		  { 1, CJ_RUNNING, NOW + 9 * H, NULL, NULL }, 300, WA_NONE },
		{ "lead 0: only the requeue", "pc1",
		  { 1, CJ_RUNNING, NOW + H, NULL, NULL }, 0, WA_NONE },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct window *hit = NULL;
		enum warn_kind k = short_notice(WS, 3, cases[i].node, &cases[i].j,
						NOW, cases[i].lead, &hit);

		CHECK(k == cases[i].want, "%s: got %d, want %d", cases[i].name,
		      k, cases[i].want);
		CHECK((k == WA_NONE) == (hit == NULL), "%s: hit %p", cases[i].name,
		      (const void *)hit);
		if (hit)
			CHECK(!strcmp(hit->node, cases[i].node), "%s: hit on %s",
			      cases[i].name, hit->node);
	}
	CHECK(warned && !strcmp(warned, "overtime: warned at 1970-01-12T13:45:40Z "
				"(SIGUSR1) of window 1970-01-12T13:50:00Z: "
				"overtime: course-bio at 10:00"),
	      "warned comment %s", warned);
	CHECK(comment_is_warned_for(warned, &WS[0]) &&
	      !comment_is_warned_for(warned, &other) &&
	      !comment_is_warned_for(NULL, &WS[0]),
	      "comment_is_warned_for");
	free(warned);
	free(warned_other);
}

static void test_next_deadline(void)
{
	struct window w[] = {
		{ "pc1", NOW + 1000, NOW + 2000, "m", NULL, "r", false },
		{ "pc2", NOW + 200, NOW + 2000, "m", NULL, "r", false },
		{ "pc3", NOW - 5, NOW + 2000, "m", NULL, "r", false },
	};
	struct windows ws = { NOW, 0, w, 3 };

	CHECK(next_deadline(&ws, NOW, 300) == NOW + 200, "pc2's start (its "
	      "warning is past): %lld", (long long)(next_deadline(&ws, NOW, 300) - NOW));
	CHECK(next_deadline(&ws, NOW, 100) == NOW + 100, "pc2's warning");
	ws.n = 1;
	CHECK(next_deadline(&ws, NOW, 300) == NOW + 700, "pc1's warning");
	ws.n = 0;
	CHECK(next_deadline(&ws, NOW, 300) == 0, "none");
}

static void test_node_decl(void)
{
	char b[256];

	CHECK(node_decl_line(b, sizeof(b), "pc1", 8, 15000, 0) == 0 &&
	      !strcmp(b, "NodeName=pc1 State=CLOUD Features=overtime CPUs=8 "
		      "RealMemory=15000"), "line %s", b);
	CHECK(node_decl_line(b, sizeof(b), "pc1", 8, 15000, 2) == 0 &&
	      !strcmp(b, "NodeName=pc1 State=CLOUD Features=overtime CPUs=8 "
		      "RealMemory=15000 Gres=gpu:2"), "line %s", b);
	CHECK(node_decl_line(b, sizeof(b), "pc1", 0, 15000, 0) == -1,
	      "no CPUs: not declared");
	CHECK(node_decl_line(b, sizeof(b), "pc1", 4, 0, 0) == -1,
	      "no memory: not declared");
	CHECK(node_decl_line(b, sizeof(b), "pc[1-9]", 4, 100, 0) == -1,
	      "hostlist expression refused");
	CHECK(node_decl_line(b, 20, "pc1", 4, 100, 0) == -1, "too small");
}

/* ---- parsing ----------------------------------------------------------- */

static void test_windows_parse(void)
{
	static const struct {
		const char *name, *doc;
		int rc;
		size_t n;
	} cases[] = {
		{ "empty", "{\"now\":\"2026-11-22T10:00:00Z\",\"horizonSeconds\":60,"
		  "\"windows\":[]}", 0, 0 },
		{ "one, reason prefixed",
		  "{\"now\":\"2026-11-22T10:00:00Z\",\"windows\":[{\"node\":\"pc1\","
		  "\"start\":\"2026-11-22T10:00:00Z\",\"end\":\"2026-11-22T11:00:00Z\","
		  "\"mode\":\"m\",\"reason\":\"lecture\"}]}  \n", 0, 1 },
		{ "no now", "{\"windows\":[]}", -1, 0 },
		{ "no windows", "{\"now\":\"2026-11-22T10:00:00Z\"}", -1, 0 },
		{ "end before start",
		  "{\"now\":\"2026-11-22T10:00:00Z\",\"windows\":[{\"node\":\"pc1\","
		  "\"start\":\"2026-11-22T10:00:00Z\",\"end\":\"2026-11-22T10:00:00Z\"}]}",
		  -1, 0 },
		{ "hostlist as node",
		  "{\"now\":\"2026-11-22T10:00:00Z\",\"windows\":[{\"node\":\"pc[1-2]\","
		  "\"start\":\"2026-11-22T10:00:00Z\",\"end\":\"2026-11-22T11:00:00Z\"}]}",
		  -1, 0 },
		{ "local time offset refused",
		  "{\"now\":\"2026-11-22T10:00:00+01:00\",\"windows\":[]}", -1, 0 },
		{ "trailing garbage", "{\"now\":\"2026-11-22T10:00:00Z\",\"windows\":[]}x",
		  -1, 0 },
		{ "not JSON", "nope", -1, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct windows ws;
		char err[256] = "";
		int rc = windows_parse(cases[i].doc, strlen(cases[i].doc), &ws,
				       err, sizeof(err));

		CHECK(rc == cases[i].rc, "%s: rc %d (%s)", cases[i].name, rc, err);
		if (rc == 0) {
			CHECK(ws.n == cases[i].n, "%s: %zu windows", cases[i].name,
			      ws.n);
			CHECK(ws.now == 1795341600, "%s: now %lld", cases[i].name,
			      (long long)ws.now);
			if (ws.n)
				CHECK(!strcmp(ws.w[0].reason, "overtime: lecture"),
				      "%s: reason %s", cases[i].name, ws.w[0].reason);
			windows_free(&ws);
		} else {
			CHECK(err[0], "%s: no error text", cases[i].name);
		}
	}
}

int main(void)
{
	test_reservation_table();
	test_reservations_converge();
	test_short_notice_table();
	test_next_deadline();
	test_node_decl();
	test_windows_parse();
	printf("test_resv: %d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
