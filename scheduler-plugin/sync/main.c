/* overtime-slurm-sync: keeps Slurm's view of Overtime pool PCs (features,
 * weight, drain/down, and the jobs on them) in line with the node agent
 * states the site manager computes, via its long-poll feed. */
#include "feed.h"
#include "log.h"
#include "slurm_apply.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>

#define BACKOFF_MAX_S 30
#define PASSWORD_MAX 4096

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

struct opts {
	const char *server, *user, *password_file;
	int wait_s, resync_s;
	bool once;
};

static void usage(FILE *f)
{
	fputs(
"Usage: overtime-slurm-sync --server URL --user NAME --password-file PATH\n"
"                           [--wait SECONDS] [--resync SECONDS] [--once] [--debug]\n"
"\n"
"Maps each Overtime host's node agent state, as computed by the site manager,\n"
"onto Slurm: node features and weight; drain while the guest is frozen and\n"
"suspend its jobs; down when evicted or gone and requeue its jobs; resume both\n"
"when the host is up again. Only drains, downs and suspensions whose reason or\n"
"comment starts with \"overtime:\" are ever undone.\n"
"\n"
"  --server URL          site manager base URL (required)\n"
"  --user NAME           HTTP basic auth user (required)\n"
"  --password-file PATH  first line is the password; must not be readable by\n"
"                        group or other (required)\n"
"  --wait SECONDS        long-poll wait asked of the server (default 25)\n"
"  --resync SECONDS      reconcile at least this often without changes\n"
"                        (default 30)\n"
"  --once                one fetch and one reconcile, then exit 0 (all\n"
"                        applied) or 1\n"
"  --debug               debug log lines\n"
"  --help                this text\n"
"\n"
"Slurm's configuration is found as for any Slurm client (SLURM_CONF or the\n"
"default path). Logs are logfmt lines on stderr.\n", f);
}

static int parse_seconds(const char *flag, const char *s, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	/* At least 1 s: a zero wait would turn the long poll into a busy
	 * loop against the site manager. */
	if (errno || end == s || *end || v < 1 || v > 3600) {
		fprintf(stderr, "overtime-slurm-sync: %s wants whole seconds "
			"between 1 and 3600, not \"%s\"\n", flag, s);
		return -1;
	}
	*out = (int)v;
	return 0;
}

/* Returns 0 (run), 1 (exit 0: --help) or -1 (exit 2: usage error). */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	enum { O_SERVER = 256, O_USER, O_PWFILE, O_WAIT, O_RESYNC, O_ONCE,
	       O_DEBUG, O_HELP };
	static const struct option longopts[] = {
		{ "server", required_argument, NULL, O_SERVER },
		{ "user", required_argument, NULL, O_USER },
		{ "password-file", required_argument, NULL, O_PWFILE },
		{ "wait", required_argument, NULL, O_WAIT },
		{ "resync", required_argument, NULL, O_RESYNC },
		{ "once", no_argument, NULL, O_ONCE },
		{ "debug", no_argument, NULL, O_DEBUG },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct opts){ .wait_s = 25, .resync_s = 30 };
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case O_SERVER: o->server = optarg; break;
		case O_USER:   o->user = optarg; break;
		case O_PWFILE: o->password_file = optarg; break;
		case O_WAIT:
			if (parse_seconds("--wait", optarg, &o->wait_s))
				return -1;
			break;
		case O_RESYNC:
			if (parse_seconds("--resync", optarg, &o->resync_s))
				return -1;
			break;
		case O_ONCE:   o->once = true; break;
		case O_DEBUG:  log_debug_enabled = true; break;
		case O_HELP:   usage(stdout); return 1;
		default:       usage(stderr); return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "overtime-slurm-sync: unexpected argument "
			"\"%s\"\n", argv[optind]);
		return -1;
	}
	if (!o->server || !o->user || !o->password_file) {
		fputs("overtime-slurm-sync: --server, --user and "
		      "--password-file are required (see --help)\n", stderr);
		return -1;
	}
	return 0;
}

/* First line of the file, trailing newline (and CR) stripped. The mode is
 * checked on the opened descriptor, so the file cannot be swapped between
 * the check and the read. */
