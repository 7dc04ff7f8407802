/*
 * HTTP client for the node agent's job API (node-agent/agent/jobs.go):
 *
 *	POST {agent}/v1/jobs/{id}/start
 *	POST {agent}/v1/jobs/{id}/end
 *
 * The agent listens on the host side of the guest network, so there is no
 * authentication: the agent itself decides what a job report contains.
 * No logging here: callers log, tests check the error strings.
 */
#ifndef OVERTIME_AGENT_CLIENT_H
#define OVERTIME_AGENT_CLIENT_H

#include <stddef.h>
#include <stdint.h>

struct ot_http_response {
	long status; /* HTTP status, 0 if no response came */
	char *body;  /* NUL-terminated (the agent's JSON may not be) */
	size_t len;  /* body length, at most OT_RESPONSE_MAX */
};

/*
 * Build "{agent}/v1/jobs/{jobid}/{verb}" into buf, dropping trailing slashes
 * of agent.  Return 0, or -1 if it does not fit.
 */
int ot_agent_job_url(const char *agent, uint32_t jobid, const char *verb,
		     char *buf, size_t buflen);

/*
 * POST an empty body to url.  Return 0 on a 2xx answer with resp filled in,
 * or -1 with a reason in err (unreachable, timeout, non-2xx with the agent's
 * error message, response over OT_RESPONSE_MAX).  resp must be released with
 * ot_http_response_free() in both cases.
 */
int ot_agent_post(const char *url, long timeout_ms,
		  struct ot_http_response *resp, char *err, size_t errlen);

void ot_http_response_free(struct ot_http_response *resp);

#endif
