/* Unit tests for the pure parts: the reconcile decisions (table-driven over
 * node agent state x Slurm node condition x jobs on the node), the comment
 * helpers, and feed parsing. No Slurm controller, no network. */
#include "feed.h"
#include "log.h"
#include "reconcile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "test_check.h"

/* ---- reconcile decisions ------------------------------------------------ */

#define REASON "overtime: guest frozen: the owner needs the desktop"
#define OURS   "overtime: no heartbeat from pc1's agent"
#define ADMIN  "disk replacement, ticket 4711"

#define IDLE      NODE_STATE_IDLE
#define ALLOC     NODE_STATE_ALLOCATED
#define DOWN      NODE_STATE_DOWN
#define DRAINED   (NODE_STATE_IDLE | NODE_STATE_DRAIN)
#define DRAINING  (NODE_STATE_ALLOCATED | NODE_STATE_DRAIN)
#define DOWNDRAIN (NODE_STATE_DOWN | NODE_STATE_DRAIN)

static const struct cur_job J_NONE[1];
static const struct cur_job J_RUN[] = { { 1, CJ_RUNNING, NULL } };
static const struct cur_job J_MIX[] = {
	{ 1, CJ_RUNNING, "user asked for this" },
	{ 2, CJ_SUSPENDED, "overtime: suspended at 2026-11-22T01:00:00Z: x" },
	{ 3, CJ_SUSPENDED, "suspended by admin" },
	{ 4, CJ_OTHER, NULL }, /* e.g. completing: left alone */
	{ 5, CJ_SUSPENDED, NULL },
};
#define JOBS(a) a, sizeof(a) / sizeof(a[0])
#define NOJOBS J_NONE, 0

struct rcase {
	const char *name;
	enum ot_state want;
	const char *want_features; /* NULL: field absent in the feed */
	int want_weight;           /* -1: field absent in the feed */
	uint32_t node_state;
	const char *reason;
	const char *features;
	uint32_t weight;
	const struct cur_job *jobs;
	size_t njobs;
	const char *expect;        /* actions, rendered by render() */
};

#define F "overtime,desktop,owner-active"

static const struct rcase rcases[] = {
	/* up */
	{ "up, in sync", OT_UP, F, 100, IDLE, NULL, F, 100, NOJOBS, "" },
	{ "up, features differ", OT_UP, F, 100, IDLE, NULL, "overtime", 100,
	  NOJOBS, "node[f=" F "]" },
	{ "up, weight differs", OT_UP, F, 100, ALLOC, NULL, F, 1, NOJOBS,
	  "node[w=100]" },
	{ "up, no features either side", OT_UP, "", 100, IDLE, NULL, NULL,
	  100, NOJOBS, "" },
	{ "up, features/weight not in feed", OT_UP, NULL, -1, IDLE, NULL,
	  "other", 7, NOJOBS, "" },
	{ "up, down by overtime", OT_UP, F, 100, DOWN, OURS, F, 100, NOJOBS,
	  "node[s=RESUME]" },
	{ "up, down by admin", OT_UP, F, 100, DOWN, ADMIN, F, 100, NOJOBS,
	  "" },
	{ "up, down without reason", OT_UP, F, 100, DOWN, NULL, F, 100,
	  NOJOBS, "" },
	{ "up, drained by overtime", OT_UP, F, 100, DRAINED, REASON, F, 100,
	  NOJOBS, "node[s=RESUME]" },
	{ "up, drained by admin", OT_UP, F, 100, DRAINED, ADMIN, F, 100,
	  NOJOBS, "" },
	{ "up, draining by overtime, jobs", OT_UP, F, 100, DRAINING, REASON,
	  "overtime", 100, JOBS(J_MIX),
	  "node[f=" F ",s=RESUME] resume:2" },
	{ "up, draining by admin, jobs", OT_UP, F, 100, DRAINING, ADMIN, F,
	  100, JOBS(J_MIX), "resume:2" },
	{ "up, running job", OT_UP, F, 100, ALLOC, NULL, F, 100, JOBS(J_RUN),
	  "" },

	/* frozen */
	{ "frozen, idle", OT_FROZEN, F, 100, IDLE, NULL, F, 100, NOJOBS,
	  "node[s=DRAIN]" },
	{ "frozen, jobs", OT_FROZEN, F, 100, ALLOC, NULL, F, 100, JOBS(J_MIX),
	  "suspend:1 node[s=DRAIN]" },
	{ "frozen, weight too", OT_FROZEN, F, 100, ALLOC, NULL, F, 5,
	  JOBS(J_RUN), "suspend:1 node[w=100,s=DRAIN]" },
	{ "frozen, already drained by overtime", OT_FROZEN, F, 100, DRAINING,
	  REASON, F, 100, JOBS(J_RUN), "suspend:1" },
	{ "frozen, drained by admin", OT_FROZEN, F, 100, DRAINING, ADMIN, F,
	  100, JOBS(J_RUN), "suspend:1" },
	{ "frozen, down by overtime", OT_FROZEN, F, 100, DOWN, OURS, F, 100,
	  NOJOBS, "" },
	{ "frozen, down by admin", OT_FROZEN, F, 100, DOWN, ADMIN, F, 100,
	  NOJOBS, "" },

	/* evicted */
	{ "evicted, idle", OT_EVICTED, F, 100, IDLE, NULL, F, 100, NOJOBS,
	  "node[s=DOWN]" },
	{ "evicted, jobs", OT_EVICTED, F, 100, DRAINING, REASON, F, 100,
	  JOBS(J_MIX), "requeue:1 requeue:2 requeue:3 requeue:5 node[s=DOWN]" },
	{ "evicted, drained by overtime", OT_EVICTED, F, 100, DRAINED, REASON,
	  F, 100, NOJOBS, "node[s=DOWN]" },
	{ "evicted, drained by admin", OT_EVICTED, F, 100, DRAINING, ADMIN, F,
	  100, JOBS(J_RUN), "requeue:1" },
	{ "evicted, down by overtime", OT_EVICTED, F, 100, DOWN, OURS, F, 100,
	  NOJOBS, "" },
	{ "evicted, down by admin, job", OT_EVICTED, F, 100, DOWNDRAIN, ADMIN,
	  F, 100, JOBS(J_RUN), "requeue:1" },

	/* down */
	{ "down, jobs", OT_DOWN, "overtime", 100, ALLOC, NULL, F, 100,
	  JOBS(J_MIX),
	  "requeue:1 requeue:2 requeue:3 requeue:5 node[f=overtime,s=DOWN]" },
	{ "down, drained by admin", OT_DOWN, F, 100, DRAINED, ADMIN, F, 100,
	  NOJOBS, "" },
	{ "down, already down", OT_DOWN, F, 100, DOWN, OURS, F, 100, NOJOBS,
	  "" },

	/* Slurm power saving: a powered-down or waking host has no guest */
	{ "down, powered down", OT_DOWN, "overtime", 100,
	  IDLE | NODE_STATE_POWERED_DOWN, NULL, F, 1, NOJOBS, "" },
	{ "down, powering down", OT_DOWN, "overtime", 100,
	  IDLE | NODE_STATE_POWERING_DOWN, NULL, F, 1, NOJOBS, "" },
	{ "down, powering up with its job", OT_DOWN, "overtime", 100,
	  ALLOC | NODE_STATE_POWERING_UP, NULL, F, 1, JOBS(J_RUN), "" },
	{ "evicted, powering up", OT_EVICTED, F, 100,
	  ALLOC | NODE_STATE_POWERING_UP, NULL, F, 100, JOBS(J_RUN), "" },
	{ "up, powered down: features still follow", OT_UP, F, 100,
	  IDLE | NODE_STATE_POWERED_DOWN, NULL, "overtime", 100, NOJOBS,
	  "node[f=" F "]" },

	/* a state from a newer site manager: only features/weight */
	{ "unknown state", OT_UNKNOWN, F, 100, DOWN, OURS, "x", 100,
	  JOBS(J_MIX), "node[f=" F "]" },
	{ "unknown state, in sync", OT_UNKNOWN, F, 100, ALLOC, NULL, F, 100,
	  JOBS(J_MIX), "" },
};

