#include "agent_client.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "report.h"

int ot_agent_job_url(const char *agent, uint32_t jobid, const char *verb,
		     char *buf, size_t buflen)
{
	size_t n = strlen(agent);
	int rc;

	/* agent=http://10.31.0.1:9101/ must not become ...9101//v1/... */
	while (n > 0 && agent[n - 1] == '/')
		n--;
	if (n > (size_t)INT32_MAX)
		return -1;
	rc = snprintf(buf, buflen, "%.*s/v1/jobs/%" PRIu32 "/%s", (int)n,
		      agent, jobid, verb);
	if (rc < 0 || (size_t)rc >= buflen)
		return -1;
	return 0;
}

struct sink {
	char *buf;      /* OT_RESPONSE_MAX + 1 bytes */
	size_t len;
	bool overflow;
};

static size_t sink_write(char *data, size_t size, size_t nmemb, void *arg)
{
	struct sink *s = arg;
	size_t n = size * nmemb; /* libcurl documents size as always 1 */

	if (n > OT_RESPONSE_MAX - s->len) {
		/* Returning short makes libcurl abort with CURLE_WRITE_ERROR. */
		s->overflow = true;
		return 0;
	}
	memcpy(s->buf + s->len, data, n);
	s->len += n;
	s->buf[s->len] = '\0';
	return n;
}

/* Fill err from a non-2xx answer, with the agent's {"error":...} if any. */
static void http_error(const struct ot_http_response *resp, char *err,
		       size_t errlen)
{
	char msg[512];
	size_t i;

	if (ot_parse_error(resp->body, resp->len, msg, sizeof(msg)) == 0) {
		snprintf(err, errlen, "HTTP %ld: %s", resp->status, msg);
		return;
	}
	/* Not the agent's JSON: show the start of whatever answered. */
	for (i = 0; i < resp->len && i < 160 && resp->body[i]; i++)
		msg[i] = resp->body[i];
	msg[i] = '\0';
	ot_sanitize(msg);
	if (msg[0])
		snprintf(err, errlen, "HTTP %ld: %s", resp->status, msg);
	else
		snprintf(err, errlen, "HTTP %ld", resp->status);
}

int ot_agent_post(const char *url, long timeout_ms,
		  struct ot_http_response *resp, char *err, size_t errlen)
{
	char curl_err[CURL_ERROR_SIZE] = "";
	struct sink sink = { 0 };
	struct curl_slist *headers = NULL, *h;
	CURL *curl = NULL;
	CURLcode rc;
	int ret = -1;

	memset(resp, 0, sizeof(*resp));
	sink.buf = malloc(OT_RESPONSE_MAX + 1);
	if (!sink.buf) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	sink.buf[0] = '\0';

	/*
	 * No curl_global_init()/cleanup() pair: curl_easy_init() initializes
	 * on demand (thread-safe since 7.84), and a global cleanup could pull
	 * the rug from under other libcurl users in the same slurmd process.
	 */
	curl = curl_easy_init();
	if (!curl) {
		snprintf(err, errlen, "curl_easy_init failed");
		goto out;
	}
	h = curl_slist_append(headers, "Accept: application/json");
	if (h)
		headers = h;
	/* Otherwise libcurl labels the empty POST as a form submission. */
	h = curl_slist_append(headers, "Content-Type: application/json");
	if (h)
		headers = h;

	if (curl_easy_setopt(curl, CURLOPT_URL, url) != CURLE_OK) {
		snprintf(err, errlen, "invalid URL %s", url);
		goto out;
	}
	curl_easy_setopt(curl, CURLOPT_POST, 1L);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
	curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, 0L);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(curl, CURLOPT_USERAGENT, "spank_overtime/1");
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
	/*
	 * The agent is on a host-local guest network: an http_proxy inherited
	 * by slurmd must never see (or swallow) these calls.
	 */
	curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
	/*
	 * slurmd and slurmstepd are multi-threaded and own their signal
	 * handling; libcurl must not use SIGALRM for resolver timeouts.
	 */
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS,
			 (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, sink_write);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_err);

	rc = curl_easy_perform(curl);
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &resp->status);

	if (sink.overflow) {
		snprintf(err, errlen, "response larger than %d bytes",
			 OT_RESPONSE_MAX);
		goto out;
	}
	if (rc == CURLE_OPERATION_TIMEDOUT) {
		snprintf(err, errlen, "no answer within %ld ms", timeout_ms);
		goto out;
	}
	if (rc != CURLE_OK) {
		snprintf(err, errlen, "%s",
			 curl_err[0] ? curl_err : curl_easy_strerror(rc));
		goto out;
	}

	resp->body = sink.buf;
	resp->len = sink.len;
	sink.buf = NULL;
	if (resp->status < 200 || resp->status > 299) {
		http_error(resp, err, errlen);
		goto out;
	}
	ret = 0;
out:
	free(sink.buf);
	curl_slist_free_all(headers);
	if (curl)
		curl_easy_cleanup(curl);
	return ret;
}

void ot_http_response_free(struct ot_http_response *resp)
{
	free(resp->body);
	resp->body = NULL;
	resp->len = 0;
}
