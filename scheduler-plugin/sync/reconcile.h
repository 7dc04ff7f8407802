/* Desired (feed) vs current (Slurm) state: the pure decision part.
 *
 * Nothing here talks to slurmctld. The caller describes a Slurm node and the
 * jobs on it with plain structs; reconcile_node() says what to change. That
 * keeps every rule unit-testable without a controller, and makes the reconcile
 * level-triggered: the same inputs always give the same actions, and inputs
 * that already match give none. */
#ifndef OT_RECONCILE_H
#define OT_RECONCILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "feed.h"

/* Reasons and comments we write start with this; anything else on a node
 * was put there by an administrator (or by Slurm) and is not ours to undo. */
#define OT_PREFIX "overtime:"
#define OT_SUSPENDED_PREFIX "overtime: suspended"
#define OT_ABSENT_REASON "overtime: host not in the site manager"

/* The node feature the site manager puts on every node it manages
 * (wire.FeatureOvertime): a node with it that the feed does not list is a
 * host removed from the site. test_fixtures checks the feed still uses it. */
#define OT_FEATURE_MANAGED "overtime"

enum cur_job_state { CJ_OTHER, CJ_RUNNING, CJ_SUSPENDED };

struct cur_job {
	uint32_t id;
	enum cur_job_state state;
	const char *admin_comment; /* may be NULL */
};

/* What Slurm currently says about one node. */
struct cur_node {
	const char *name;
	const char *features;  /* available features; NULL == "" */
	uint32_t weight;
	uint32_t node_state;   /* enum node_states | NODE_STATE_* flags */
	const char *reason;    /* may be NULL */
	const struct cur_job *jobs; /* jobs on this node */
	size_t njobs;
};

/* Node state changes, written into update_node_msg.node_state. */
enum node_change { NC_NONE, NC_RESUME, NC_DRAIN, NC_DOWN };

enum action_kind {
	ACT_NODE_UPDATE,  /* features/weight/state in one update_node call */
	ACT_JOB_SUSPEND,  /* comment "suspended", then slurm_suspend */
	ACT_JOB_RESUME,   /* slurm_resume, then comment "resumed" */
	ACT_JOB_REQUEUE,  /* comment "requeued", then slurm_requeue */
};

struct action {
	enum action_kind kind;
	/* ACT_NODE_UPDATE */
	const char *features;  /* NULL: unchanged */
	bool set_weight;
	uint32_t weight;
	enum node_change state;
	/* jobs */
	uint32_t job_id;
	/* DRAIN/DOWN reason, and the tail of job comments. Points into the
	 * desired node; valid as long as it is. */
	const char *reason;
};

/* Upper bound on actions for a node with njobs jobs: one per job plus one
 * node update. */
#define RECONCILE_MAX_ACTIONS(njobs) ((njobs) + 1)

/* Decide what to do for one node. want->features == NULL or !has_weight
 * leave those alone. Fills out (room for RECONCILE_MAX_ACTIONS(cur->njobs))
 * in the order they must be applied and returns how many:
 *  - up:             node update (resume) first, then job resumes, so a
 *                    resumed job finds its node usable;
 *  - frozen:         job suspends first, then drain;
 *  - evicted/down:   job requeues first, then down, so jobs are requeued
 *                    with our comment rather than killed by the DOWN. */
size_t reconcile_node(const struct feed_node *want, const struct cur_node *cur,
		      struct action *out);

/* Desired state for a Slurm node tagged "overtime" that the (non-empty) feed
 * does not mention: down, requeue its jobs, leave features and weight. */
void reconcile_absent_node(const char *name, struct feed_node *want);

/* ---- batching ------------------------------------------------------------
 *
 * One feed response can change hundreds of nodes the same way (a lecture
 * starts: every PC of a room goes owner-active). Node updates whose message is
 * identical are sent as one slurm_update_node with a hostlist, rather than one
 * RPC per node. */

/* A node update waiting to be sent. */
struct pending_update {
	const char *node;
	struct action a; /* kind == ACT_NODE_UPDATE */
};

/* Would a and b be the same update_node message apart from the node name:
 * same features (or both unchanged), weight, state change and, for a drain
 * or down, reason? */
bool node_update_same(const struct action *a, const struct action *b);

/* Order p[0..n) into batches: fills order (room for n) with a permutation of
 * 0..n-1 in which updates that node_update_same() are adjacent, batches in
 * the order of their first node and nodes in their original order within
 * one, and batch (room for n) with each position's batch number. Returns the
 * number of batches. */
size_t group_node_updates(const struct pending_update *p, size_t n,
			  size_t *order, size_t *batch);

/* The predicates the rules use, exposed for the tests and the logs. */
bool node_is_down(uint32_t node_state);
bool node_is_drain(uint32_t node_state);
bool node_is_power_managed(uint32_t node_state);
bool reason_is_ours(const char *reason);
/* Is word one of the comma-separated entries of list? */
bool features_has(const char *list, const char *word);

/* Job comments. Return malloc'd strings (NULL on OOM). */
char *comment_suspended(time_t now, const char *reason);
char *comment_resumed(time_t now);
char *comment_requeued(time_t now, const char *reason);
char *comment_requeue_failed(const char *err, const char *reason);
char *comment_suspend_failed(const char *err, const char *reason);

#endif