static const char *kind_job(enum action_kind k)
{
	switch (k) {
	case ACT_JOB_SUSPEND: return "suspend";
	case ACT_JOB_RESUME:  return "resume";
	case ACT_JOB_REQUEUE: return "requeue";
	case ACT_NODE_UPDATE: break;
	}
	return "?";
}

/* Actions as a short string, so expectations read like the rules. */
static void render(const struct action *a, size_t n, char *buf, size_t len)
{
	size_t o = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && o < len; i++) {
		const char *sep = i ? " " : "";

		if (a[i].kind != ACT_NODE_UPDATE) {
			o += snprintf(buf + o, len - o, "%s%s:%u", sep,
				      kind_job(a[i].kind), a[i].job_id);
			continue;
		}
		o += snprintf(buf + o, len - o, "%snode[", sep);
		const char *c = "";
		if (a[i].features) {
			o += snprintf(buf + o, len - o, "f=%s", a[i].features);
			c = ",";
		}
		if (a[i].set_weight) {
			o += snprintf(buf + o, len - o, "%sw=%u", c,
				      a[i].weight);
			c = ",";
		}
		if (a[i].state != NC_NONE)
			o += snprintf(buf + o, len - o, "%ss=%s", c,
				      a[i].state == NC_RESUME ? "RESUME" :
				      a[i].state == NC_DRAIN ? "DRAIN" :
				      "DOWN");
		o += snprintf(buf + o, len - o, "]");
	}
}

