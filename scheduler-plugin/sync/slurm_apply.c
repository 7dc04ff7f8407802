#include "slurm_apply.h"
#include "log.h"
#include "reconcile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <slurm/slurm_version.h>

/* hostlist_t is a pointer type up to Slurm 23.02 and the structure itself from
 * 23.11 on: ot_hostlist is the handle in either. */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
typedef hostlist_t *ot_hostlist;
#else
typedef hostlist_t ot_hostlist;
#endif

/* A RUNNING or SUSPENDED job with its node list parsed once per cycle, rather
 * than once per (node, job) pair. */
struct active_job {
	const slurm_job_info_t *info;
	ot_hostlist hl;
};

struct cycle {
	int failures;
	int changes;
	/* Node updates held for batching (opts->batch). */
	struct pending_update *pend;
	size_t npend, cap;
	int rpcs; /* slurm_update_node calls made */
};

static void failed(struct cycle *c, const char *what, int err,
		   const char *k1, const char *v1, const char *k2,
		   const char *v2)
{
	c->failures++;
	log_error("slurm call failed", "call", what, "error",
		  slurm_strerror(err), k1, v1, k2, v2, NULL);
}

static const char *change_name(enum node_change s)
{
	switch (s) {
	case NC_RESUME: return "RESUME";
	case NC_DRAIN:  return "DRAIN";
	case NC_DOWN:   return "DOWN";
	case NC_NONE:   break;
	}
	return NULL;
}

static void node_msg(update_node_msg_t *m, const char *names,
		     const struct action *a)
{
	slurm_init_update_node_msg(m);
	m->node_names = (char *)names;
	if (a->features) {
		/* Without a node_features plugin, available and active
		 * features must move together or Slurm keeps scheduling on
		 * the stale active set. */
		m->features = (char *)a->features;
		m->features_act = (char *)a->features;
	}
	if (a->set_weight)
		m->weight = a->weight;
	switch (a->state) {
	case NC_RESUME:
		m->node_state = NODE_RESUME;
		break;
	case NC_DRAIN:
		m->node_state = NODE_STATE_DRAIN;
		m->reason = (char *)a->reason;
		m->reason_uid = getuid();
		break;
	case NC_DOWN:
		m->node_state = NODE_STATE_DOWN;
		m->reason = (char *)a->reason;
		m->reason_uid = getuid();
		break;
	case NC_NONE:
		break;
	}
}

static void apply_node(struct cycle *c, const char *node,
		       const struct action *a)
{
	update_node_msg_t m;
	char w[21];

	node_msg(&m, node, a);
	c->rpcs++;
	if (slurm_update_node(&m) != SLURM_SUCCESS) {
		failed(c, "slurm_update_node", errno, "node", node, NULL, NULL);
		return;
	}
	c->changes++;
	log_info("node updated", "node", node,
		 "features", a->features,
		 "weight", a->set_weight ? log_u64(w, a->weight) : NULL,
		 "state", change_name(a->state),
		 "reason", a->state == NC_DRAIN || a->state == NC_DOWN ?
		 a->reason : NULL, NULL);
}

/* Hold a node update for apply_batches(); without room, send it now. */
static void defer_node(struct cycle *c, const char *node,
		       const struct action *a)
{
	if (c->npend == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 256;
		struct pending_update *p = realloc(c->pend, cap * sizeof(*p));

		if (!p) {
			apply_node(c, node, a);
			return;
		}
		c->pend = p;
		c->cap = cap;
	}
	c->pend[c->npend++] = (struct pending_update){ .node = node, .a = *a };
}

/* The hostlist as "pc[1-3],lab7", malloc'd: slurm_hostlist_ranged_string
 * into a buffer that grows until it fits (the _malloc variant is gone in
 * Slurm 25.11, and _xmalloc's memory is libslurm's to free). */
static char *ranged_string(ot_hostlist hl)
{
	for (size_t n = 256; n <= (1u << 24); n *= 2) {
		char *buf = malloc(n);

		if (!buf)
			return NULL;
		if (slurm_hostlist_ranged_string(hl, n, buf) >= 0)
			return buf;
		free(buf);
	}
	return NULL;
}

