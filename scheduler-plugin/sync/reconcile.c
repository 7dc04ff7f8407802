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