static void test_reconcile_table(void)
{
	for (size_t i = 0; i < sizeof(rcases) / sizeof(rcases[0]); i++) {
		const struct rcase *t = &rcases[i];
		struct feed_node want = {
			.name = (char *)"pc1", .state = t->want,
			.features = (char *)t->want_features,
			.has_weight = t->want_weight >= 0,
			.weight = t->want_weight >= 0 ?
				(uint32_t)t->want_weight : 0,
			.reason = (char *)REASON,
		};
		struct cur_node cur = {
			.name = "pc1", .features = t->features,
			.weight = t->weight, .node_state = t->node_state,
			.reason = t->reason, .jobs = t->jobs,
			.njobs = t->njobs,
		};
		struct action acts[RECONCILE_MAX_ACTIONS(8)];
		char got[512];
		size_t n = reconcile_node(&want, &cur, acts);

		CHECK(n <= RECONCILE_MAX_ACTIONS(t->njobs),
		      "%s: %zu actions exceed the bound", t->name, n);
		render(acts, n, got, sizeof(got));
		CHECK(!strcmp(got, t->expect), "%s: got \"%s\", want \"%s\"",
		      t->name, got, t->expect);
		/* Whatever drains, downs, suspends or requeues carries the
		 * feed's reason into Slurm. */
		for (size_t k = 0; k < n; k++) {
			bool needs = acts[k].kind == ACT_JOB_SUSPEND ||
				acts[k].kind == ACT_JOB_REQUEUE ||
				(acts[k].kind == ACT_NODE_UPDATE &&
				 (acts[k].state == NC_DRAIN ||
				  acts[k].state == NC_DOWN));
			CHECK(!needs || (acts[k].reason &&
					 !strcmp(acts[k].reason, REASON)),
			      "%s: action %zu lost the reason", t->name, k);
		}
	}
}

/* A level-triggered reconcile must converge: once Slurm looks the way the
 * actions asked, the same feed yields nothing more. */
static void test_converges(void)
{
	struct feed_node want = {
		.name = (char *)"pc1", .state = OT_FROZEN,
		.features = (char *)F, .has_weight = true, .weight = 100,
		.reason = (char *)REASON,
	};
	struct cur_job after[] = {
		{ 1, CJ_SUSPENDED, "overtime: suspended at ...: " REASON },
	};
	struct cur_node cur = {
		.name = "pc1", .features = F, .weight = 100,
		.node_state = DRAINING, .reason = REASON, .jobs = after,
		.njobs = 1,
	};
	struct action acts[RECONCILE_MAX_ACTIONS(1)];

	CHECK(reconcile_node(&want, &cur, acts) == 0,
	      "frozen node already drained with suspended job: no actions");
}

/* The comment we write on suspend is the one the resume rule looks for. */
static void test_suspend_comment_roundtrip(void)
{
	char *c = comment_suspended(0, REASON);
	struct cur_job j[] = { { 9, CJ_SUSPENDED, c } };
	struct feed_node want = { .name = (char *)"pc1", .state = OT_UP,
				  .reason = (char *)"overtime: up" };
	struct cur_node cur = { .name = "pc1", .node_state = ALLOC,
				.jobs = j, .njobs = 1 };
	struct action acts[RECONCILE_MAX_ACTIONS(1)];

	CHECK(c && !strcmp(c, "overtime: suspended at 1970-01-01T00:00:00Z: "
			   REASON), "suspend comment: %s", c);
	CHECK(reconcile_node(&want, &cur, acts) == 1 &&
	      acts[0].kind == ACT_JOB_RESUME && acts[0].job_id == 9,
	      "our suspend comment is recognised on up");
	free(c);
}

static void test_absent(void)
{
	struct feed_node want;
	struct cur_node cur = { .name = "pc9", .features = "overtime,x",
				.weight = 3, .node_state = ALLOC,
				.jobs = J_RUN, .njobs = 1 };
	struct action acts[RECONCILE_MAX_ACTIONS(1)];
	char got[128];
	size_t n;

	reconcile_absent_node("pc9", &want);
	n = reconcile_node(&want, &cur, acts);
	render(acts, n, got, sizeof(got));
	CHECK(!strcmp(got, "requeue:1 node[s=DOWN]"), "absent: got %s", got);
	CHECK(n == 2 && !strcmp(acts[1].reason, OT_ABSENT_REASON),
	      "absent: reason");
	cur.node_state = DRAINED;
	cur.reason = ADMIN;
	cur.njobs = 0;
	CHECK(reconcile_node(&want, &cur, acts) == 0,
	      "absent: admin drain left alone");
}

static void test_predicates(void)
{
	CHECK(features_has("overtime,desktop", "overtime"), "first word");
	CHECK(features_has("desktop,overtime", "overtime"), "last word");
	CHECK(!features_has("overtimer,desktop", "overtime"), "prefix only");
	CHECK(!features_has("desktop,xovertime", "overtime"), "suffix only");
	CHECK(!features_has(NULL, "overtime"), "NULL list");
	CHECK(!features_has("", "overtime"), "empty list");
	CHECK(reason_is_ours("overtime: x"), "ours");
	CHECK(!reason_is_ours("Overtime: x"), "case matters");
	CHECK(!reason_is_ours(NULL), "NULL reason");
	CHECK(node_is_down(DOWNDRAIN) && node_is_drain(DOWNDRAIN), "down+drain");
	CHECK(!node_is_down(DRAINED) && node_is_drain(DRAINING), "drain flag");
	CHECK(!node_is_down(IDLE | NODE_STATE_NO_RESPOND), "no respond");
}

static void test_comments(void)
{
	char *c;

	c = comment_resumed(86400);
	CHECK(c && !strcmp(c, "overtime: resumed at 1970-01-02T00:00:00Z"),
	      "resumed: %s", c);
	free(c);
	c = comment_requeued(0, "overtime: r");
	CHECK(c && !strcmp(c, "overtime: requeued at 1970-01-01T00:00:00Z: "
			   "overtime: r"), "requeued: %s", c);
	free(c);
	c = comment_requeue_failed("Job is not requeueable", "overtime: r");
	CHECK(c && !strcmp(c, "overtime: could not requeue: Job is not "
			   "requeueable: overtime: r"), "requeue failed: %s", c);
	free(c);
}