/* One slurm_update_node for the nodes order[from..to) of c->pend. If it
 * fails (slurmctld stops at the first node it does not know, and its error
 * names none), every node is sent again on its own, so one bad node neither
 * blocks the others nor hides which one it was. */
static void apply_batch(struct cycle *c, const size_t *order, size_t from,
			size_t to)
{
	const struct action *a = &c->pend[order[from]].a;
	update_node_msg_t m;
	ot_hostlist hl;
	char *names = NULL, w[21], k[21];

	if (to - from == 1) {
		apply_node(c, c->pend[order[from]].node, a);
		return;
	}
	hl = slurm_hostlist_create(NULL);
	for (size_t i = from; hl && i < to; i++)
		if (!slurm_hostlist_push_host(hl, c->pend[order[i]].node)) {
			slurm_hostlist_destroy(hl);
			hl = NULL;
		}
	if (hl)
		names = ranged_string(hl);
	slurm_hostlist_destroy(hl);
	if (!names) {
		log_warn("cannot build a node list; updating nodes one by one",
			 NULL);
		goto one_by_one;
	}
	node_msg(&m, names, a);
	c->rpcs++;
	if (slurm_update_node(&m) != SLURM_SUCCESS) {
		log_warn("batched node update failed; updating nodes one by "
			 "one", "nodes", names, "error",
			 slurm_strerror(errno), NULL);
		free(names);
		goto one_by_one;
	}
	c->changes += (int)(to - from);
	log_info("nodes updated", "nodes", names,
		 "count", log_u64(k, to - from),
		 "features", a->features,
		 "weight", a->set_weight ? log_u64(w, a->weight) : NULL,
		 "state", change_name(a->state),
		 "reason", a->state == NC_DRAIN || a->state == NC_DOWN ?
		 a->reason : NULL, NULL);
	free(names);
	return;
one_by_one:
	for (size_t i = from; i < to; i++)
		apply_node(c, c->pend[order[i]].node, &c->pend[order[i]].a);
}

static void apply_batches(struct cycle *c)
{
	size_t *order, *batch, from = 0;

	if (!c->npend)
		return;
	order = malloc(c->npend * sizeof(*order));
	batch = malloc(c->npend * sizeof(*batch));
	if (!order || !batch) {
		for (size_t i = 0; i < c->npend; i++)
			apply_node(c, c->pend[i].node, &c->pend[i].a);
		goto out;
	}
	group_node_updates(c->pend, c->npend, order, batch);
	for (size_t i = 1; i <= c->npend; i++)
		if (i == c->npend || batch[i] != batch[from]) {
			apply_batch(c, order, from, i);
			from = i;
		}
out:
	free(order);
	free(batch);
	c->npend = 0;
}

static int set_comment(struct cycle *c, uint32_t job_id, const char *node,
		       const char *comment)
{
	job_desc_msg_t d;
	job_array_resp_msg_t *resp = NULL;
	char id[21];
	int rc;

	log_u64(id, job_id);
	if (!comment) {
		c->failures++;
		log_error("out of memory building a job comment", "job", id,
			  NULL);
		return -1;
	}
	slurm_init_job_desc_msg(&d);
	/* By its id's text: job_id_str is in every release from 22.05 on, the
	 * numeric job_id is gone from job_desc_msg_t in 25.11.  With job_id_str,
	 * slurm_update_job2 (slurm_update_job logs an error asking for it). */
	d.job_id_str = id;
	d.admin_comment = (char *)comment;
	rc = slurm_update_job2(&d, &resp);
	if (rc == SLURM_SUCCESS && resp && resp->job_array_count > 0 && resp->error_code[0]) {
		errno = (int)resp->error_code[0];
		rc = SLURM_ERROR;
	}
	slurm_free_job_array_resp(resp);
	if (rc != SLURM_SUCCESS) {
		failed(c, "slurm_update_job2", errno, "job", id, "node", node);
		return -1;
	}
	c->changes++;
	log_info("comment set", "job", id, "node", node, "comment", comment,
		 NULL);
	return 0;
}

