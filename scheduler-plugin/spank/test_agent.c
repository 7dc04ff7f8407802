/*
 * Tests of the HTTP client against a throwaway one-shot server on 127.0.0.1:
 * the request the agent sees, 2xx/non-2xx handling, the response size cap,
 * the timeout, an unreachable agent and proxy avoidance.
 */
#define _GNU_SOURCE

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_client.h"
#include "report.h"
#include "test_check.h"
#include "test_server.h"

static void base_url(const struct server *srv, char *buf, size_t len,
		     const char *suffix)
{
	snprintf(buf, len, "http://127.0.0.1:%d%s", srv->port, suffix);
}

static void test_url(void)
{
	char url[64];

	CHECK(ot_agent_job_url("http://10.31.0.1:9101", 123, "start", url,
			       sizeof(url)) == 0);
	CHECK_STR(url, "http://10.31.0.1:9101/v1/jobs/123/start");
	CHECK(ot_agent_job_url("http://10.31.0.1:9101//", 4294967295u, "end",
			       url, sizeof(url)) == 0);
	CHECK_STR(url, "http://10.31.0.1:9101/v1/jobs/4294967295/end");
	CHECK(ot_agent_job_url("http://a-very-long-host-name.example.org:9101",
			       1, "start", url, 20) == -1);
}

static void test_ok(void)
{
	const char *body = "{\"job\":\"123\",\"host\":\"pc1\",\"mode\":\"desktop\"}\n";
	struct server srv = serve_once("POST /v1/jobs/123/start HTTP/1.1", 200,
				       body, strlen(body), 0, 0);
	struct ot_http_response resp;
	struct ot_job_start st;
	char base[64], url[128], err[512] = "";

	CHECK(srv.pid > 0);
	/* A trailing slash in agent= must not change the path. */
	base_url(&srv, base, sizeof(base), "/");
	CHECK(ot_agent_job_url(base, 123, "start", url, sizeof(url)) == 0);
	CHECK(ot_agent_post(url, 2000, &resp, err, sizeof(err)) == 0);
	CHECK_STR(err, "");
	CHECK(resp.status == 200);
	CHECK(resp.len == strlen(body));
	CHECK(ot_parse_start(resp.body, resp.len, &st, err, sizeof(err)) == 0);
	CHECK_STR(st.host, "pc1");
	ot_http_response_free(&resp);
	reap(srv);
}

static void test_http_error(void)
{
	const char *body = "{\"error\":\"no start recorded for job 9 on this agent\"}\n";
	struct server srv = serve_once("POST /v1/jobs/9/end ", 409, body,
				       strlen(body), 0, 0);
	struct ot_http_response resp;
	char base[64], url[128], err[512] = "";

	base_url(&srv, base, sizeof(base), "");
	ot_agent_job_url(base, 9, "end", url, sizeof(url));
	CHECK(ot_agent_post(url, 2000, &resp, err, sizeof(err)) == -1);
	CHECK(resp.status == 409);
	CHECK_STR(err, "HTTP 409: no start recorded for job 9 on this agent");
	ot_http_response_free(&resp);
	reap(srv);

	/* Something else answering: its text, sanitized and shortened. */
	body = "<html>\n<h1>Bad Gateway</h1></html>";
	srv = serve_once("POST /v1/jobs/9/end ", 502, body, strlen(body), 0, 0);
	base_url(&srv, base, sizeof(base), "");
	ot_agent_job_url(base, 9, "end", url, sizeof(url));
	CHECK(ot_agent_post(url, 2000, &resp, err, sizeof(err)) == -1);
	CHECK_STR(err, "HTTP 502: <html>?<h1>Bad Gateway</h1></html>");
	ot_http_response_free(&resp);
	reap(srv);
}

static void test_oversized(void)
{
	struct server srv = serve_once("POST /v1/jobs/1/end ", 200, NULL,
				       OT_RESPONSE_MAX + 1000, ' ', 0);
	struct ot_http_response resp;
	char base[64], url[128], err[512] = "";

	base_url(&srv, base, sizeof(base), "");
	ot_agent_job_url(base, 1, "end", url, sizeof(url));
	CHECK(ot_agent_post(url, 2000, &resp, err, sizeof(err)) == -1);
	CHECK_CONTAINS(err, "response larger than 65536 bytes");
	CHECK(resp.body == NULL);
	ot_http_response_free(&resp);
	reap(srv);

	/* Exactly at the cap is still received whole. */
	srv = serve_once("POST /v1/jobs/1/end ", 200, NULL, OT_RESPONSE_MAX,
			 ' ', 0);
	base_url(&srv, base, sizeof(base), "");
	ot_agent_job_url(base, 1, "end", url, sizeof(url));
	CHECK(ot_agent_post(url, 2000, &resp, err, sizeof(err)) == 0);
	CHECK(resp.len == OT_RESPONSE_MAX);
	ot_http_response_free(&resp);
	reap(srv);
}

static void test_timeout(void)
{
	const char *body = "{}";
	struct server srv = serve_once("POST /v1/jobs/2/start ", 200, body,
				       strlen(body), 0, 3000);
	struct ot_http_response resp;
	char base[64], url[128], err[512] = "";

	base_url(&srv, base, sizeof(base), "");
	ot_agent_job_url(base, 2, "start", url, sizeof(url));
	CHECK(ot_agent_post(url, 200, &resp, err, sizeof(err)) == -1);
	CHECK_STR(err, "no answer within 200 ms");
	ot_http_response_free(&resp);
	reap(srv);
}

static void test_unreachable(void)
{
	struct sockaddr_in addr = { .sin_family = AF_INET };
	socklen_t alen = sizeof(addr);
	struct ot_http_response resp;
	char url[128], err[512] = "";
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	/* A port that was just free: nothing listens there. */
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(bind(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0);
	CHECK(getsockname(fd, (struct sockaddr *)&addr, &alen) == 0);
	close(fd);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/jobs/3/start",
		 ntohs(addr.sin_port));
	CHECK(ot_agent_post(url, 2000, &resp, err, sizeof(err)) == -1);
	CHECK(resp.status == 0);
	CHECK(err[0] != '\0');
	fprintf(stderr, "  unreachable: %s\n", err);
	ot_http_response_free(&resp);
}

static void test_no_proxy(void)
{
	const char *body = "{\"job\":\"4\"}";
	struct server srv = serve_once("POST /v1/jobs/4/start ", 200, body,
				       strlen(body), 0, 0);
	struct ot_http_response resp;
	char base[64], url[128], err[512] = "";

	/* A proxy that does not exist: using it would fail the call. */
	setenv("http_proxy", "http://127.0.0.1:1", 1);
	setenv("HTTP_PROXY", "http://127.0.0.1:1", 1);
	base_url(&srv, base, sizeof(base), "");
	ot_agent_job_url(base, 4, "start", url, sizeof(url));
	CHECK(ot_agent_post(url, 2000, &resp, err, sizeof(err)) == 0);
	CHECK_STR(err, "");
	ot_http_response_free(&resp);
	unsetenv("http_proxy");
	unsetenv("HTTP_PROXY");
	reap(srv);
}

int main(void)
{
	test_url();
	test_ok();
	test_http_error();
	test_oversized();
	test_timeout();
	test_unreachable();
	test_no_proxy();
	if (test_failures) {
		fprintf(stderr, "test_agent: %d failure(s)\n", test_failures);
		return 1;
	}
	printf("test_agent: ok\n");
	return 0;
}
