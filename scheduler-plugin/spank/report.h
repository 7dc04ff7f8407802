/*
 * Parsing and formatting of the node agent's answers: the job start
 * acknowledgement and the per-job interference report (wire.JobReport in
 * vocab/wire/slurm.go).  No Slurm or libcurl dependency, so test_parse
 * links this file alone.
 */
#ifndef OVERTIME_REPORT_H
#define OVERTIME_REPORT_H

#include <stddef.h>

/*
 * Largest agent response accepted.  A report is well under 1 KiB; anything
 * near this size is not our agent, and prolog/epilog run as root, so the
 * bound is enforced both while receiving and before parsing.
 */
#define OT_RESPONSE_MAX (64 * 1024)

/* Answer of POST /v1/jobs/{id}/start.  Missing fields are empty strings. */
struct ot_job_start {
	char job[32];
	char host[256];
	char mode[64];
};

/*
 * Answer of POST /v1/jobs/{id}/end.  Missing or mistyped fields are tolerated:
 * strings are left empty, numbers NAN.  Missing action counts are 0, because
 * the agent only lists actions that happened.
 */
struct ot_job_report {
	char job[32];
	char host[256];
	char mode[64];
	char start[64];
	char end[64];
	double seconds;
	double throttled_seconds;
	double frozen_seconds;
	double owner_active_fraction;
	double guest_cpu_seconds;
	double steal_seconds;
	double desktop_slowdown;
	/*
	 * The estimate's interval and method, and the job's own loss to the
	 * desktop (wire.JobReport); NAN / "" when an older agent did not send
	 * them (Go omits them when zero).
	 */
	double slowdown_low;
	double slowdown_high;
	char slowdown_method[96];
	double guest_slowdown;
	long long actions_throttle;
	long long actions_freeze;
	long long actions_evict;
	char summary[512];
};

/*
 * Parse a response body of len bytes (need not be NUL-terminated).  Return 0,
 * or -1 with a reason in err: empty, larger than OT_RESPONSE_MAX, malformed
 * JSON, trailing data, or not a JSON object.
 */
int ot_parse_start(const char *body, size_t len, struct ot_job_start *out,
		   char *err, size_t errlen);
int ot_parse_report(const char *body, size_t len, struct ot_job_report *out,
		    char *err, size_t errlen);

/*
 * Extract the "error" string of an agent error body ({"error":"..."}) into
 * buf.  Return 0 if found, -1 otherwise (buf is then empty).
 */
int ot_parse_error(const char *body, size_t len, char *buf, size_t buflen);

/*
 * One-line key=value record of a report for the logs; fields the agent did
 * not send are left out.  Always NUL-terminates buf (truncating if needed).
 * The keys, in order: job host mode start end seconds throttled frozen
 * owner_active guest_cpu steal desktop_slowdown slowdown_low slowdown_high
 * slowdown_method guest_slowdown actions.  slowdown_method is the one value
 * that may hold spaces: it is double-quoted (a '"' in it becomes '\'').
 */
void ot_format_report(const struct ot_job_report *r, char *buf, size_t buflen);

/*
 * Replace control characters (newlines included) with '?' in place: strings
 * from the agent end up in slurmd's log, where a newline would forge lines.
 */
void ot_sanitize(char *s);

#endif
