#include "reconcile.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h> /* only for the NODE_STATE_* constants */

bool node_is_down(uint32_t node_state)
{
	return (node_state & NODE_STATE_BASE) == NODE_STATE_DOWN;
}

/* DRAIN is a flag: with no jobs Slurm shows it as DRAINED, with jobs as
 * DRAINING. Both mean "no new work", which is all the rules care about. */
bool node_is_drain(uint32_t node_state)
{
	return (node_state & NODE_STATE_DRAIN) != 0;
}

/* Slurm's power saving owns a node from SuspendProgram to the end of
 * ResumeProgram's boot: powered down, going down, or coming up. Such a node
 * has no guest by design, so "down" from the feed is expected, not news. */
bool node_is_power_managed(uint32_t node_state)
{
	return (node_state & (NODE_STATE_POWERED_DOWN | NODE_STATE_POWERING_DOWN |
			      NODE_STATE_POWERING_UP)) != 0;
}

bool reason_is_ours(const char *reason)
{
	return reason && !strncmp(reason, OT_PREFIX, strlen(OT_PREFIX));
}

bool features_has(const char *list, const char *word)
{
	size_t wl = strlen(word);

	if (!list || !wl)
		return false;
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (n == wl && !strncmp(p, word, wl))
			return true;
		if (!e)
			break;
		p = e + 1;
	}
	return false;
}

static bool str_eq0(const char *a, const char *b)
{
	return !strcmp(a ? a : "", b ? b : "");
}

static enum node_change node_state_change(const struct feed_node *want,
					  const struct cur_node *cur)
{
	bool down = node_is_down(cur->node_state);
	bool drain = node_is_drain(cur->node_state);
	bool ours = reason_is_ours(cur->reason);

	switch (want->state) {
	case OT_UP:
		/* Only lift what we put there: an administrator's drain or
		 * down (reason without our prefix) stays. */
		return (down || drain) && ours ? NC_RESUME : NC_NONE;
	case OT_FROZEN:
		/* Already down or drained (by anyone): no new work lands
		 * either way, and overwriting the reason would erase an
		 * administrator's. */
		return down || drain ? NC_NONE : NC_DRAIN;
	case OT_EVICTED:
	case OT_DOWN:
		/* An administrator's drain is left alone too: downing it
		 * would replace their reason with ours, and the next "up"
		 * would then resume a node they meant to keep drained. Its
		 * jobs are requeued regardless. */
		if (down || (drain && !ours))
			return NC_NONE;
		return NC_DOWN;
	case OT_UNKNOWN:
		break;
	}
	return NC_NONE;
}

size_t reconcile_node(const struct feed_node *want, const struct cur_node *cur,
		      struct action *out)
{
	struct action node = { .kind = ACT_NODE_UPDATE, .reason = want->reason };
	bool node_changes;
	size_t n = 0;

	/* A host Slurm powered down has no guest, and one it is waking has none
	 * yet: downing the node would stop Slurm from resuming it, and
	 * requeueing would take away the job that is waiting for the boot.
	 * ResumeTimeout is Slurm's own guard against a host that never comes. */
	if ((want->state == OT_DOWN || want->state == OT_EVICTED) &&
	    node_is_power_managed(cur->node_state))
		return 0;

	if (want->features && !str_eq0(cur->features, want->features))
		node.features = want->features;
	if (want->has_weight && cur->weight != want->weight) {
		node.set_weight = true;
		node.weight = want->weight;
	}
	node.state = node_state_change(want, cur);
	node_changes = node.features || node.set_weight ||
		node.state != NC_NONE;

	if (want->state == OT_UP && node_changes)
		out[n++] = node;

	for (size_t i = 0; i < cur->njobs; i++) {
		const struct cur_job *j = &cur->jobs[i];
		struct action a = { .job_id = j->id, .reason = want->reason };

		switch (want->state) {
		case OT_UP:
			/* Only jobs we suspended: an administrator's
			 * scontrol suspend is theirs to undo. */
			if (j->state != CJ_SUSPENDED || !j->admin_comment ||
			    strncmp(j->admin_comment, OT_SUSPENDED_PREFIX,
				    strlen(OT_SUSPENDED_PREFIX)))
				continue;
			a.kind = ACT_JOB_RESUME;
			break;
		case OT_FROZEN:
			if (j->state != CJ_RUNNING)
				continue;
			a.kind = ACT_JOB_SUSPEND;
			break;
		case OT_EVICTED:
		case OT_DOWN:
			if (j->state != CJ_RUNNING && j->state != CJ_SUSPENDED)
				continue;
			a.kind = ACT_JOB_REQUEUE;
			break;
		case OT_UNKNOWN:
			continue;
		}
		out[n++] = a;
	}

	if (want->state != OT_UP && node_changes)
		out[n++] = node;
	return n;
}

/* ---- batching ---------------------------------------------------------- */