/* ---- feed parsing ------------------------------------------------------- */

static const char *EXAMPLE =
"{\"revision\": 42,\n"
" \"nodes\": [\n"
"   {\"name\":\"pc1\",\"state\":\"up\",\"features\":\"overtime,desktop,owner-active\",\"weight\":100,\n"
"    \"reason\":\"\",\"comment\":\"overtime: owner-active, throttle (heartbeat 2026-11-22T01:00:00Z)\"},\n"
"   {\"name\":\"pc2\",\"state\":\"frozen\",\"features\":\"overtime,desktop,owner-active\",\"weight\":100,\n"
"    \"reason\":\"overtime: guest frozen: the owner needs the desktop\",\"comment\":\"...\"},\n"
"   {\"name\":\"pc3\",\"state\":\"evicted\",\"features\":\"overtime,desktop\",\"weight\":100,\"reason\":\"overtime: guest evicted on pc3: frozen longer than the pool's evict deadline\",\"comment\":\"...\"},\n"
"   {\"name\":\"pc4\",\"state\":\"down\",\"features\":\"overtime\",\"weight\":100,\"reason\":\"overtime: no heartbeat from pc4's agent since 2026-...\",\"comment\":\"...\"}],\n"
" \"reports\": [{\"job\":\"123\",\"host\":\"pc1\",\"summary\":\"overtime: on pc1 120 s: throttled 30 s, frozen 0 s, owner active 25%, steal 1.0 s, desktop slowdown ~3%\"}]}\n";

static int parse(const char *s, struct feed *f, char *err, size_t errlen)
{
	return feed_parse(s, strlen(s), f, err, errlen);
}

static void test_feed_valid(void)
{
	struct feed f;
	char err[256] = "";

	CHECK(parse(EXAMPLE, &f, err, sizeof(err)) == 0, "example: %s", err);
	CHECK(f.revision == 42 && f.nnodes == 4 && f.nreports == 1,
	      "example: counts");
	CHECK(f.nodes[0].state == OT_UP && f.nodes[1].state == OT_FROZEN &&
	      f.nodes[2].state == OT_EVICTED && f.nodes[3].state == OT_DOWN,
	      "example: states");
	CHECK(!strcmp(f.nodes[0].features, F) && f.nodes[0].has_weight &&
	      f.nodes[0].weight == 100, "example: features/weight");
	CHECK(!strcmp(f.nodes[0].reason, "overtime: up"),
	      "empty reason gets a prefixed default: %s", f.nodes[0].reason);
	CHECK(!strcmp(f.nodes[1].reason, REASON), "reason kept");
	CHECK(f.reports[0].job_id == 123 && !strcmp(f.reports[0].host, "pc1")
	      && !strncmp(f.reports[0].summary, "overtime: on pc1 120 s", 22),
	      "report");
	CHECK(feed_find_node(&f, "pc3") == &f.nodes[2] &&
	      !feed_find_node(&f, "pc5"), "find");
	feed_free(&f);

	CHECK(f.build == 0 && !f.delta, "no build: a whole list");
	CHECK(parse("{\"revision\":0,\"nodes\":[]}", &f, err, sizeof(err)) == 0
	      && f.nnodes == 0 && f.nreports == 0, "empty feed: %s", err);
	CHECK(!feed_find_node(&f, "pc1"), "find in an empty feed");
	feed_free(&f);

	/* Found by name whatever order the server sent. */
	CHECK(parse("{\"revision\":1,\"nodes\":[{\"name\":\"pc9\",\"state\":\"up\"},"
		    "{\"name\":\"pc10\",\"state\":\"down\"},"
		    "{\"name\":\"lab-a1\",\"state\":\"frozen\"}]}",
		    &f, err, sizeof(err)) == 0, "unsorted feed: %s", err);
	CHECK(feed_find_node(&f, "pc9") && feed_find_node(&f, "pc9")->state == OT_UP &&
	      feed_find_node(&f, "pc10")->state == OT_DOWN &&
	      feed_find_node(&f, "lab-a1")->state == OT_FROZEN &&
	      !feed_find_node(&f, "pc1"), "find in an unsorted feed");
	feed_free(&f);

	/* Optional fields absent: leave Slurm's value alone. A reason not
	 * ours gets our prefix so our own drain is recognisable later. */
	CHECK(parse("{\"revision\":7,\"nodes\":[{\"name\":\"pc-a01.lab\","
		    "\"state\":\"frozen\",\"reason\":\"owner busy\"}],"
		    "\"reports\":null}", &f, err, sizeof(err)) == 0,
	      "minimal node: %s", err);
	CHECK(f.nnodes == 1 && !f.nodes[0].features &&
	      !f.nodes[0].has_weight && !f.nodes[0].comment &&
	      !strcmp(f.nodes[0].reason, "overtime: owner busy"),
	      "minimal node fields");
	feed_free(&f);

	/* A state from a newer server is kept (so the node is not "absent")
	 * but marked unknown. */
	CHECK(parse("{\"revision\":1,\"nodes\":[{\"name\":\"pc1\",\"state\":"
		    "\"hibernating\"}]}", &f, err, sizeof(err)) == 0 &&
	      f.nodes[0].state == OT_UNKNOWN &&
	      !strcmp(f.nodes[0].state_str, "hibernating"), "unknown state");
	feed_free(&f);

	/* A delta names its build; build ids go up to 2^52. */
	CHECK(parse("{\"revision\":5,\"build\":4503599627370497,"
		    "\"delta\":true,\"nodes\":[{\"name\":\"pc2\","
		    "\"state\":\"up\"}],\"reports\":[]}", &f, err,
		    sizeof(err)) == 0 && f.delta &&
	      f.build == 4503599627370497LL && f.nnodes == 1,
	      "delta: %s", err);
	feed_free(&f);
	CHECK(parse("{\"revision\":5,\"build\":9,\"delta\":false,"
		    "\"nodes\":[]}", &f, err, sizeof(err)) == 0 && !f.delta &&
	      f.build == 9, "whole list with a build: %s", err);
	feed_free(&f);

	/* Bad reports are dropped, the node states still count. */
	CHECK(parse("{\"revision\":1,\"nodes\":[],\"reports\":["
		    "{\"job\":\"12_3\",\"summary\":\"s\"},"
		    "{\"job\":\"12\"},"
		    "{\"job\":\"x\",\"summary\":\"s\"},"
		    "{\"job\":0,\"summary\":\"s\"},"
		    "{\"job\":\"99999999999\",\"summary\":\"s\"},"
		    "7,"
		    "{\"job\":13,\"summary\":\"ok\"}]}",
		    &f, err, sizeof(err)) == 0 && f.nreports == 1 &&
	      f.reports[0].job_id == 13 && !f.reports[0].host,
	      "bad reports skipped: %s", err);
	feed_free(&f);
}