static void suspend_job(struct cycle *c, const char *node,
			const struct action *a)
{
	char id[21], *cm;
	int rc, err;

	log_u64(id, a->job_id);
	cm = comment_suspended(time(NULL), a->reason);
	rc = set_comment(c, a->job_id, node, cm);
	free(cm);
	/* The comment is what later lets "up" resume the job; suspending
	 * without it would leave the job suspended until someone notices.
	 * The guest is frozen meanwhile, so retrying next cycle costs
	 * nothing. */
	if (rc)
		return;
	if (slurm_suspend(a->job_id) == SLURM_SUCCESS) {
		c->changes++;
		log_info("job suspended", "job", id, "node", node, "reason",
			 a->reason, NULL);
		return;
	}
	err = errno;
	failed(c, "slurm_suspend", err, "job", id, "node", node);
	/* Do not leave a comment claiming a suspension that did not happen. */
	cm = comment_suspend_failed(slurm_strerror(err), a->reason);
	set_comment(c, a->job_id, node, cm);
	free(cm);
}

static void resume_job(struct cycle *c, const char *node,
		       const struct action *a)
{
	char id[21], *cm;

	log_u64(id, a->job_id);
	if (slurm_resume(a->job_id) != SLURM_SUCCESS) {
		failed(c, "slurm_resume", errno, "job", id, "node", node);
		return;
	}
	c->changes++;
	log_info("job resumed", "job", id, "node", node, NULL);
	cm = comment_resumed(time(NULL));
	set_comment(c, a->job_id, node, cm);
	free(cm);
}

static void requeue_job(struct cycle *c, const char *node,
			const struct action *a)
{
	char id[21], *cm;
	int err;

	log_u64(id, a->job_id);
	cm = comment_requeued(time(NULL), a->reason);
	/* The requeue matters more than its comment: go ahead either way. */
	set_comment(c, a->job_id, node, cm);
	free(cm);
	if (slurm_requeue(a->job_id, 0) == SLURM_SUCCESS) {
		c->changes++;
		log_info("job requeued", "job", id, "node", node, "reason",
			 a->reason, NULL);
		return;
	}
	err = errno;
	failed(c, "slurm_requeue", err, "job", id, "node", node);
	/* e.g. --no-requeue jobs: the DOWN that follows will end them, so
	 * say why on the job itself; a job is never lost silently. */
	cm = comment_requeue_failed(slurm_strerror(err), a->reason);
	set_comment(c, a->job_id, node, cm);
	free(cm);
}

/* ---- short notice ----------------------------------------------------- */

static void warn_job(struct cycle *c, const char *node, uint32_t job_id,
		     const struct window *w, const struct apply_opts *o)
{
	char id[21], *cm;

	log_u64(id, job_id);
	/* Signal first, comment second: a daemon that dies in between signals
	 * again after its restart (the job's trap runs twice), rather than
	 * never (the job is requeued unwarned). The comment is what stops
	 * every later cycle, and a restarted daemon, from signalling again. */
	if (slurm_kill_job(job_id, (uint16_t)o->warn_signal, KILL_FULL_JOB) !=
	    SLURM_SUCCESS) {
		failed(c, "slurm_kill_job", errno, "job", id, "node", node);
		return;
	}
	c->changes++;
	log_info("job warned", "job", id, "node", node, "signal",
		 o->warn_signame, "reason", w->reason, NULL);
	cm = comment_warned(time(NULL), o->warn_signame, w);
	set_comment(c, job_id, node, cm);
	free(cm);
}

static void short_notice_jobs(struct cycle *c, const char *node,
			      const struct cur_job *cj, size_t njobs,
			      const slurm_job_info_t *const *info,
			      const struct action *acts, size_t na,
			      const struct apply_opts *o)
{
	for (size_t i = 0; i < njobs; i++) {
		const struct window *hit;
		struct warn_job wj = {
			.id = cj[i].id, .state = cj[i].state,
			.end_time = info[i]->end_time,
			.admin_comment = info[i]->admin_comment,
			.resv_name = info[i]->resv_name,
		};
		bool acted = false;

		/* The node's own rules (down, frozen) already act on this
		 * job: a second requeue would only fail. */
		for (size_t k = 0; k < na; k++)
			if (acts[k].kind != ACT_NODE_UPDATE &&
			    acts[k].job_id == cj[i].id)
				acted = true;
		if (acted)
			continue;
		switch (short_notice(o->windows->w, o->windows->n, node, &wj,
				     time(NULL), o->warn_lead_s, &hit)) {
		case WA_SIGNAL:
			warn_job(c, node, cj[i].id, hit, o);
			break;
		case WA_REQUEUE: {
			struct action a = { .kind = ACT_JOB_REQUEUE,
					    .job_id = cj[i].id,
					    .reason = hit->reason };
			requeue_job(c, node, &a);
			break;
		}
		case WA_NONE:
			break;
		}
	}
}

