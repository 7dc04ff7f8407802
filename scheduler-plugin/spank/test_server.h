/*
 * One-shot HTTP server for the tests: forks a child on 127.0.0.1 (ephemeral
 * port) that answers a single request.
 */
#ifndef OVERTIME_TEST_SERVER_H
#define OVERTIME_TEST_SERVER_H

#include <stddef.h>
#include <sys/types.h>

struct server {
	pid_t pid; /* -1 if the server could not be started */
	int port;
};

/*
 * Answer one request with status and body (body_len bytes; when body is
 * NULL, body_len repeats of fill).  If the request line does not start with
 * want_line, or the request is not an empty-bodied POST, answer 400 with an
 * agent-style {"error":...} instead.  Wait delay_ms before answering.
 */
struct server serve_once(const char *want_line, int status, const char *body,
			 size_t body_len, char fill, int delay_ms);

/* Stop and reap the server. */
void reap(struct server srv);

#endif