static void test_feed_invalid(void)
{
	static const struct { const char *name, *body; } bad[] = {
		{ "empty body", "" },
		{ "truncated", "{\"revision\":1,\"nodes\":[" },
		{ "not JSON", "<html>502 Bad Gateway</html>" },
		{ "array top", "[]" },
		{ "trailing data", "{\"revision\":1,\"nodes\":[]} {}" },
		{ "missing revision", "{\"nodes\":[]}" },
		{ "string revision", "{\"revision\":\"1\",\"nodes\":[]}" },
		{ "negative revision", "{\"revision\":-1,\"nodes\":[]}" },
		{ "missing nodes", "{\"revision\":1}" },
		{ "null nodes", "{\"revision\":1,\"nodes\":null}" },
		{ "node not object", "{\"revision\":1,\"nodes\":[\"pc1\"]}" },
		{ "missing name", "{\"revision\":1,\"nodes\":[{\"state\":\"up\"}]}" },
		{ "empty name",
		  "{\"revision\":1,\"nodes\":[{\"name\":\"\",\"state\":\"up\"}]}" },
		{ "hostlist name",
		  "{\"revision\":1,\"nodes\":[{\"name\":\"pc[1-9]\",\"state\":\"up\"}]}" },
		{ "comma name",
		  "{\"revision\":1,\"nodes\":[{\"name\":\"a,b\",\"state\":\"up\"}]}" },
		{ "missing state", "{\"revision\":1,\"nodes\":[{\"name\":\"pc1\"}]}" },
		{ "numeric state",
		  "{\"revision\":1,\"nodes\":[{\"name\":\"pc1\",\"state\":1}]}" },
		{ "string weight", "{\"revision\":1,\"nodes\":[{\"name\":\"pc1\","
		  "\"state\":\"up\",\"weight\":\"100\"}]}" },
		{ "negative weight", "{\"revision\":1,\"nodes\":[{\"name\":\"pc1\","
		  "\"state\":\"up\",\"weight\":-1}]}" },
		{ "weight NO_VAL", "{\"revision\":1,\"nodes\":[{\"name\":\"pc1\","
		  "\"state\":\"up\",\"weight\":4294967295}]}" },
		{ "numeric features", "{\"revision\":1,\"nodes\":[{\"name\":\"pc1\","
		  "\"state\":\"up\",\"features\":5}]}" },
		{ "null reason", "{\"revision\":1,\"nodes\":[{\"name\":\"pc1\","
		  "\"state\":\"down\",\"reason\":null}]}" },
		{ "duplicate node", "{\"revision\":1,\"nodes\":["
		  "{\"name\":\"pc1\",\"state\":\"up\"},"
		  "{\"name\":\"pc1\",\"state\":\"down\"}]}" },
		{ "duplicate node, apart", "{\"revision\":1,\"nodes\":["
		  "{\"name\":\"pc2\",\"state\":\"up\"},"
		  "{\"name\":\"pc1\",\"state\":\"up\"},"
		  "{\"name\":\"pc2\",\"state\":\"down\"}]}" },
		{ "delta without a build",
		  "{\"revision\":1,\"delta\":true,\"nodes\":[]}" },
		{ "string delta",
		  "{\"revision\":1,\"build\":2,\"delta\":\"yes\",\"nodes\":[]}" },
		{ "negative build",
		  "{\"revision\":1,\"build\":-2,\"nodes\":[]}" },
		{ "string build",
		  "{\"revision\":1,\"build\":\"2\",\"nodes\":[]}" },
		{ "reports object",
		  "{\"revision\":1,\"nodes\":[],\"reports\":{}}" },
	};
	struct feed f;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		CHECK(parse(bad[i].body, &f, err, sizeof(err)) == -1,
		      "%s: accepted", bad[i].name);
		CHECK(err[0], "%s: no error text", bad[i].name);
		CHECK(f.nnodes == 0 && !f.nodes && !f.reports,
		      "%s: output not reset", bad[i].name);
	}

	/* Nesting beyond json-c's depth limit is an error, not a crash. */
	char deep[2001];
	memset(deep, '[', 2000);
	deep[2000] = '\0';
	CHECK(parse(deep, &f, err, sizeof(err)) == -1, "deep nesting");
}