/* ---- reservations ----------------------------------------------------- */

static void apply_resv(struct cycle *c, const struct resv_action *a)
{
	char name[300], s[32], e[32];
	resv_desc_msg_t d;

	rfc3339_utc(s, sizeof(s), a->start);
	rfc3339_utc(e, sizeof(e), a->end);
	if (a->kind == RA_DELETE) {
		reservation_name_msg_t m = { .name = (char *)a->name };

		if (slurm_delete_reservation(&m) != SLURM_SUCCESS) {
			failed(c, "slurm_delete_reservation", errno,
			       "reservation", a->name, NULL, NULL);
			return;
		}
		c->changes++;
		log_info("reservation deleted", "reservation", a->name,
			 "node", a->node, NULL);
		return;
	}
	slurm_init_resv_desc_msg(&d);
	d.end_time = a->end;
	if (a->kind == RA_UPDATE) {
		d.name = (char *)a->name;
		if (slurm_update_reservation(&d) != SLURM_SUCCESS) {
			failed(c, "slurm_update_reservation", errno,
			       "reservation", a->name, NULL, NULL);
			return;
		}
		c->changes++;
		log_info("reservation updated", "reservation", a->name,
			 "node", a->node, "end", e, NULL);
		return;
	}
	d.name = resv_name(name, sizeof(name), a->node, a->start);
	d.start_time = a->start;
	d.node_list = (char *)a->node;
	/* MAINT: the node is out of service in the window, and Slurm lets it
	 * overlap an administrator's reservation. IGNORE_JOBS: a reservation
	 * for a change made at short notice can still be placed over the job
	 * that runs there (short_notice() warns and requeues that job). The
	 * reservation is for nobody's jobs but root's. */
	d.flags = RESERVE_FLAG_MAINT | RESERVE_FLAG_IGN_JOBS;
	d.users = (char *)"root";
	char *got = slurm_create_reservation(&d);
	if (!got) {
		failed(c, "slurm_create_reservation", errno, "reservation",
		       name, "node", a->node);
		return;
	}
	c->changes++;
	log_info("reservation created", "reservation", got, "node", a->node,
		 "start", s, "end", e, "reason", a->reason, NULL);
	free(got);
}

static bool node_known(const node_info_msg_t *nodes, const char *name)
{
	for (uint32_t i = 0; i < nodes->record_count; i++)
		if (nodes->node_array[i].name &&
		    !strcmp(nodes->node_array[i].name, name))
			return true;
	return false;
}

static void reservation_cycle(struct cycle *c, const node_info_msg_t *nodes,
			      const struct windows *ws)
{
	reserve_info_msg_t *rm = NULL;
	struct window *want = NULL;
	struct cur_resv *cur = NULL;
	struct resv_action *acts = NULL;
	size_t nwant = 0, ncur = 0, na;

	if (slurm_load_reservations(0, &rm) != SLURM_SUCCESS) {
		failed(c, "slurm_load_reservations", errno, NULL, NULL, NULL,
		       NULL);
		return;
	}
	want = calloc(ws->n + 1, sizeof(*want));
	cur = calloc(rm->record_count + 1, sizeof(*cur));
	acts = calloc(ws->n + rm->record_count + 1, sizeof(*acts));
	if (!want || !cur || !acts) {
		log_error("out of memory in reservation reconcile", NULL);
		c->failures++;
		goto out;
	}
	/* Slurm refuses a reservation on a node it does not know; a host that
	 * has never registered gets its reservations once it has. */
	for (size_t i = 0; i < ws->n; i++)
		if (node_known(nodes, ws->w[i].node))
			want[nwant++] = ws->w[i];
	for (uint32_t i = 0; i < rm->record_count; i++) {
		const reserve_info_t *r = &rm->reservation_array[i];

		if (!r->name || strncmp(r->name, RESV_PREFIX,
					strlen(RESV_PREFIX)))
			continue;
		cur[ncur++] = (struct cur_resv){ .name = r->name,
			.node_list = r->node_list, .start = r->start_time,
			.end = r->end_time };
	}
	na = reconcile_reservations(want, nwant, cur, ncur, time(NULL), acts);
	for (size_t i = 0; i < na; i++)
		apply_resv(c, &acts[i]);
out:
	free(want);
	free(cur);
	free(acts);
	slurm_free_reservation_info_msg(rm);
}

