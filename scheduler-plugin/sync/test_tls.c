/* The HTTP client against real TLS servers on 127.0.0.1 (openssl s_server,
 * started by test_tls.sh with certificates of a throwaway CA): a request
 * succeeds with --ca-file naming the server's CA, and fails with a
 * certificate error without it, with another CA, and when the certificate is
 * the CA's but for another host name.
 *
 * Usage: test_tls GOOD_URL WRONG_NAME_URL CA_FILE OTHER_CA_FILE
 *   GOOD_URL        serves a certificate for IP 127.0.0.1 signed by CA_FILE
 *   WRONG_NAME_URL  serves one signed by CA_FILE for sm.example.org only
 * Both answer GET /api/v1/slurm/reservations?horizon=3600 with one window. */
#include "feed.h"
#include "log.h"
#include "resv.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_check.h"

static volatile sig_atomic_t stop;
static char logs[16384];

/* One GET of the windows through a fresh client; the daemon's log lines of
 * it (stderr) land in logs. Returns feed_fetch_windows's result, or -2 when
 * the client cannot be made. */
static int fetch(const char *url, const char *ca_file, struct windows *w)
{
	struct feed_client *fc;
	FILE *tmp = tmpfile();
	int saved, rc;
	size_t n;

	memset(w, 0, sizeof(*w));
	logs[0] = '\0';
	if (!tmp)
		return -2;
	fflush(stderr);
	saved = dup(2);
	if (saved < 0 || dup2(fileno(tmp), 2) < 0) {
		fclose(tmp);
		return -2;
	}
	fc = feed_client_new(url, "sync", "not-a-secret", ca_file, &stop);
	rc = fc ? feed_fetch_windows(fc, 3600, w) : -2;
	feed_client_free(fc);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	n = fread(logs, 1, sizeof(logs) - 1, tmp);
	logs[n] = '\0';
	fclose(tmp);
	return rc;
}

static void refused(const char *what, const char *url, const char *ca_file,
		    const char *hint)
{
	struct windows w;
	int rc = fetch(url, ca_file, &w);

	CHECK(rc == -1, "%s: got %d, want -1; logs:\n%s", what, rc, logs);
	CHECK(strstr(logs, "site manager unreachable") &&
	      strstr(logs, "certificate") && strstr(logs, hint),
	      "%s: no certificate error naming \"%s\" in:\n%s", what, hint,
	      logs);
	if (!rc)
		windows_free(&w);
}

int main(int argc, char **argv)
{
	const char *good, *wrong, *ca, *other;
	struct windows w;
	char err[512];
	int rc;

	if (argc != 5) {
		fputs("usage: test_tls GOOD_URL WRONG_NAME_URL CA_FILE "
		      "OTHER_CA_FILE\n", stderr);
		return 2;
	}
	good = argv[1];
	wrong = argv[2];
	ca = argv[3];
	other = argv[4];

	CHECK(feed_ca_file_check(ca, err, sizeof(err)) == 0, "CA file: %s",
	      err);

	rc = fetch(good, ca, &w);
	CHECK(rc == 0 && w.n == 1 && !strcmp(w.w[0].node, "pc1"),
	      "with --ca-file: got %d, %zu windows; logs:\n%s", rc, w.n, logs);
	if (!rc)
		windows_free(&w);
	/* The same request over a client made twice: nothing of the first
	 * lingers that the second depends on. */
	rc = fetch(good, ca, &w);
	CHECK(rc == 0, "with --ca-file, again: got %d; logs:\n%s", rc, logs);
	if (!rc)
		windows_free(&w);

	refused("without --ca-file", good, NULL, "give it with --ca-file");
	refused("another CA's --ca-file", good, other, "--ca-file's CA");
	refused("a certificate for another name", wrong, ca, "host name");

	printf("test_tls: %d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
