/* The JSON contract with Go: parse the feed fixture that vocab/wire's
 * tests produce (scheduler-plugin/testdata/slurm_feed.json, a
 * wire.SlurmFeed as GET /api/v1/slurm/nodes sends it) with the production
 * parser and check every field. A field renamed or retyped in Go changes the
 * fixture and fails here.
 *
 * Usage: test_fixtures TESTDATA_DIR */
#include "feed.h"
#include "reconcile.h"
#include "resv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_check.h"

#define CHECK_STR(got, want) do {					\
	const char *g_ = (got), *w_ = (want);				\
	CHECK(g_ && !strcmp(g_, w_), "%s is \"%s\", want \"%s\"",	\
	      #got, g_ ? g_ : "(null)", w_);				\
} while (0)

/* Read dir/name whole; NULL (after a failed check) if it cannot be read. */
static char *read_fixture(const char *dir, const char *name, size_t *len)
{
	char path[4096];
	FILE *f;
	char *buf = NULL;
	long n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "rb");
	if (!f) {
		CHECK(0, "%s: cannot open (go test ./vocab/wire -update "
		      "writes it)", path);
		return NULL;
	}
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) &&
	    fread(buf, 1, (size_t)n, f) == (size_t)n) {
		buf[n] = '\0';
		*len = (size_t)n;
	} else {
		CHECK(0, "%s: cannot read", path);
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

#define CRASH "overtime: guest on pc-b1.lab not running (crashed: " \
	      "domain \"overtime-pc-b1\" exited <&>)"

static void test_feed_fixture(const char *dir)
{
	static const struct {
		const char *name;
		enum ot_state state;
		const char *state_str, *features;
		uint32_t weight;
		const char *reason;  /* after normalisation */
		const char *comment; /* NULL: absent */
	} want[] = {
		{ "pc-a01", OT_UP, "up", "overtime,dedicated", 1, "overtime: up",
		  "overtime: mode cluster, owner after-hours, guest run, "
		  "running (heartbeat 2026-11-22T10:00:00Z)" },
		{ "pc-a02", OT_UP, "up", "overtime,desktop,desk-empty", 10,
		  "overtime: up",
		  "overtime: mode desktop, owner no-user, guest run, running "
		  "(heartbeat 2026-11-22T10:00:00Z)" },
		{ "pc-a03", OT_UP, "up", "overtime,desktop,owner-active", 100,
		  "overtime: up", NULL },
		{ "pc-a04", OT_FROZEN, "frozen", "overtime,desktop", 100,
		  "overtime: guest on pc-a04 frozen: the owner needs the desktop",
		  "overtime: mode desktop, owner owner-active, guest freeze, "
		  "running (heartbeat 2026-11-22T10:00:00Z)" },
		{ "pc-a05", OT_EVICTED, "evicted", "overtime,desktop", 100,
		  "overtime: guest on pc-a05 evicted: the owner needed the "
		  "desktop (owner-active)",
		  "overtime: mode desktop, owner owner-active, guest evict, "
		  "absent (heartbeat 2026-11-22T10:00:00Z)" },
		/* Calibrated: its weight within the desk-empty class. */
		{ "pc-a06", OT_UP, "up", "overtime,desktop,desk-empty", 19,
		  "overtime: up",
		  "overtime: mode desktop, owner no-user, guest run, running "
		  "(heartbeat 2026-11-22T10:00:00Z), calibrated desktop "
		  "slowdown cpu 2.1% memory 9.4%" },
		{ "pc-b1.lab", OT_DOWN, "down", "overtime", 100, CRASH, CRASH },
	};
	const size_t nwant = sizeof(want) / sizeof(want[0]);
	struct feed f;
	char err[256] = "";
	size_t len;
	char *buf = read_fixture(dir, "slurm_feed.json", &len);

	if (!buf)
		return;
	CHECK(feed_parse(buf, len, &f, err, sizeof(err)) == 0,
	      "slurm_feed.json: %s", err);
	free(buf);
	CHECK(f.revision == 42, "revision %lld", (long long)f.revision);
	CHECK(f.build == (7LL << 32 | 42) && !f.delta, "build %lld delta %d",
	      (long long)f.build, f.delta);
	CHECK(f.nnodes == nwant, "%zu nodes, want %zu", f.nnodes, nwant);
	for (size_t i = 0; i < nwant && i < f.nnodes; i++) {
		const struct feed_node *n = &f.nodes[i];

		CHECK_STR(n->name, want[i].name);
		CHECK(n->state == want[i].state, "%s: state %d, want %d",
		      n->name, n->state, want[i].state);
		CHECK_STR(n->state_str, want[i].state_str);
		CHECK_STR(n->features, want[i].features);
		/* The daemon only treats nodes with this feature as its own. */
		CHECK(features_has(n->features, OT_FEATURE_MANAGED),
		      "%s: features \"%s\" lack " OT_FEATURE_MANAGED, n->name,
		      n->features);
		CHECK(n->has_weight && n->weight == want[i].weight,
		      "%s: weight %u, want %u", n->name, n->weight,
		      want[i].weight);
		CHECK_STR(n->reason, want[i].reason);
		CHECK(reason_is_ours(n->reason), "%s: reason not ours", n->name);
		if (want[i].comment)
			CHECK_STR(n->comment, want[i].comment);
		else
			CHECK(!n->comment, "%s: comment \"%s\", want absent",
			      n->name, n->comment);
	}
	/* Sizes: only pc-a03 reports one; absent is 0 (not declared). */
	for (size_t i = 0; i < f.nnodes; i++) {
		const struct feed_node *n = &f.nodes[i];
		bool a03 = !strcmp(n->name, "pc-a03");

		CHECK(n->cpus == (a03 ? 8 : 0) && n->memory_mb == (a03 ? 15000 : 0) &&
		      n->gpus == (a03 ? 1 : 0), "%s: size %d/%d/%d", n->name,
		      n->cpus, n->memory_mb, n->gpus);
	}
	/* The array job's report (124_7) is skipped: slurm_update_job takes
	 * plain job ids only. */
	CHECK(f.nreports == 1, "%zu reports, want 1", f.nreports);
	if (f.nreports == 1) {
		CHECK(f.reports[0].job_id == 123, "report job %u",
		      f.reports[0].job_id);
		CHECK_STR(f.reports[0].host, "pc-a03");
		CHECK_STR(f.reports[0].summary,
			  "overtime: job 123 on pc-a03 200 s: throttled 30 s, "
			  "frozen 10 s, owner active 25%, guest CPU 150 s, "
			  "steal 2.5 s (guest slowdown 1.6%), desktop "
			  "slowdown 0.4% (0.1-0.9%, run-queue wait + memory "
			  "canary)");
	}
	feed_free(&f);
}

/* A delta answer (base=build of slurm_feed.json): pc-a02 alone. */
static void test_feed_delta_fixture(const char *dir)
{
	struct feed f;
	char err[256] = "";
	size_t len;
	char *buf = read_fixture(dir, "slurm_feed_delta.json", &len);

	if (!buf)
		return;
	CHECK(feed_parse(buf, len, &f, err, sizeof(err)) == 0,
	      "slurm_feed_delta.json: %s", err);
	free(buf);
	CHECK(f.revision == 43 && f.build == (7LL << 32 | 43) && f.delta,
	      "delta: revision %lld build %lld delta %d",
	      (long long)f.revision, (long long)f.build, f.delta);
	CHECK(f.nnodes == 1, "%zu nodes, want 1", f.nnodes);
	if (f.nnodes == 1) {
		CHECK_STR(f.nodes[0].name, "pc-a02");
		CHECK_STR(f.nodes[0].features, "overtime,desktop,owner-active");
		CHECK(f.nodes[0].state == OT_UP, "state %d", f.nodes[0].state);
	}
	CHECK(f.nreports == 0, "%zu reports", f.nreports);
	feed_free(&f);
}

/* GET /api/v1/slurm/reservations (wire.SlurmReservations). */
static void test_reservations_fixture(const char *dir)
{
	static const struct {
		const char *node;
		time_t start, end; /* from now */
		const char *mode, *exception, *reason;
	} want[] = {
		{ "pc-a01", 0, 2 * 3600, "local", NULL, "overtime: local now" },
		{ "pc-a01", 24 * 3600, 26 * 3600, "course-bio", NULL,
		  "overtime: course-bio at Mon 11:00" },
		{ "pc-b1.lab", 1800, 7 * 86400, "desktop", "exam-1",
		  "overtime: desktop (exception exam-1) at 11:30" },
	};
	const size_t nwant = sizeof(want) / sizeof(want[0]);
	struct windows ws;
	char err[256] = "";
	size_t len;
	char *buf = read_fixture(dir, "slurm_reservations.json", &len);

	if (!buf)
		return;
	CHECK(windows_parse(buf, len, &ws, err, sizeof(err)) == 0,
	      "slurm_reservations.json: %s", err);
	free(buf);
	/* 2026-11-22T10:00:00Z, the fixtures' instant. */
	CHECK(ws.now == 1795341600, "now %lld", (long long)ws.now);
	CHECK(ws.horizon_s == 7 * 86400, "horizon %lld", (long long)ws.horizon_s);
	CHECK(ws.n == nwant, "%zu windows, want %zu", ws.n, nwant);
	for (size_t i = 0; i < nwant && i < ws.n; i++) {
		const struct window *w = &ws.w[i];

		CHECK_STR(w->node, want[i].node);
		CHECK(w->start - ws.now == want[i].start &&
		      w->end - ws.now == want[i].end, "%s: window %lld-%lld",
		      w->node, (long long)(w->start - ws.now),
		      (long long)(w->end - ws.now));
		CHECK_STR(w->mode, want[i].mode);
		if (want[i].exception)
			CHECK_STR(w->exception, want[i].exception);
		else
			CHECK(!w->exception, "%s: exception %s", w->node,
			      w->exception);
		CHECK_STR(w->reason, want[i].reason);
	}
	windows_free(&ws);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s TESTDATA_DIR\n", argv[0]);
		return 2;
	}
	test_feed_fixture(argv[1]);
	test_feed_delta_fixture(argv[1]);
	test_reservations_fixture(argv[1]);
	printf("test_fixtures: %d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