/* ---- node declaration ------------------------------------------------- */

static void declare_node(struct cycle *c, const struct feed_node *fn)
{
	update_node_msg_t m;
	char line[512];

	if (node_decl_line(line, sizeof(line), fn->name, fn->cpus,
			   fn->memory_mb, fn->gpus)) {
		log_debug("node not declared: no size reported", "node",
			  fn->name, NULL);
		return;
	}
	slurm_init_update_node_msg(&m);
	/* slurm_create_node takes a slurm.conf node line, as
	 * `scontrol create` passes it. */
	m.extra = line;
	if (slurm_create_node(&m) != SLURM_SUCCESS) {
		failed(c, "slurm_create_node", errno, "node", fn->name, "line",
		       line);
		return;
	}
	c->changes++;
	log_info("node declared", "node", fn->name, "line", line, NULL);
}

static void apply(struct cycle *c, const char *node, const struct action *a)
{
	switch (a->kind) {
	case ACT_NODE_UPDATE: apply_node(c, node, a); break;
	case ACT_JOB_SUSPEND: suspend_job(c, node, a); break;
	case ACT_JOB_RESUME:  resume_job(c, node, a); break;
	case ACT_JOB_REQUEUE: requeue_job(c, node, a); break;
	}
}

static enum cur_job_state job_state(const slurm_job_info_t *j)
{
	switch (j->job_state & JOB_STATE_BASE) {
	case JOB_RUNNING:   return CJ_RUNNING;
	case JOB_SUSPENDED: return CJ_SUSPENDED;
	default:            return CJ_OTHER;
	}
}

/* ---- the cycle -------------------------------------------------------- */

/* What every cycle reads besides the nodes: the jobs, the active ones' node
 * lists parsed once, and the scratch arrays node_cycle fills. */
struct cycle_jobs {
	job_info_msg_t *jobs;
	struct active_job *act;
	size_t nact;
	struct cur_job *cj;
	const slurm_job_info_t **cinfo;
	struct action *acts;
	bool *seen; /* per feed node: Slurm has it */
};

static void node_cycle(struct cycle *c, const struct feed *feed,
		       const node_info_t *n, struct cycle_jobs *j,
		       const struct apply_opts *o)
{
	const struct active_job *act = j->act;
	const size_t nact = j->nact;
	struct cur_job *cj = j->cj;
	const slurm_job_info_t **cinfo = j->cinfo;
	struct action *acts = j->acts;
	bool *seen = j->seen;
	const struct feed_node *want = feed_find_node(feed, n->name);
	struct feed_node absent;
	struct cur_node cur = {
		.name = n->name, .features = n->features, .weight = n->weight,
		.node_state = n->node_state, .reason = n->reason, .jobs = cj,
	};
	size_t na;

	if (want) {
		seen[want - feed->nodes] = true;
	} else {
		/* Only nodes we manage, and only against a feed that lists
		 * something: an empty feed from a misconfigured server must
		 * not take the whole pool down. */
		if (!features_has(n->features, OT_FEATURE_MANAGED) || !feed->nnodes)
			return;
		reconcile_absent_node(n->name, &absent);
		want = &absent;
	}
	if ((n->node_state & NODE_STATE_BASE) == NODE_STATE_FUTURE) {
		log_debug("node not registered in Slurm yet", "node", n->name,
			  NULL);
		return;
	}
	for (size_t i = 0; i < nact; i++) {
		if (slurm_hostlist_find(act[i].hl, n->name) < 0)
			continue;
		cj[cur.njobs].id = act[i].info->job_id;
		cj[cur.njobs].state = job_state(act[i].info);
		cj[cur.njobs].admin_comment = act[i].info->admin_comment;
		cinfo[cur.njobs] = act[i].info;
		cur.njobs++;
	}
	na = reconcile_node(want, &cur, acts);
	if (want->state == OT_UNKNOWN)
		log_warn("unknown node agent state; node state left alone",
			 "node", n->name, "state", want->state_str, NULL);
	for (size_t i = 0; i < na; i++) {
		/* Only a node's last action waits for the batch: "up" resumes
		 * the node before its jobs, which must find it usable. */
		if (o->batch && i + 1 == na && acts[i].kind == ACT_NODE_UPDATE)
			defer_node(c, n->name, &acts[i]);
		else
			apply(c, n->name, &acts[i]);
	}
	if (o->windows)
		short_notice_jobs(c, n->name, cj, cur.njobs, cinfo, acts, na,
				  o);
}

