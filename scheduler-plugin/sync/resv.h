/* Windows in which a node's compute guest will be stopped by its schedule
 * (GET /api/v1/slurm/reservations): parsing, and the pure decisions built on
 * them:
 *  - which Slurm reservations to create, extend or delete (one maintenance
 *    reservation per window, named "overtime-…");
 *  - what to do to a job a window will hit anyway (signal it ahead, requeue
 *    it when the window starts).
 * Like reconcile.c, nothing here talks to slurmctld, so every rule is a table
 * test, and the same inputs always give the same actions. */
#ifndef OT_RESV_H
#define OT_RESV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "reconcile.h"

/* Our reservations' names start with this; any other reservation is an
 * administrator's and never touched. */
#define RESV_PREFIX "overtime-"

/* Job comment written after the warning signal. Its window start (RFC 3339)
 * is what keeps a restarted daemon from signalling the same job for the same
 * window again: the comment lives in slurmctld, not in this process. */
#define OT_WARNED_PREFIX "overtime: warned"

struct window {
	char *node;
	time_t start, end;
	char *mode;
	char *exception; /* NULL: weekly schedule */
	char *reason;    /* "overtime: course-bio at 10:00" */
	bool power_save; /* all local disk: slots Slurm's power saving may fill */
};

struct windows {
	time_t now;      /* the site manager's clock when it answered */
	int64_t horizon_s;
	struct window *w;
	size_t n;
};

/* Parse a reservations body. Returns 0 and fills *out (free with
 * windows_free), or -1 with a reason in err. A bad window fails the whole
 * answer: a partial list would delete the reservations of what is missing. */
int windows_parse(const char *buf, size_t len, struct windows *out,
		  char *err, size_t errlen);
void windows_free(struct windows *w);
void window_free(struct window *w);

/* set_err formats a parse error into err (errlen bytes; nothing when err is NULL). */
void set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* "2026-11-22T10:00:00Z" -> time_t (UTC). Only this form: the site manager
 * writes whole seconds in UTC. */
int parse_rfc3339_utc(const char *s, time_t *out);

/* A reservation as Slurm has it (only those named RESV_PREFIX…). */
struct cur_resv {
	const char *name;
	const char *node_list;
	time_t start, end;
};

enum resv_kind { RA_CREATE, RA_UPDATE, RA_DELETE };

struct resv_action {
	enum resv_kind kind;
	const char *name;     /* RA_UPDATE, RA_DELETE: the existing one's */
	const char *node;     /* RA_CREATE */
	time_t start, end;    /* RA_CREATE: both; RA_UPDATE: end only */
	const char *reason;   /* for the log */
};

/* Decide the reservation changes: every window of want (whose node exists in
 * Slurm: the caller filters) gets one reservation on its node; cur are our
 * reservations as Slurm has them. A reservation and a window match when they
 * are on the same node and start at the same instant, or both have started
 * already (a window in progress is sent clipped to the site manager's now,
 * and a reservation created in the past was clipped to the daemon's). A
 * matched reservation whose end differs is updated (the horizon rolls on, an
 * exception grew); an unmatched window is created, starting no earlier than
 * now; an unmatched reservation is deleted (the schedule changed). out needs
 * room for nwant + ncur actions; returns how many. */
size_t reconcile_reservations(const struct window *want, size_t nwant,
			      const struct cur_resv *cur, size_t ncur,
			      time_t now, struct resv_action *out);

/* The reservation name for a new window: RESV_PREFIX node "-" start (Unix
 * seconds). Writes into buf; returns buf. */
char *resv_name(char *buf, size_t len, const char *node, time_t start);

enum warn_kind { WA_NONE, WA_SIGNAL, WA_REQUEUE };

struct warn_job {
	uint32_t id;
	enum cur_job_state state;
	time_t end_time;          /* when its time limit runs out */
	const char *admin_comment;
	const char *resv_name;    /* the job's own reservation, or NULL */
};

/* What a job on node needs because of the node's windows (all of them, any
 * order):
 *  - WA_REQUEUE: a window is in progress (start <= now < end) and the job
 *    still runs or is suspended on the node: it was placed before the window
 *    was known (a reservation with IGNORE_JOBS lets it run on);
 *  - WA_SIGNAL: a window starts within lead_s, the job is running, its time
 *    limit reaches past the start (else it ends in time by itself), and its
 *    comment does not already say it was warned for this window;
 *  - WA_NONE otherwise, and always for jobs running inside one of our own
 *    reservations (an administrator put them there on purpose).
 * *hit is the window acted on. */
enum warn_kind short_notice(const struct window *w, size_t n, const char *node,
			    const struct warn_job *j, time_t now, int lead_s,
			    const struct window **hit);

/* The comment a warned job gets: OT_WARNED_PREFIX " at T (SIGNAME) of window
 * START: reason" (malloc'd, NULL on OOM). */
char *comment_warned(time_t now, const char *signame, const struct window *w);
/* Does comment say this window's warning was sent? */
bool comment_is_warned_for(const char *comment, const struct window *w);

/* When the next short-notice deadline falls (a window's start - lead_s, or its
 * start), after now; 0 when there is none. The daemon shortens its long poll
 * to it so a warning and a requeue happen on time, not up to --resync late. */
time_t next_deadline(const struct windows *ws, time_t now, int lead_s);

/* The node line slurm_create_node takes for a host Slurm has never seen:
 * "NodeName=N State=CLOUD Features=overtime CPUs=C RealMemory=M[ Gres=gpu:G]".
 * Returns -1 (nothing written) when the size is unknown (cpus or memory 0):
 * Slurm would assume one CPU. */
int node_decl_line(char *buf, size_t len, const char *node, int cpus,
		   int memory_mb, int gpus);

#endif
