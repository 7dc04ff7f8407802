/* overtime-slurm-sync: keeps Slurm's view of Overtime pool PCs (features,
 * weight, drain/down, and the jobs on them) in line with the node agent
 * states the site manager computes, via its long-poll feed. */
#include "feed.h"
#include "log.h"
#include "resv.h"
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
	const char *ca_file;  /* NULL: the system's roots */
	bool insecure_http;
	enum feed_server_kind server_kind;
	int wait_s, resync_s;
	bool once;
	int horizon_h;        /* reservation horizon; 0: no reservations */
	int warn_lead_s;
	int warn_signal;
	const char *warn_signame;
	bool declare_nodes;
	bool no_batch;
	enum { RESERVE_LOCAL_AUTO, RESERVE_LOCAL_YES, RESERVE_LOCAL_NO } reserve_local;
};

static void usage(FILE *f)
{
	fputs(
"Usage: overtime-slurm-sync --server URL --user NAME --password-file PATH\n"
"                           [--ca-file PATH] [--insecure-http]\n"
"                           [--wait SECONDS] [--resync SECONDS] [--once] [--debug]\n"
"                           [--horizon HOURS] [--warn-signal SIG] [--warn-lead SECONDS]\n"
"                           [--declare-nodes] [--no-batch]\n"
"\n"
"Maps each Overtime host's node agent state, as computed by the site manager,\n"
"onto Slurm: node features and weight; drain while the guest is frozen and\n"
"suspend its jobs; down when evicted or gone and requeue its jobs; resume both\n"
"when the host is up again. Only drains, downs and suspensions whose reason or\n"
"comment starts with \"overtime:\" are ever undone.\n"
"\n"
"  --server URL          site manager base URL (required): https, or http\n"
"                        to this machine only (127.0.0.0/8, ::1, localhost)\n"
"  --user NAME           HTTP basic auth user (required)\n"
"  --password-file PATH  first line is the password; must not be readable by\n"
"                        group or other (required)\n"
"  --ca-file PATH        PEM bundle of the site's CA: the server's\n"
"                        certificate must chain to it (instead of the\n"
"                        system's roots); default $OVERTIME_CA_FILE\n"
"  --insecure-http       labs only: allow plain http to another host, the\n"
"                        password crossing the network in clear\n"
"  --wait SECONDS        long-poll wait asked of the server (default 25)\n"
"  --resync SECONDS      reconcile every node at least this often (default\n"
"                        30); in between, a change reconciles only the nodes\n"
"                        it touched (the feed's deltas)\n"
"  --horizon HOURS       keep a maintenance reservation (overtime-NODE-START,\n"
"                        flags MAINT,IGNORE_JOBS) for every window within\n"
"                        this many hours in which the schedule stops a\n"
"                        node's guest (default 168; 0: no reservations,\n"
"                        no warnings)\n"
"  --warn-signal SIG     signal for jobs a window will hit anyway, sent to\n"
"                        the batch shell and every step (default USR1)\n"
"  --warn-lead SECONDS   how long before the window (default 300); the job\n"
"                        is requeued when the window starts\n"
"  --reserve-local-disk auto|yes|no\n"
"                        reserve windows in which the schedule gives a node\n"
"                        to its local disk; auto (default): not when\n"
"                        slurmctld has a SuspendProgram, since power saving\n"
"                        fills those slots on demand and a reservation would\n"
"                        keep Slurm from ever waking the PC\n"
"  --declare-nodes       declare hosts Slurm has never seen as powered-down\n"
"                        dynamic nodes (State=CLOUD) with the CPUs, memory\n"
"                        and GPUs their agent reported (power saving)\n"
"  --no-batch            one slurm_update_node per node; by default nodes\n"
"                        whose update is identical share one call with a\n"
"                        hostlist (nodes of a failed call are retried one\n"
"                        by one)\n"
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

static const struct { const char *name; int sig; } warn_signals[] = {
	{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "TERM", SIGTERM },
	{ "INT", SIGINT }, { "HUP", SIGHUP }, { "URG", SIGURG },
	{ "CONT", SIGCONT }, { "XCPU", SIGXCPU }, { "WINCH", SIGWINCH },
};

static int parse_signal(const char *s, struct opts *o)
{
	if (!strncmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < sizeof(warn_signals) / sizeof(warn_signals[0]);
	     i++)
		if (!strcmp(s, warn_signals[i].name)) {
			o->warn_signal = warn_signals[i].sig;
			o->warn_signame = warn_signals[i].name;
			return 0;
		}
	fprintf(stderr, "overtime-slurm-sync: --warn-signal: \"%s\" is not "
		"one of USR1 USR2 TERM INT HUP URG CONT XCPU WINCH\n", s);
	return -1;
}

static int parse_int(const char *flag, const char *s, long lo, long hi,
		     int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		fprintf(stderr, "overtime-slurm-sync: %s wants a whole number "
			"between %ld and %ld, not \"%s\"\n", flag, lo, hi, s);
		return -1;
	}
	*out = (int)v;
	return 0;
}

/* Returns 0 (run), 1 (exit 0: --help) or -1 (exit 2: usage error). */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	enum { O_SERVER = 256, O_USER, O_PWFILE, O_WAIT, O_RESYNC, O_ONCE,
	       O_DEBUG, O_HELP, O_HORIZON, O_WSIG, O_WLEAD, O_DECLARE,
	       O_RLOCAL, O_NOBATCH, O_CAFILE, O_INSECURE };
	static const struct option longopts[] = {
		{ "server", required_argument, NULL, O_SERVER },
		{ "user", required_argument, NULL, O_USER },
		{ "password-file", required_argument, NULL, O_PWFILE },
		{ "ca-file", required_argument, NULL, O_CAFILE },
		{ "insecure-http", no_argument, NULL, O_INSECURE },
		{ "wait", required_argument, NULL, O_WAIT },
		{ "resync", required_argument, NULL, O_RESYNC },
		{ "once", no_argument, NULL, O_ONCE },
		{ "debug", no_argument, NULL, O_DEBUG },
		{ "help", no_argument, NULL, O_HELP },
		{ "horizon", required_argument, NULL, O_HORIZON },
		{ "warn-signal", required_argument, NULL, O_WSIG },
		{ "warn-lead", required_argument, NULL, O_WLEAD },
		{ "declare-nodes", no_argument, NULL, O_DECLARE },
		{ "no-batch", no_argument, NULL, O_NOBATCH },
		{ "reserve-local-disk", required_argument, NULL, O_RLOCAL },
		{ NULL, 0, NULL, 0 },
	};
	char err[512];
	int c;

	*o = (struct opts){ .wait_s = 25, .resync_s = 30, .horizon_h = 168,
			    .warn_lead_s = 300, .warn_signal = SIGUSR1,
			    .warn_signame = "USR1" };
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case O_SERVER: o->server = optarg; break;
		case O_USER:   o->user = optarg; break;
		case O_PWFILE: o->password_file = optarg; break;
		case O_CAFILE: o->ca_file = optarg; break;
		case O_INSECURE: o->insecure_http = true; break;
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
		case O_HORIZON:
			/* At most the site manager's own bound (31 days). */
			if (parse_int("--horizon", optarg, 0, 744,
				      &o->horizon_h))
				return -1;
			break;
		case O_WSIG:
			if (parse_signal(optarg, o))
				return -1;
			break;
		case O_WLEAD:
			if (parse_int("--warn-lead", optarg, 0, 86400,
				      &o->warn_lead_s))
				return -1;
			break;
		case O_DECLARE: o->declare_nodes = true; break;
		case O_NOBATCH: o->no_batch = true; break;
		case O_RLOCAL:
			if (!strcmp(optarg, "auto"))
				o->reserve_local = RESERVE_LOCAL_AUTO;
			else if (!strcmp(optarg, "yes"))
				o->reserve_local = RESERVE_LOCAL_YES;
			else if (!strcmp(optarg, "no"))
				o->reserve_local = RESERVE_LOCAL_NO;
			else {
				fprintf(stderr, "overtime-slurm-sync: "
					"--reserve-local-disk: auto, yes or no\n");
				return -1;
			}
			break;
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
	/* The unit's environment file can name the CA without touching the
	 * command line; the flag wins. Empty: not set. */
	if (!o->ca_file) {
		const char *env = getenv("OVERTIME_CA_FILE");

		if (env && *env)
			o->ca_file = env;
	}
	if (o->ca_file && !*o->ca_file) {
		fputs("overtime-slurm-sync: --ca-file is empty\n", stderr);
		return -1;
	}
	o->server_kind = feed_server_check(o->server, o->insecure_http, err,
					   sizeof(err));
	if (o->server_kind == FEED_SERVER_REFUSED) {
		fprintf(stderr, "overtime-slurm-sync: %s\n", err);
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

/* The windows are fetched at most once per --resync (they change with the
 * schedule and the clock, not with heartbeats) and trusted for three resyncs:
 * acting on an older list could requeue a job for a lecture since cancelled. */
struct win_state {
	struct windows ws;
	bool have;
	time_t fetched;
};

static void refresh_windows(const struct opts *o, struct feed_client *fc,
			    struct win_state *w)
{
	time_t now = time(NULL);
	struct windows fresh;
	char n[21];

	if (!o->horizon_h)
		return;
	if (w->have && now - w->fetched < o->resync_s)
		return;
	if (feed_fetch_windows(fc, (int64_t)o->horizon_h * 3600, &fresh)) {
		if (w->have && now - w->fetched > 3 * o->resync_s) {
			log_warn("reservation windows too old; reservations "
				 "and warnings paused until the site manager "
				 "answers", NULL);
			windows_free(&w->ws);
			w->have = false;
		}
		return;
	}
	if (o->reserve_local == RESERVE_LOCAL_NO) {
		size_t k = 0;

		for (size_t i = 0; i < fresh.n; i++) {
			if (fresh.w[i].power_save)
				window_free(&fresh.w[i]);
			else
				fresh.w[k++] = fresh.w[i];
		}
		fresh.n = k;
	}
	if (w->have)
		windows_free(&w->ws);
	w->ws = fresh;
	w->have = true;
	w->fetched = now;
	log_debug("reservation windows", "windows", log_u64(n, fresh.n), NULL);
}

/* The controller's Slurm version the daemon reports with its long polls:
 * slurmctld's own (its configuration), asked at most once per --resync, so
 * that an upgraded controller reaches the site manager, and from it the
 * node agents, within a resync. Not the daemon's own libslurm version
 * (SLURM_VERSION_STRING): Slurm's protocol window lets an older libslurm
 * talk to a newer slurmctld, so it may understate the controller. Until
 * slurmctld answers nothing is reported (the agents then start guests
 * unchecked). */
struct ctld_version {
	char v[FEED_VERSION_MAX];
	time_t asked;
	bool warned;
};

static void refresh_ctld_version(const struct opts *o, struct ctld_version *c)
{
	char buf[FEED_VERSION_MAX];
	time_t now = time(NULL);
	char *v;

	if (c->asked && now - c->asked < o->resync_s)
		return;
	c->asked = now;
	v = slurm_controller_version();
	if (!v)
		return; /* keep the last one known */
	if (feed_slurm_version(v, buf, sizeof(buf))) {
		if (!c->warned)
			log_warn("slurmctld's version is not one the site "
				 "manager takes; not reporting it", "version",
				 v, NULL);
		c->warned = true;
	} else if (strcmp(buf, c->v)) {
		log_info("slurmctld version", "version", buf, "was",
			 c->v[0] ? c->v : NULL, NULL);
		memcpy(c->v, buf, sizeof(buf));
	}
	free(v);
}

static int run(const struct opts *o, struct feed_client *fc)
{
	struct ctld_version ctld = { 0 };
	struct win_state win = { 0 };
	struct apply_opts ao = {
		.warn_lead_s = o->warn_lead_s, .warn_signal = o->warn_signal,
		.warn_signame = o->warn_signame,
		.declare_nodes = o->declare_nodes,
		.batch = !o->no_batch,
	};
	/* Each answer triggers a reconcile, and the server answers within
	 * its wait even with no change, so capping the wait at --resync is
	 * what makes "reconcile at least every --resync seconds" hold. */
	int wait_s = o->wait_s < o->resync_s ? o->wait_s : o->resync_s;
	int backoff = 1;
	int64_t since = 0;
	/* The feed build the last reconcile applied, and when the last whole
	 * reconcile ran: between whole ones, the daemon asks for deltas. */
	int64_t build = 0;
	time_t last_whole = 0;
	char a[21], b[21], c[21];

	while (!stop) {
		struct feed feed;
		int rc, w = wait_s;
		int64_t base = 0;

		/* A warning or requeue due before the long poll would end:
		 * ask for a shorter wait so it happens on time. */
		if (win.have) {
			time_t d = next_deadline(&win.ws, time(NULL),
						 o->warn_lead_s);
			time_t left = d ? d - time(NULL) : 0;

			if (d && left < w)
				w = left < 1 ? 1 : (int)left;
		}
		/* Deltas (only the nodes changed since the build held, one
		 * node RPC each) while the last whole reconcile is younger
		 * than --resync; then a whole one at once, which catches what
		 * deltas leave out: nodes the site dropped, changes made in
		 * Slurm behind the daemon's back, the reservations. */
		if (build) {
			time_t left = o->resync_s - (time(NULL) - last_whole);

			if (left > 0) {
				base = build;
				if (left < w)
					w = (int)left;
			} else {
				w = 0;
			}
		}
		refresh_ctld_version(o, &ctld);
		if (feed_fetch(fc, since, base, w, ctld.v, &feed)) {
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
			 "reports", log_u64(c, feed.nreports),
			 "delta", feed.delta ? "true" : NULL, NULL);
		since = feed.revision;
		refresh_windows(o, fc, &win);
		ao.windows = win.have ? &win.ws : NULL;
		rc = apply_cycle(&feed, &ao);
		if (!feed.delta)
			last_whole = time(NULL);
		/* A failed call may have left a change unapplied that no later
		 * delta repeats: the next reconcile is a whole one. */
		build = rc ? 0 : feed.build;
		feed_free(&feed);
		if (o->once) {
			if (win.have)
				windows_free(&win.ws);
			return rc == 0 ? 0 : 1;
		}
	}
	if (win.have)
		windows_free(&win.ws);
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
	char w[21], r[21], h[21], l[21];
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

	if (o.ca_file) {
		char err[512];

		if (feed_ca_file_check(o.ca_file, err, sizeof(err))) {
			log_error("refusing to start: no usable CA file",
				  "error", err, NULL);
			return 1;
		}
		if (o.server_kind != FEED_SERVER_HTTPS)
			log_warn("--ca-file is not used: the server is plain "
				 "http", "server", o.server, NULL);
	}
	password = read_password(o.password_file);
	if (!password)
		return 1;
	if (o.server_kind == FEED_SERVER_HTTP_INSECURE)
		log_warn("basic auth over plain http (--insecure-http): the "
			 "password crosses the network readable", "server",
			 o.server, NULL);
	fc = feed_client_new(o.server, o.user, password, o.ca_file, &stop);
	/* curl keeps its own copy of the password. */
	explicit_bzero(password, strlen(password));
	free(password);
	if (!fc) {
		log_error("cannot set up the HTTP client", NULL);
		return 1;
	}

	slurm_init(NULL);
	if (o.reserve_local == RESERVE_LOCAL_AUTO)
		o.reserve_local = slurm_power_saving() ? RESERVE_LOCAL_NO :
							  RESERVE_LOCAL_YES;
	log_info("starting", "server", o.server, "user", o.user,
		 "ca_file", o.ca_file,
		 "wait_s", log_i64(w, o.wait_s),
		 "resync_s", log_i64(r, o.resync_s),
		 "horizon_h", log_i64(h, o.horizon_h),
		 "warn", o.warn_signame, "warn_lead_s", log_i64(l, o.warn_lead_s),
		 "declare_nodes", o.declare_nodes ? "true" : NULL,
		 "batch", o.no_batch ? "false" : "true",
		 "reserve_local_disk",
		 o.reserve_local == RESERVE_LOCAL_YES ? "yes" : "no",
		 "once", o.once ? "true" : NULL, NULL);
	rc = run(&o, fc);
	feed_client_free(fc);
	slurm_fini();
	return rc;
}