bool node_update_same(const struct action *a, const struct action *b)
{
	if (a->state != b->state || a->set_weight != b->set_weight ||
	    (a->set_weight && a->weight != b->weight))
		return false;
	if (!a->features != !b->features ||
	    (a->features && strcmp(a->features, b->features)))
		return false;
	/* The reason is only sent with a drain or down. */
	if (a->state == NC_DRAIN || a->state == NC_DOWN)
		return str_eq0(a->reason, b->reason);
	return true;
}

static int cmp_str0(const char *a, const char *b)
{
	if (!a || !b)
		return (a != NULL) - (b != NULL);
	return strcmp(a, b);
}

/* A total order consistent with node_update_same(): equal iff the same. */
static int cmp_update(const struct action *a, const struct action *b)
{
	int c;

	if (a->state != b->state)
		return a->state < b->state ? -1 : 1;
	if (a->set_weight != b->set_weight)
		return a->set_weight ? 1 : -1;
	if (a->set_weight && a->weight != b->weight)
		return a->weight < b->weight ? -1 : 1;
	if ((c = cmp_str0(a->features, b->features)))
		return c;
	if (a->state == NC_DRAIN || a->state == NC_DOWN)
		return strcmp(a->reason ? a->reason : "",
			      b->reason ? b->reason : "");
	return 0;
}

static const struct pending_update *sort_p;

/* By update, then by the first node with that update, then by position. */
static int cmp_pos(const void *x, const void *y)
{
	size_t i = *(const size_t *)x, j = *(const size_t *)y;
	int c = cmp_update(&sort_p[i].a, &sort_p[j].a);

	if (c)
		return c;
	return i < j ? -1 : i > j;
}

size_t group_node_updates(const struct pending_update *p, size_t n,
			  size_t *order, size_t *batch)
{
	size_t *first, nb = 0;

	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	sort_p = p;
	qsort(order, n, sizeof(*order), cmp_pos);
	/* Runs of equal updates are batches; put them in the order of
	 * their first node (the run's first element, as ties sort by
	 * position), so the log and the RPCs follow the node list. */
	first = malloc(n * sizeof(*first));
	if (!first) {
		/* No memory to reorder: still correct, one per batch run. */
		for (size_t i = 0; i < n; i++) {
			if (i && cmp_update(&p[order[i - 1]].a,
					    &p[order[i]].a))
				nb++;
			batch[i] = nb;
		}
		return nb + 1;
	}
	for (size_t i = 0; i < n; i++) {
		if (!i || cmp_update(&p[order[i - 1]].a, &p[order[i]].a))
			first[nb++] = i;
	}
	{
		/* Sort the run starts by their first node's position. */
		size_t *runs = malloc(nb * sizeof(*runs)), *tmp;

		tmp = malloc(n * sizeof(*tmp));
		if (!runs || !tmp) {
			free(runs);
			free(tmp);
			for (size_t b = 0, i = 0; i < n; i++) {
				if (b + 1 < nb && i == first[b + 1])
					b++;
				batch[i] = b;
			}
			free(first);
			return nb;
		}
		for (size_t b = 0; b < nb; b++)
			runs[b] = b;
		/* Insertion sort: few batches. */
		for (size_t b = 1; b < nb; b++) {
			size_t r = runs[b], k = b;

			while (k && order[first[runs[k - 1]]] >
			       order[first[r]]) {
				runs[k] = runs[k - 1];
				k--;
			}
			runs[k] = r;
		}
		for (size_t b = 0, k = 0; b < nb; b++) {
			size_t r = runs[b];
			size_t end = r + 1 < nb ? first[r + 1] : n;

			for (size_t i = first[r]; i < end; i++) {
				tmp[k] = order[i];
				batch[k++] = b;
			}
		}
		memcpy(order, tmp, n * sizeof(*order));
		free(runs);
		free(tmp);
	}
	free(first);
	return nb;
}

void reconcile_absent_node(const char *name, struct feed_node *want)
{
	memset(want, 0, sizeof(*want));
	/* Points at caller and static storage; never passed to feed_free. */
	want->name = (char *)name;
	want->state = OT_DOWN;
	want->state_str = (char *)"absent";
	want->reason = (char *)OT_ABSENT_REASON;
}

/* ---- comments --------------------------------------------------------- */

static char *fmt(const char *f, const char *a, const char *b)
{
	char *s = NULL;

	if (asprintf(&s, f, a, b) < 0)
		return NULL;
	return s;
}

char *comment_suspended(time_t now, const char *reason)
{
	char t[32];

	return fmt("overtime: suspended at %s: %s",
		   rfc3339_utc(t, sizeof(t), now), reason);
}

char *comment_resumed(time_t now)
{
	char t[32];

	return fmt("overtime: resumed at %s%s", rfc3339_utc(t, sizeof(t), now),
		   "");
}

char *comment_requeued(time_t now, const char *reason)
{
	char t[32];

	return fmt("overtime: requeued at %s: %s",
		   rfc3339_utc(t, sizeof(t), now), reason);
}

char *comment_requeue_failed(const char *err, const char *reason)
{
	return fmt("overtime: could not requeue: %s: %s", err, reason);
}

char *comment_suspend_failed(const char *err, const char *reason)
{
	return fmt("overtime: could not suspend: %s: %s", err, reason);
}