static void jobs_free(struct cycle_jobs *j)
{
	for (size_t i = 0; i < j->nact; i++)
		slurm_hostlist_destroy(j->act[i].hl);
	free(j->act);
	free(j->cj);
	free(j->cinfo);
	free(j->acts);
	free(j->seen);
	slurm_free_job_info_msg(j->jobs);
	memset(j, 0, sizeof(*j));
}

static int jobs_load(struct cycle *c, const struct feed *feed,
		     struct cycle_jobs *j)
{
	char a[21];

	memset(j, 0, sizeof(*j));
	if (slurm_load_jobs(0, &j->jobs, SHOW_ALL) != SLURM_SUCCESS) {
		failed(c, "slurm_load_jobs", errno, NULL, NULL, NULL, NULL);
		j->jobs = NULL;
		return -1;
	}
	j->act = calloc(j->jobs->record_count + 1, sizeof(*j->act));
	j->cj = calloc(j->jobs->record_count + 1, sizeof(*j->cj));
	j->cinfo = calloc(j->jobs->record_count + 1, sizeof(*j->cinfo));
	j->acts = calloc(RECONCILE_MAX_ACTIONS(j->jobs->record_count + 1),
			 sizeof(*j->acts));
	j->seen = calloc(feed->nnodes + 1, sizeof(*j->seen));
	if (!j->act || !j->cj || !j->cinfo || !j->acts || !j->seen) {
		log_error("out of memory in reconcile", NULL);
		jobs_free(j);
		return -1;
	}
	for (uint32_t i = 0; i < j->jobs->record_count; i++) {
		const slurm_job_info_t *job = &j->jobs->job_array[i];

		if (job_state(job) == CJ_OTHER || !job->nodes || !*job->nodes)
			continue;
		j->act[j->nact].hl = slurm_hostlist_create(job->nodes);
		if (!j->act[j->nact].hl) {
			log_warn("cannot parse a job's node list", "job",
				 log_u64(a, job->job_id), "nodes", job->nodes,
				 NULL);
			continue;
		}
		j->act[j->nact++].info = job;
	}
	return 0;
}

/* Feed nodes Slurm does not have: declared (--declare-nodes) or noted. */
static void unseen_nodes(struct cycle *c, const struct feed *feed,
			 const bool *seen, const struct apply_opts *o)
{
	for (size_t i = 0; i < feed->nnodes; i++) {
		if (seen[i])
			continue;
		if (o->declare_nodes)
			declare_node(c, &feed->nodes[i]);
		else
			log_debug("node not registered in Slurm yet", "node",
				  feed->nodes[i].name, NULL);
	}
}

static int cycle_done(const struct cycle *c, const char *kind)
{
	char a[21], b[21], r[21];

	log_debug("reconcile done", "kind", kind,
		  "changes", log_u64(a, (uint64_t)c->changes),
		  "failures", log_u64(b, (uint64_t)c->failures),
		  "update_node_calls", log_u64(r, (uint64_t)c->rpcs), NULL);
	return c->failures;
}

/* The whole reconcile: every node Slurm has against the whole feed, then the
 * reservations. */