/* The cap is 64 MiB inclusive: a body of exactly that size (valid JSON padded
 * with whitespace) parses, one byte more does not. */
static void test_feed_size_cap(void)
{
	const char *doc = "{\"revision\":3,\"nodes\":[]}";
	size_t dl = strlen(doc);
	char *buf = malloc(FEED_MAX_BYTES + 1);
	struct feed f;
	char err[256] = "";

	if (!buf) {
		CHECK(0, "malloc");
		return;
	}
	memcpy(buf, doc, dl);
	memset(buf + dl, ' ', FEED_MAX_BYTES + 1 - dl);
	CHECK(feed_parse(buf, FEED_MAX_BYTES, &f, err, sizeof(err)) == 0 &&
	      f.revision == 3, "exactly at the cap: %s", err);
	feed_free(&f);
	err[0] = '\0';
	CHECK(feed_parse(buf, FEED_MAX_BYTES + 1, &f, err, sizeof(err)) == -1
	      && strstr(err, "cap"), "over the cap: %s", err);
	free(buf);
}

/* ---- batching ----------------------------------------------------------- */

static void test_group_node_updates(void)
{
	static const char R2[] = "overtime: guest frozen: the owner needs the desktop";
	struct action active = { .kind = ACT_NODE_UPDATE,
		.features = "overtime,desktop,owner-active", .set_weight = true,
		.weight = 100 };
	struct action idle = { .kind = ACT_NODE_UPDATE,
		.features = "overtime,desktop,desk-empty", .set_weight = true,
		.weight = 10 };
	struct action drain = { .kind = ACT_NODE_UPDATE, .state = NC_DRAIN,
		.reason = REASON };
	struct action drain_other = drain, drain_copy = drain, weight_only = {
		.kind = ACT_NODE_UPDATE, .set_weight = true, .weight = 100 };
	/* Only the reason's text matters, not where it is stored. */
	drain_copy.reason = R2;
	drain_other.reason = OURS;
	struct pending_update p[] = {
		{ "pc3", idle }, { "pc1", active }, { "pc2", active },
		{ "pc7", drain }, { "pc4", idle }, { "pc8", drain_copy },
		{ "pc9", drain_other }, { "pc5", active }, { "pc6", weight_only },
	};
	/* batches in the order of their first node, nodes in theirs */
	static const char *const want[] = {
		"pc3", "pc4", "|", "pc1", "pc2", "pc5", "|", "pc7", "pc8", "|",
		"pc9", "|", "pc6",
	};
	size_t n = sizeof(p) / sizeof(p[0]), order[9], batch[9], nb, k = 0;

	CHECK(node_update_same(&drain, &drain_copy), "same reason text");
	CHECK(!node_update_same(&drain, &drain_other), "other reason");
	CHECK(!node_update_same(&active, &idle), "other features");
	CHECK(!node_update_same(&active, &weight_only), "features unchanged vs set");
	{
		/* A reason only counts with a drain or down. */
		struct action a = active, b = active;

		a.reason = REASON;
		b.reason = OURS;
		CHECK(node_update_same(&a, &b), "reason ignored without a state change");
		b.weight = 99;
		CHECK(!node_update_same(&a, &b), "other weight");
	}
	nb = group_node_updates(p, n, order, batch);
	CHECK(nb == 5, "5 batches, got %zu", nb);
	for (size_t i = 0; i < n; i++) {
		if (i && batch[i] != batch[i - 1]) {
			CHECK(batch[i] == batch[i - 1] + 1, "batch numbers ascend at %zu", i);
			CHECK(!strcmp(want[k], "|"), "batch boundary before %s", p[order[i]].node);
			k++;
		}
		CHECK(k < sizeof(want) / sizeof(want[0]) &&
		      !strcmp(p[order[i]].node, want[k]),
		      "position %zu: %s, want %s", i, p[order[i]].node,
		      k < sizeof(want) / sizeof(want[0]) ? want[k] : "(end)");
		k++;
	}
	CHECK(group_node_updates(p, 0, order, batch) == 0, "no updates, no batches");
	nb = group_node_updates(p, 1, order, batch);
	CHECK(nb == 1 && order[0] == 0 && batch[0] == 0, "one update, one batch");
}

