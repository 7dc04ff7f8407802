/* The site manager's long-poll feed: what each host's node agent state says
 * the Slurm node should look like. HTTP transport plus JSON parsing. */
#ifndef OT_FEED_H
#define OT_FEED_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Larger bodies are refused as a broken or hostile server's. The feed lists
 * every host of the site at about 220 bytes each (2.2 MB at 10,000 hosts,
 * docs/benchmarks/agentscale.md): 64 MiB is about 290,000 hosts, above the
 * 100,000 a site manager is benchmarked at (4 MiB stopped at 18,000). */
#define FEED_MAX_BYTES (64u * 1024 * 1024)

/* The node agent state as computed by the site manager. */
enum ot_state {
	OT_UNKNOWN = 0, /* a state this daemon does not know: leave the node's
			 * state alone rather than guess */
	OT_UP,
	OT_FROZEN,
	OT_EVICTED,
	OT_DOWN,
};

struct feed_node {
	char *name;
	enum ot_state state;
	char *state_str;   /* as sent, for logs */
	char *features;    /* NULL: field absent, leave Slurm's as is */
	bool has_weight;
	uint32_t weight;
	/* Always starts with "overtime:" (normalised at parse time), because
	 * that prefix is how the reconcile later recognises its own drains and
	 * downs and tells them from an administrator's. */
	char *reason;
	char *comment;     /* informational only; not pushed to Slurm */
	/* The guest's size from the agent's heartbeat; 0: not reported. Used
	 * only to declare nodes Slurm has never seen (--declare-nodes). */
	int cpus, memory_mb, gpus;
};

struct feed_report {
	uint32_t job_id;
	char *host;
	char *summary;
};

struct feed {
	int64_t revision;
	/* The server's build of the node list (0: a server that has none). A
	 * delta lists only the nodes changed since the build asked for as base;
	 * the others are as that build had them. */
	int64_t build;
	bool delta;
	struct feed_node *nodes;
	size_t nnodes;
	struct feed_report *reports;
	size_t nreports;
};

/* Parse a feed body. Returns 0 and fills *out (free with feed_free), or -1
 * with a reason in err. Any node without a usable name or state makes the
 * whole feed invalid: acting on a partial list would down the hosts that
 * happened to be missing from it. */
int feed_parse(const char *buf, size_t len, struct feed *out,
	       char *err, size_t errlen);
void feed_free(struct feed *f);

/* Binary search: feed_parse sorts the nodes by name. */
const struct feed_node *feed_find_node(const struct feed *f, const char *name);

struct feed_client;

/* What feed_server_check makes of --server. */
enum feed_server_kind {
	FEED_SERVER_REFUSED = -1, /* not a URL, not http(s), or plain http to
				   * another host without insecure_http */
	FEED_SERVER_HTTPS = 0,
	FEED_SERVER_HTTP_LOOPBACK,  /* http to this machine: 127.0.0.0/8, ::1,
				     * localhost */
	FEED_SERVER_HTTP_INSECURE,  /* http to another host, allowed by
				     * insecure_http (--insecure-http): the
				     * password crosses the network in clear */
};

/* Whether the daemon may send its basic auth password to server: https to
 * any host, plain http only to a loopback address or name (the daemon beside
 * the site manager) unless insecure_http. The URL is parsed with curl's URL
 * API, the host compared with inet_pton. On FEED_SERVER_REFUSED, why is in
 * err. */
enum feed_server_kind feed_server_check(const char *server, bool insecure_http,
					char *err, size_t errlen);

/* 0 when path can be read and holds at least one PEM certificate, else -1
 * with why in err: a wrong --ca-file is refused at start-up rather than
 * failing every request. */
int feed_ca_file_check(const char *path, char *err, size_t errlen);

/* stop is polled during transfers so SIGTERM aborts a long poll at once.
 * ca_file (NULL: the system's roots) is the PEM bundle of the CA(s) trusted
 * for the server's certificate, instead of the system's roots; the peer and
 * its host name are verified either way. */
struct feed_client *feed_client_new(const char *server, const char *user,
				    const char *password, const char *ca_file,
				    volatile sig_atomic_t *stop);
void feed_client_free(struct feed_client *c);

/* The longest Slurm version the site manager accepts (4 numbers of 4 digits
 * and 3 dots), with its NUL. */
#define FEED_VERSION_MAX 20

/* The Slurm version in v as the site manager accepts it (vocab/slurmcompat):
 * the leading digits and dots, cut before anything else (a pre-release
 * suffix: 23.11.0-0rc1 -> 23.11.0), 2 to 4 numbers of 1 to 4 digits. Returns
 * 0 with it in out (outlen >= FEED_VERSION_MAX), or -1 (out empty) when v
 * has none: then the daemon sends no version rather than one the site
 * manager would refuse with its whole feed. */
int feed_slurm_version(const char *v, char *out, size_t outlen);

/* The long poll's URL (caller frees): base > 0 asks for the nodes changed
 * since that build; slurmctld (NULL or "": none) reports the controller's
 * Slurm version (feed_slurm_version's form), which the site manager hands to
 * the node agents. NULL when out of memory. */
char *feed_nodes_url(const char *server, int64_t since, int64_t base,
		     int wait_s, const char *slurmctld);

/* One long-poll request (the URL: feed_nodes_url); base > 0 asks for the
 * nodes changed since that build only (the server may still answer every
 * node: out->delta says). Returns 0 with *out filled, or -1 after logging why
 * (unreachable, non-200, bad JSON). */
int feed_fetch(struct feed_client *c, int64_t since, int64_t base, int wait_s,
	       const char *slurmctld, struct feed *out);

struct windows;

/* GET /api/v1/slurm/reservations?horizon=S. Returns 0 with *out filled (free
 * with windows_free), or -1 after logging why. */
int feed_fetch_windows(struct feed_client *c, int64_t horizon_s,
		       struct windows *out);

#endif