static int whole_cycle(const struct feed *feed, const struct apply_opts *o)
{
	node_info_msg_t *nodes = NULL;
	struct cycle_jobs j;
	struct cycle c = { 0 };

	if (slurm_load_node(0, &nodes, SHOW_ALL) != SLURM_SUCCESS) {
		failed(&c, "slurm_load_node", errno, NULL, NULL, NULL, NULL);
		return -1;
	}
	if (jobs_load(&c, feed, &j)) {
		slurm_free_node_info_msg(nodes);
		return -1;
	}
	for (uint32_t i = 0; i < nodes->record_count; i++)
		if (nodes->node_array[i].name)
			node_cycle(&c, feed, &nodes->node_array[i], &j, o);
	apply_batches(&c);
	unseen_nodes(&c, feed, j.seen, o);
	if (o->windows)
		reservation_cycle(&c, nodes, o->windows);

	/* feed->reports are not written to Slurm: a report arrives after the
	 * job's epilog, and Slurm takes no update of a finished job. The SPANK
	 * plugin puts a batch job's report into its AdminComment while the job
	 * still runs (docs/slurm.md). */
	free(c.pend);
	jobs_free(&j);
	slurm_free_node_info_msg(nodes);
	return cycle_done(&c, "whole");
}

/* A delta reconcile: only the feed's nodes, each loaded on its own
 * (slurm_load_node_single), so that a change costs O(changes) and not a load
 * of every node (docs/benchmarks/slurmscale.md). Nodes Slurm has that the
 * site dropped, and the reservations, wait for the next whole cycle. */
static int delta_cycle(const struct feed *feed, const struct apply_opts *o)
{
	node_info_msg_t **one;
	struct cycle_jobs j;
	struct cycle c = { 0 };

	if (!feed->nnodes)
		return cycle_done(&c, "delta");
	/* Kept until the batches are sent: deferred updates name the node by
	 * the loaded record's string. */
	one = calloc(feed->nnodes, sizeof(*one));
	if (!one) {
		log_error("out of memory in reconcile", NULL);
		return -1;
	}
	if (jobs_load(&c, feed, &j)) {
		free(one);
		return -1;
	}
	for (size_t i = 0; i < feed->nnodes; i++) {
		const char *name = feed->nodes[i].name;

		if (slurm_load_node_single(&one[i], (char *)name, SHOW_ALL) !=
		    SLURM_SUCCESS) {
			int err = errno;

			one[i] = NULL;
			if (err == ESLURM_INVALID_NODE_NAME)
				continue; /* unknown to Slurm: unseen */
			/* A failed load is not "unknown to Slurm": never
			 * declare a node because slurmctld did not answer. */
			failed(&c, "slurm_load_node_single", err, "node", name,
			       NULL, NULL);
			j.seen[i] = true;
			continue;
		}
		for (uint32_t k = 0; k < one[i]->record_count; k++)
			if (one[i]->node_array[k].name)
				node_cycle(&c, feed, &one[i]->node_array[k], &j,
					   o);
	}
	apply_batches(&c);
	unseen_nodes(&c, feed, j.seen, o);
	free(c.pend);
	jobs_free(&j);
	for (size_t i = 0; i < feed->nnodes; i++)
		slurm_free_node_info_msg(one[i]);
	free(one);
	return cycle_done(&c, "delta");
}

int apply_cycle(const struct feed *feed, const struct apply_opts *o)
{
	return feed->delta ? delta_cycle(feed, o) : whole_cycle(feed, o);
}

bool slurm_power_saving(void)
{
	slurm_conf_t *conf = NULL;
	bool on;

	if (slurm_load_ctl_conf((time_t)0, &conf) != SLURM_SUCCESS || !conf) {
		/* Unknown: reserving is the safe side for jobs. */
		log_warn("cannot read slurmctld's configuration; reserving "
			 "local-disk windows", "error",
			 slurm_strerror(errno), NULL);
		return false;
	}
	on = conf->suspend_program && conf->suspend_program[0];
	slurm_free_ctl_conf(conf);
	return on;
}

char *slurm_controller_version(void)
{
	slurm_conf_t *conf = NULL;
	char *v = NULL;

	if (slurm_load_ctl_conf((time_t)0, &conf) != SLURM_SUCCESS || !conf) {
		log_debug("cannot read slurmctld's configuration for its version",
			  "error", slurm_strerror(errno), NULL);
		return NULL;
	}
	if (conf->version)
		v = strdup(conf->version);
	slurm_free_ctl_conf(conf);
	return v;
}