/* 5,000 nodes, two kinds of update: two batches, every node once. */
static void test_group_many(void)
{
	enum { N = 5000 };
	static struct pending_update p[N];
	static size_t order[N], batch[N];
	static char names[N][16];
	static bool seen[N];
	struct action a = { .kind = ACT_NODE_UPDATE, .features = "x" };
	struct action b = { .kind = ACT_NODE_UPDATE, .features = "y" };
	size_t nb;

	for (size_t i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "pc%04zu", i);
		p[i] = (struct pending_update){ names[i], i % 3 ? a : b };
	}
	nb = group_node_updates(p, N, order, batch);
	CHECK(nb == 2, "2 batches, got %zu", nb);
	for (size_t i = 0; i < N; i++) {
		CHECK(!seen[order[i]], "node %zu twice", order[i]);
		seen[order[i]] = true;
		CHECK(batch[i] == (i < N / 3 + 1 ? 0u : 1u), "position %zu in batch %zu",
		      i, batch[i]);
		if (i && batch[i] == batch[i - 1])
			CHECK(order[i] > order[i - 1], "node order kept at %zu", i);
	}
}

/* The controller's version as the daemon reports it: what the site manager
 * accepts (2 to 4 numbers of at most 4 digits), cut before a suffix. */
static void test_slurm_version(void)
{
	static const struct {
		const char *in, *want; /* want NULL: nothing to report */
	} cases[] = {
		{ "22.05.8", "22.05.8" },
		{ "24.11.0", "24.11.0" },
		{ "23.11.0-0rc1", "23.11.0" },
		{ "24.05.0-0pre1", "24.05.0" },
		{ "22.05.8 (custom)", "22.05.8" },
		{ "22.05.", "22.05" },
		{ "1.2.3.4", "1.2.3.4" },
		{ "22", NULL },
		{ "22.", NULL },
		{ "", NULL },
		{ "v22.05.8", NULL },
		{ ".22.05", NULL },
		{ "22..05", NULL },
		{ "12345.1", NULL },
		{ "1.2.3.4.5", NULL },
	};
	char out[FEED_VERSION_MAX];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = feed_slurm_version(cases[i].in, out, sizeof(out));

		if (cases[i].want) {
			CHECK(rc == 0 && !strcmp(out, cases[i].want),
			      "version of \"%s\": rc %d \"%s\", want \"%s\"",
			      cases[i].in, rc, out, cases[i].want);
		} else {
			CHECK(rc == -1 && out[0] == '\0',
			      "version of \"%s\": rc %d \"%s\", want none",
			      cases[i].in, rc, out);
		}
	}
	CHECK(feed_slurm_version(NULL, out, sizeof(out)) == -1, "NULL");
	CHECK(feed_slurm_version("22.05.8", out, 8) == -1,
	      "a buffer below FEED_VERSION_MAX is refused");
	CHECK(feed_slurm_version("9999.9999.9999.9999", out, sizeof(out)) == 0 &&
	      strlen(out) == FEED_VERSION_MAX - 1, "the longest version fits");
}

/* The long poll's URL: since and wait always, base and slurmctld when
 * given. */
