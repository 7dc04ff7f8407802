/* One-shot HTTP server for the tests (see test_server.h). */
#define _GNU_SOURCE

#include "test_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* Read the request head; return the request line or "" (in buf). */
static void read_request(int fd, char *buf, size_t buflen)
{
	size_t len = 0;
	ssize_t n;

	buf[0] = '\0';
	while (len + 1 < buflen) {
		n = read(fd, buf + len, buflen - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		if (strstr(buf, "\r\n\r\n"))
			break;
	}
}

struct server serve_once(const char *want_line, int status,
				const char *body, size_t body_len, char fill,
				int delay_ms)
{
	struct sockaddr_in addr = { .sin_family = AF_INET };
	socklen_t alen = sizeof(addr);
	struct server srv = { -1, 0 };
	int one = 1;
	int lfd = socket(AF_INET, SOCK_STREAM, 0);

	if (lfd < 0)
		return srv;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&addr, &alen) < 0) {
		close(lfd);
		return srv;
	}
	srv.port = ntohs(addr.sin_port);
	srv.pid = fork();
	if (srv.pid != 0) {
		close(lfd);
		return srv;
	}

	/* Child: the client may hang up mid-body (size cap, timeout). */
	signal(SIGPIPE, SIG_IGN);
	alarm(10);
	int fd = accept(lfd, NULL, NULL);
	char req[4096];
	char head[256];

	if (fd < 0)
		_exit(1);
	read_request(fd, req, sizeof(req));
	if (strncmp(req, want_line, strlen(want_line)) != 0 ||
	    !strstr(req, "\r\nContent-Length: 0\r\n")) {
		fprintf(stderr, "  server: unexpected request:\n%s\n", req);
		status = 400;
		body = "{\"error\":\"unexpected request\"}";
		body_len = strlen(body);
	}
	if (delay_ms)
		usleep((useconds_t)delay_ms * 1000);
	snprintf(head, sizeof(head),
		 "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
		 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
		 status, body_len);
	if (write(fd, head, strlen(head)) < 0)
		_exit(0);
	if (body) {
		if (write(fd, body, body_len) < 0)
			_exit(0);
	} else {
		char chunk[4096];

		memset(chunk, fill, sizeof(chunk));
		for (size_t sent = 0; sent < body_len;) {
			size_t n = body_len - sent < sizeof(chunk) ?
					   body_len - sent : sizeof(chunk);
			ssize_t w = write(fd, chunk, n);

			if (w <= 0)
				break;
			sent += (size_t)w;
		}
	}
	close(fd);
	_exit(0);
}

void reap(struct server srv)
{
	int status;

	if (srv.pid > 0) {
		kill(srv.pid, SIGTERM);
		waitpid(srv.pid, &status, 0);
	}
}