static char *read_password(const char *path)
{
	char buf[PASSWORD_MAX + 1], mode[8];
	struct stat st;
	ssize_t n;
	size_t len = 0;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		log_error("cannot open password file", "path", path, "error",
			  strerror(errno), NULL);
		return NULL;
	}
	if (fstat(fd, &st) < 0) {
		log_error("cannot stat password file", "path", path, "error",
			  strerror(errno), NULL);
		close(fd);
		return NULL;
	}
	if (st.st_mode & (S_IRGRP | S_IROTH)) {
		snprintf(mode, sizeof(mode), "%04o",
			 (unsigned)(st.st_mode & 07777));
		log_error("refusing to start: password file is readable by "
			  "group or other; chmod 600 it", "path", path,
			  "mode", mode, NULL);
		close(fd);
		return NULL;
	}
	while (len < PASSWORD_MAX) {
		n = read(fd, buf + len, PASSWORD_MAX - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			log_error("cannot read password file", "path", path,
				  "error", strerror(errno), NULL);
			close(fd);
			return NULL;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	len = strlen(buf);
	if (len && buf[len - 1] == '\r')
		buf[--len] = '\0';
	if (!len) {
		log_error("refusing to start: password file's first line is "
			  "empty", "path", path, NULL);
		return NULL;
	}
	char *pw = strdup(buf);
	explicit_bzero(buf, sizeof(buf));
	return pw;
}

/* Sleeps in short slices so a signal ends the wait promptly without relying
 * on it landing inside the sleep call. */
static void sleep_s(int seconds)
{
	struct timespec slice = { 0, 200 * 1000 * 1000 };

	for (int i = 0; i < seconds * 5 && !stop; i++)
		nanosleep(&slice, NULL);
}

static int run(const struct opts *o, struct feed_client *fc)
{
	/* Each answer triggers a reconcile, and the server answers within
	 * its wait even with no change, so capping the wait at --resync is
	 * what makes "reconcile at least every --resync seconds" hold. */
	int wait_s = o->wait_s < o->resync_s ? o->wait_s : o->resync_s;
	int backoff = 1;
	int64_t since = 0;
	char a[21], b[21], c[21];

	while (!stop) {
		struct feed feed;
		int rc;

		if (feed_fetch(fc, since, wait_s, &feed)) {
			if (stop)
				break;
			if (o->once)
				return 1;
			/* No reconcile against the last feed meanwhile: it
			 * may be arbitrarily stale, and the level-triggered
			 * reconcile catches up on the first good answer. */
			log_info("feed retry", "in_s", log_i64(a, backoff),
				 NULL);
			sleep_s(backoff);
			backoff = backoff * 2 > BACKOFF_MAX_S ? BACKOFF_MAX_S :
				backoff * 2;
			continue;
		}
		backoff = 1;
		log_info("feed", "revision", log_i64(a, feed.revision),
			 "nodes", log_u64(b, feed.nnodes),
			 "reports", log_u64(c, feed.nreports), NULL);
		since = feed.revision;
		rc = apply_cycle(&feed);
		feed_free(&feed);
		if (o->once)
			return rc == 0 ? 0 : 1;
	}
	log_info("stopping on signal", NULL);
	/* An interrupted --once did not do its one reconcile. */
	return o->once ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	struct feed_client *fc;
	struct opts o;
	char *password;
	char w[21], r[21];
	int rc;

	rc = parse_opts(argc, argv, &o);
	if (rc)
		return rc > 0 ? 0 : 2;

	/* No SA_RESTART: blocking calls return early so the loop sees the
	 * flag; the curl progress callback covers transfers in flight. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	password = read_password(o.password_file);
	if (!password)
		return 1;
	if (!strncmp(o.server, "http://", 7))
		log_warn("basic auth over plain http: the password crosses "
			 "the network readable", "server", o.server, NULL);
	fc = feed_client_new(o.server, o.user, password, &stop);
	/* curl keeps its own copy of the password. */
	explicit_bzero(password, strlen(password));
	free(password);
	if (!fc) {
		log_error("cannot set up the HTTP client", NULL);
		return 1;
	}

	slurm_init(NULL);
	log_info("starting", "server", o.server, "user", o.user,
		 "wait_s", log_i64(w, o.wait_s),
		 "resync_s", log_i64(r, o.resync_s),
		 "once", o.once ? "true" : NULL, NULL);
	rc = run(&o, fc);
	feed_client_free(fc);
	slurm_fini();
	return rc;
}