static void test_nodes_url(void)
{
	static const struct {
		int64_t since, base;
		int wait_s;
		const char *ctld, *want;
	} cases[] = {
		{ 0, 0, 25, NULL,
		  "https://sm/api/v1/slurm/nodes?since=0&wait=25" },
		{ 17, 0, 25, "",
		  "https://sm/api/v1/slurm/nodes?since=17&wait=25" },
		{ 17, 4294967297LL, 0, NULL,
		  "https://sm/api/v1/slurm/nodes?since=17&wait=0&base=4294967297" },
		{ 17, 0, 25, "22.05.8",
		  "https://sm/api/v1/slurm/nodes?since=17&wait=25&slurmctld=22.05.8" },
		{ 17, 9, 3, "24.11.5",
		  "https://sm/api/v1/slurm/nodes?since=17&wait=3&base=9&slurmctld=24.11.5" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *url = feed_nodes_url("https://sm", cases[i].since,
					   cases[i].base, cases[i].wait_s,
					   cases[i].ctld);

		CHECK(url && !strcmp(url, cases[i].want), "url \"%s\", want \"%s\"",
		      url ? url : "(null)", cases[i].want);
		free(url);
	}
}

static void test_server_check(void)
{
	static const struct {
		const char *url;
		bool insecure;
		enum feed_server_kind want;
	} cases[] = {
		{ "https://sm.example.org", false, FEED_SERVER_HTTPS },
		{ "https://10.0.0.1:8443/", false, FEED_SERVER_HTTPS },
		{ "https://[2001:db8::1]", false, FEED_SERVER_HTTPS },
		{ "HTTPS://SM.example.org", false, FEED_SERVER_HTTPS },
		{ "http://127.0.0.1", false, FEED_SERVER_HTTP_LOOPBACK },
		{ "http://127.0.0.1:8080/", false, FEED_SERVER_HTTP_LOOPBACK },
		{ "http://127.1.2.3:8080", false, FEED_SERVER_HTTP_LOOPBACK },
		{ "http://[::1]:8080", false, FEED_SERVER_HTTP_LOOPBACK },
		{ "http://[::ffff:127.0.0.1]", false, FEED_SERVER_HTTP_LOOPBACK },
		{ "http://localhost", false, FEED_SERVER_HTTP_LOOPBACK },
		{ "http://LocalHost:8080", false, FEED_SERVER_HTTP_LOOPBACK },
		{ "http://10.0.0.1", false, FEED_SERVER_REFUSED },
		{ "http://10.0.0.1:8080/", false, FEED_SERVER_REFUSED },
		{ "http://sm.example.org", false, FEED_SERVER_REFUSED },
		{ "http://[2001:db8::1]", false, FEED_SERVER_REFUSED },
		{ "http://[::ffff:10.0.0.1]", false, FEED_SERVER_REFUSED },
		{ "http://128.0.0.1", false, FEED_SERVER_REFUSED },
		/* Names that only look loopback. */
		{ "http://localhost.evil.example", false, FEED_SERVER_REFUSED },
		{ "http://127.0.0.1.evil.example", false, FEED_SERVER_REFUSED },
		/* The host is what follows the user info. */
		{ "http://127.0.0.1@10.0.0.1", false, FEED_SERVER_REFUSED },
		{ "http://10.0.0.1", true, FEED_SERVER_HTTP_INSECURE },
		{ "http://sm.example.org:8080", true, FEED_SERVER_HTTP_INSECURE },
		{ "http://127.0.0.1", true, FEED_SERVER_HTTP_LOOPBACK },
		{ "https://sm.example.org", true, FEED_SERVER_HTTPS },
		/* Not a URL, or not http(s): refused even with
		 * --insecure-http. */
		{ "garbage", true, FEED_SERVER_REFUSED },
		{ "not a url at all", false, FEED_SERVER_REFUSED },
		{ "sm.example.org", false, FEED_SERVER_REFUSED },
		{ "10.0.0.1:8080", true, FEED_SERVER_REFUSED },
		{ "https://", false, FEED_SERVER_REFUSED },
		{ "http://sm example", true, FEED_SERVER_REFUSED },
		{ "http://127.0.0.1:99999", true, FEED_SERVER_REFUSED },
		/* curl reads these as host "path" and 127.0.0.1: the check
		 * sees the host curl would connect to. */
		{ "http:///path", false, FEED_SERVER_REFUSED },
		{ "http://2130706433/", false, FEED_SERVER_HTTP_LOOPBACK },
		{ "ftp://127.0.0.1", true, FEED_SERVER_REFUSED },
		{ "", true, FEED_SERVER_REFUSED },
	};
	char err[512];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum feed_server_kind k;

		strcpy(err, "stale");
		k = feed_server_check(cases[i].url, cases[i].insecure, err,
				      sizeof(err));
		CHECK(k == cases[i].want, "%s%s: got %d, want %d (%s)",
		      cases[i].url, cases[i].insecure ? " --insecure-http" : "",
		      k, cases[i].want, err);
		if (k == FEED_SERVER_REFUSED)
			CHECK(strstr(err, "--server"), "%s: error \"%s\" "
			      "names no --server", cases[i].url, err);
		else
			CHECK(!err[0], "%s: error \"%s\" when accepted",
			      cases[i].url, err);
	}
	feed_server_check("http://10.0.0.1", false, err, sizeof(err));
	CHECK(strstr(err, "in clear") && strstr(err, "--insecure-http"),
	      "the http refusal says why and how: %s", err);
	CHECK(feed_server_check(NULL, true, err, sizeof(err)) ==
	      FEED_SERVER_REFUSED, "NULL server");
}

static void test_ca_file_check(void)
{
	static const struct {
		const char *name, *body;
		int want;
	} cases[] = {
		{ "certificate", "# site CA\n-----BEGIN CERTIFICATE-----\n"
		  "MIIB\n-----END CERTIFICATE-----\n", 0 },
		{ "trusted", "-----BEGIN TRUSTED CERTIFICATE-----\nMIIB\n", 0 },
		{ "empty", "", -1 },
		{ "key only", "-----BEGIN PRIVATE KEY-----\nMIIB\n", -1 },
		{ "not at a line start", "x -----BEGIN CERTIFICATE-----\n", -1 },
	};
	char path[] = "/tmp/test_reconcile_ca.XXXXXX", err[512];
	int fd;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		FILE *f;

		strcpy(path, "/tmp/test_reconcile_ca.XXXXXX");
		fd = mkstemp(path);
		if (fd < 0 || !(f = fdopen(fd, "w"))) {
			CHECK(0, "mkstemp");
			return;
		}
		fputs(cases[i].body, f);
		fclose(f);
		err[0] = '\0';
		CHECK(feed_ca_file_check(path, err, sizeof(err)) ==
		      cases[i].want, "%s: %s", cases[i].name, err);
		CHECK(cases[i].want == 0 || strstr(err, "no PEM certificate"),
		      "%s: error %s", cases[i].name, err);
		unlink(path);
	}
	CHECK(feed_ca_file_check(path, err, sizeof(err)) == -1 &&
	      strstr(err, "No such file"), "missing file: %s", err);
	CHECK(feed_ca_file_check("/", err, sizeof(err)) == -1 &&
	      strstr(err, "--ca-file /"), "a directory: %s", err);
}

int main(void)
{
	test_reconcile_table();
	test_converges();
	test_suspend_comment_roundtrip();
	test_absent();
	test_predicates();
	test_comments();
	test_feed_valid();
	test_feed_invalid();
	test_feed_size_cap();
	test_group_node_updates();
	test_group_many();
	test_slurm_version();
	test_nodes_url();
	test_server_check();
	test_ca_file_check();
	printf("test_reconcile: %d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
