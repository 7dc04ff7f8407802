#include "feed.h"
#include "log.h"
#include "resv.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <json-c/json.h>

#define REASON_PREFIX "overtime:"

/* ---- parsing ---------------------------------------------------------- */


static enum ot_state parse_state(const char *s)
{
	if (!strcmp(s, "up"))      return OT_UP;
	if (!strcmp(s, "frozen"))  return OT_FROZEN;
	if (!strcmp(s, "evicted")) return OT_EVICTED;
	if (!strcmp(s, "down"))    return OT_DOWN;
	return OT_UNKNOWN;
}

/* Node names go into update_node_msg.node_names, which Slurm reads as a
 * hostlist expression: "a,b" or "pc[1-99]" would update many nodes. Only
 * plain host names are accepted. */
static bool valid_node_name(const char *s)
{
	if (!*s || strlen(s) > 255)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_' &&
		    *s != '.')
			return false;
	return true;
}

/* Optional string field: absent -> *out = NULL, 0. Present but not a string
 * (null included) -> -1: a server sending the wrong type is broken and its
 * other fields are not to be trusted either. */
static int opt_string(struct json_object *o, const char *key, char **out)
{
	struct json_object *v;

	*out = NULL;
	if (!json_object_object_get_ex(o, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return -1;
	*out = strdup(json_object_get_string(v));
	return *out ? 0 : -1;
}

static char *normalise_reason(const char *reason, const char *state)
{
	char *r = NULL;
	int n;

	if (!reason || !*reason)
		n = asprintf(&r, REASON_PREFIX " %s", state);
	else if (strncmp(reason, REASON_PREFIX, strlen(REASON_PREFIX)) != 0)
		n = asprintf(&r, REASON_PREFIX " %s", reason);
	else
		n = asprintf(&r, "%s", reason);
	return n < 0 ? NULL : r;
}

static void node_free(struct feed_node *n)
{
	free(n->name);
	free(n->state_str);
	free(n->features);
	free(n->reason);
	free(n->comment);
}

static int parse_node(struct json_object *o, size_t i, struct feed_node *n,
		      char *err, size_t errlen)
{
	struct json_object *v;
	char *reason = NULL;

	memset(n, 0, sizeof(*n));
	if (!json_object_is_type(o, json_type_object)) {
		set_err(err, errlen, "nodes[%zu] is not an object", i);
		return -1;
	}
	if (opt_string(o, "name", &n->name) || !n->name) {
		set_err(err, errlen, "nodes[%zu]: missing or non-string name", i);
		return -1;
	}
	if (!valid_node_name(n->name)) {
		set_err(err, errlen, "nodes[%zu]: invalid node name", i);
		return -1;
	}
	if (opt_string(o, "state", &n->state_str) || !n->state_str) {
		set_err(err, errlen, "node %s: missing or non-string state",
			n->name);
		return -1;
	}
	n->state = parse_state(n->state_str);
	if (opt_string(o, "features", &n->features) ||
	    opt_string(o, "comment", &n->comment) ||
	    opt_string(o, "reason", &reason)) {
		free(reason);
		set_err(err, errlen, "node %s: a string field has another type",
			n->name);
		return -1;
	}
	n->reason = normalise_reason(reason, n->state_str);
	free(reason);
	if (!n->reason) {
		set_err(err, errlen, "out of memory");
		return -1;
	}
	{
		static const char *const keys[] = { "cpus", "memoryMB", "gpus" };
		int *dst[] = { &n->cpus, &n->memory_mb, &n->gpus };

		for (size_t k = 0; k < 3; k++) {
			int64_t x;

			if (!json_object_object_get_ex(o, keys[k], &v))
				continue;
			x = json_object_get_int64(v);
			/* Sizes only decorate a declared node: a bad one is
			 * dropped, not a reason to refuse the node states. */
			if (!json_object_is_type(v, json_type_int) || x < 0 ||
			    x > (1 << 30)) {
				log_warn("feed node size ignored", "node",
					 n->name, "field", keys[k], NULL);
				continue;
			}
			*dst[k] = (int)x;
		}
	}
	if (json_object_object_get_ex(o, "weight", &v)) {
		int64_t w;

		if (!json_object_is_type(v, json_type_int)) {
			set_err(err, errlen, "node %s: weight is not an integer",
				n->name);
			return -1;
		}
		w = json_object_get_int64(v);
		/* UINT32_MAX is Slurm's INFINITE/NO_VAL: not a weight. */
		if (w < 0 || w >= (int64_t)UINT32_MAX) {
			set_err(err, errlen, "node %s: weight out of range",
				n->name);
			return -1;
		}
		n->has_weight = true;
		n->weight = (uint32_t)w;
	}
	return 0;
}

/* "123" or 123 -> 123. Array ("123_4") and het job ids are not plain job ids
 * for slurm_update_job and are skipped by the caller. */
static bool parse_job_id(struct json_object *v, uint32_t *out)
{
	const char *s;
	char *end;
	unsigned long long id;

	if (json_object_is_type(v, json_type_int)) {
		int64_t i = json_object_get_int64(v);

		if (i <= 0 || i >= (int64_t)UINT32_MAX)
			return false;
		*out = (uint32_t)i;
		return true;
	}
	if (!json_object_is_type(v, json_type_string))
		return false;
	s = json_object_get_string(v);
	if (!isdigit((unsigned char)*s))
		return false;
	errno = 0;
	id = strtoull(s, &end, 10);
	if (errno || *end || id == 0 || id >= UINT32_MAX)
		return false;
	*out = (uint32_t)id;
	return true;
}

/* Reports only decorate job comments, so a bad one is skipped with a warning
 * instead of throwing away the node states that came with it. */
static bool parse_report(struct json_object *o, size_t i,
			 struct feed_report *r)
{
	struct json_object *job;
	char idx[21];

	memset(r, 0, sizeof(*r));
	if (!json_object_is_type(o, json_type_object) ||
	    !json_object_object_get_ex(o, "job", &job) ||
	    !parse_job_id(job, &r->job_id) ||
	    opt_string(o, "host", &r->host) ||
	    opt_string(o, "summary", &r->summary) ||
	    !r->summary || !*r->summary) {
		free(r->host);
		free(r->summary);
		log_warn("feed report skipped", "index",
			 log_u64(idx, i), "why",
			 "needs a numeric job id and a non-empty summary", NULL);
		return false;
	}
	return true;
}

static int node_cmp(const void *a, const void *b)
{
	return strcmp(((const struct feed_node *)a)->name,
		      ((const struct feed_node *)b)->name);
}

static int parse_root(struct json_object *root, struct feed *out,
		      char *err, size_t errlen)
{
	struct json_object *v, *nodes, *reports;
	size_t n;

	if (!json_object_is_type(root, json_type_object)) {
		set_err(err, errlen, "top level is not an object");
		return -1;
	}
	if (!json_object_object_get_ex(root, "revision", &v) ||
	    !json_object_is_type(v, json_type_int) ||
	    json_object_get_int64(v) < 0) {
		set_err(err, errlen, "missing or invalid revision");
		return -1;
	}
	out->revision = json_object_get_int64(v);
	/* build and delta are absent from older servers: whole lists. */
	if (json_object_object_get_ex(root, "build", &v)) {
		if (!json_object_is_type(v, json_type_int) ||
		    json_object_get_int64(v) < 0) {
			set_err(err, errlen, "invalid build");
			return -1;
		}
		out->build = json_object_get_int64(v);
	}
	if (json_object_object_get_ex(root, "delta", &v)) {
		if (!json_object_is_type(v, json_type_boolean)) {
			set_err(err, errlen, "invalid delta");
			return -1;
		}
		out->delta = json_object_get_boolean(v);
	}
	if (out->delta && !out->build) {
		set_err(err, errlen, "delta without a build");
		return -1;
	}

	if (!json_object_object_get_ex(root, "nodes", &nodes) ||
	    !json_object_is_type(nodes, json_type_array)) {
		set_err(err, errlen, "missing or non-array nodes");
		return -1;
	}
	n = json_object_array_length(nodes);
	if (n) {
		out->nodes = calloc(n, sizeof(*out->nodes));
		if (!out->nodes) {
			set_err(err, errlen, "out of memory");
			return -1;
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct feed_node *fn = &out->nodes[out->nnodes];

		if (parse_node(json_object_array_get_idx(nodes, i), i, fn,
			       err, errlen)) {
			node_free(fn);
			return -1;
		}
		out->nnodes++;
	}
	/* Sorted by name, so that a reconcile finds each of Slurm's nodes by
	 * binary search: a linear scan per node was quadratic, and at 5,000
	 * nodes it was most of the daemon's CPU (docs/benchmarks/slurmscale.md).
	 * The site manager sends them sorted; sorting here does not rely on it. */
	if (out->nnodes > 1)
		qsort(out->nodes, out->nnodes, sizeof(*out->nodes), node_cmp);
	/* A duplicate would make "the" desired state ambiguous. */
	for (size_t j = 1; j < out->nnodes; j++)
		if (!strcmp(out->nodes[j - 1].name, out->nodes[j].name)) {
			set_err(err, errlen, "duplicate node %s",
				out->nodes[j].name);
			return -1;
		}

	if (!json_object_object_get_ex(root, "reports", &reports) ||
	    json_object_is_type(reports, json_type_null))
		return 0;
	if (!json_object_is_type(reports, json_type_array)) {
		set_err(err, errlen, "reports is not an array");
		return -1;
	}
	n = json_object_array_length(reports);
	if (n) {
		out->reports = calloc(n, sizeof(*out->reports));
		if (!out->reports) {
			set_err(err, errlen, "out of memory");
			return -1;
		}
	}
	for (size_t i = 0; i < n; i++)
		if (parse_report(json_object_array_get_idx(reports, i), i,
				 &out->reports[out->nreports]))
			out->nreports++;
	return 0;
}

int feed_parse(const char *buf, size_t len, struct feed *out,
	       char *err, size_t errlen)
{
	struct json_tokener *tok;
	struct json_object *root;
	enum json_tokener_error jerr;
	size_t end;
	int rc;

	memset(out, 0, sizeof(*out));
	if (len > FEED_MAX_BYTES) {
		set_err(err, errlen, "body of %zu bytes exceeds the %u byte cap",
			len, FEED_MAX_BYTES);
		return -1;
	}
	tok = json_tokener_new();
	if (!tok) {
		set_err(err, errlen, "out of memory");
		return -1;
	}
	/* The int cast is safe: len is capped at 64 MiB above. */
	root = json_tokener_parse_ex(tok, buf, (int)len);
	jerr = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (!root) {
		set_err(err, errlen, "invalid JSON: %s",
			jerr == json_tokener_continue ? "truncated" :
			json_tokener_error_desc(jerr));
		return -1;
	}
	/* Trailing garbage means the body is not the single document we
	 * asked for. */
	while (end < len && isspace((unsigned char)buf[end]))
		end++;
	if (end != len) {
		json_object_put(root);
		set_err(err, errlen, "trailing data after JSON document");
		return -1;
	}
	rc = parse_root(root, out, err, errlen);
	json_object_put(root);
	if (rc)
		feed_free(out);
	return rc;
}

void feed_free(struct feed *f)
{
	for (size_t i = 0; i < f->nnodes; i++)
		node_free(&f->nodes[i]);
	for (size_t i = 0; i < f->nreports; i++) {
		free(f->reports[i].host);
		free(f->reports[i].summary);
	}
	free(f->nodes);
	free(f->reports);
	memset(f, 0, sizeof(*f));
}

const struct feed_node *feed_find_node(const struct feed *f, const char *name)
{
	struct feed_node key = { .name = (char *)name };

	if (!f->nnodes)
		return NULL;
	return bsearch(&key, f->nodes, f->nnodes, sizeof(*f->nodes), node_cmp);
}

/* ---- HTTP ------------------------------------------------------------- */

/* The host as curl's URL API gives it: a name, a dotted IPv4 address, or an
 * IPv6 address in brackets (its zone id, if any, apart). */
static bool host_is_loopback(const char *host)
{
	struct in6_addr a6;
	struct in_addr a4;
	char buf[INET6_ADDRSTRLEN];
	size_t n = strlen(host);

	/* curl resolves "localhost" to the loopback addresses itself, never
	 * asking DNS (curl >= 7.78). */
	if (!strcasecmp(host, "localhost"))
		return true;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (n < 3 || host[0] != '[' || host[n - 1] != ']' ||
	    n - 2 >= sizeof(buf))
		return false;
	memcpy(buf, host + 1, n - 2);
	buf[n - 2] = '\0';
	if (inet_pton(AF_INET6, buf, &a6) != 1)
		return false;
	return IN6_IS_ADDR_LOOPBACK(&a6) ||
	       (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
}

enum feed_server_kind feed_server_check(const char *server, bool insecure_http,
					char *err, size_t errlen)
{
	enum feed_server_kind kind = FEED_SERVER_REFUSED;
	char *scheme = NULL, *host = NULL;
	CURLUcode uc;
	CURLU *u;

	if (err && errlen)
		err[0] = '\0';
	if (!server || !*server) {
		set_err(err, errlen, "--server is empty");
		return FEED_SERVER_REFUSED;
	}
	u = curl_url();
	if (!u) {
		set_err(err, errlen, "out of memory");
		return FEED_SERVER_REFUSED;
	}
	/* No flags: a scheme is required (no guessing), and none but http and
	 * https gets past the comparison below. */
	uc = curl_url_set(u, CURLUPART_URL, server, 0);
	if (uc != CURLUE_OK) {
		set_err(err, errlen, "--server \"%s\" is not a URL (%s)", server,
			curl_url_strerror(uc));
		goto out;
	}
	if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    !host[0]) {
		set_err(err, errlen, "--server \"%s\": no scheme or no host",
			server);
		goto out;
	}
	if (!strcmp(scheme, "https")) {
		kind = FEED_SERVER_HTTPS;
	} else if (strcmp(scheme, "http")) {
		set_err(err, errlen, "--server \"%s\": scheme %s is neither "
			"https nor http", server, scheme);
	} else if (host_is_loopback(host)) {
		kind = FEED_SERVER_HTTP_LOOPBACK;
	} else if (insecure_http) {
		kind = FEED_SERVER_HTTP_INSECURE;
	} else {
		set_err(err, errlen, "--server \"%s\": plain http to another "
			"host would send the password across the network in "
			"clear; use https (--ca-file for the site's CA), or "
			"--insecure-http in a lab", server);
	}
out:
	curl_free(scheme);
	curl_free(host);
	curl_url_cleanup(u);
	return kind;
}

int feed_ca_file_check(const char *path, char *err, size_t errlen)
{
	char line[256];
	bool found = false;
	FILE *f;

	f = fopen(path, "re");
	if (!f) {
		set_err(err, errlen, "--ca-file %s: %s", path, strerror(errno));
		return -1;
	}
	/* The armour curl's TLS library reads ("CERTIFICATE", "X509
	 * CERTIFICATE", "TRUSTED CERTIFICATE"). A line longer than the buffer
	 * comes in pieces, but a BEGIN line still starts a piece. */
	while (!found && fgets(line, sizeof(line), f))
		found = !strncmp(line, "-----BEGIN ", 11) &&
			strstr(line, "CERTIFICATE-----");
	if (ferror(f)) {
		set_err(err, errlen, "--ca-file %s: %s", path, strerror(errno));
		fclose(f);
		return -1;
	}
	fclose(f);
	if (!found) {
		set_err(err, errlen, "--ca-file %s: no PEM certificate in it",
			path);
		return -1;
	}
	return 0;
}

struct feed_client {
	CURL *curl; /* reused so the connection is kept alive across polls */
	char *base; /* server URL without trailing '/' */
	bool ca_file; /* trusts --ca-file's CA(s), not the system's roots */
	volatile sig_atomic_t *stop;
	char errbuf[CURL_ERROR_SIZE];
};

struct body {
	char *data;
	size_t len;
	bool too_big;
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct body *b = ud;
	size_t n = size * nmemb;
	char *p;

	/* Enforce the cap while receiving, not after: a runaway server must
	 * not be able to make us buffer gigabytes. */
	if (b->len + n > FEED_MAX_BYTES) {
		b->too_big = true;
		return 0;
	}
	p = realloc(b->data, b->len + n + 1);
	if (!p)
		return 0;
	memcpy(p + b->len, ptr, n);
	b->data = p;
	b->len += n;
	b->data[b->len] = '\0';
	return n;
}

/* Returning non-zero aborts the transfer: this is how SIGTERM interrupts a
 * 25 s long poll without waiting for it to finish. */
static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut,
		       curl_off_t un)
{
	const struct feed_client *c = ud;

	(void)dt; (void)dn; (void)ut; (void)un;
	return *c->stop ? 1 : 0;
}

struct feed_client *feed_client_new(const char *server, const char *user,
				    const char *password, const char *ca_file,
				    volatile sig_atomic_t *stop)
{
	struct feed_client *c;
	size_t n;

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->stop = stop;
	c->base = strdup(server);
	c->curl = curl_easy_init();
	if (!c->base || !c->curl) {
		feed_client_free(c);
		return NULL;
	}
	n = strlen(c->base);
	while (n && c->base[n - 1] == '/')
		c->base[--n] = '\0';

	curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, c->errbuf);
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	/* No redirects, http(s) only: basic auth credentials must only ever
	 * go to the configured server. */
	curl_easy_setopt(c->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c->curl, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c->curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
	curl_easy_setopt(c->curl, CURLOPT_USERNAME, user);
	curl_easy_setopt(c->curl, CURLOPT_PASSWORD, password);
	curl_easy_setopt(c->curl, CURLOPT_USERAGENT, "overtime-slurm-sync");
	curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, c);
	/* curl's defaults, spelled out: the server's chain and its name are
	 * always checked, whichever CA vouches for it. */
	curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(c->curl, CURLOPT_SSLVERSION,
			 (long)CURL_SSLVERSION_TLSv1_2);
	if (ca_file) {
		/* That bundle alone, as the overtime CLI's --ca-file: the
		 * CA path compiled into libcurl (the system's roots) is
		 * cleared too. */
		if (curl_easy_setopt(c->curl, CURLOPT_CAINFO, ca_file) !=
		    CURLE_OK ||
		    curl_easy_setopt(c->curl, CURLOPT_CAPATH, NULL) !=
		    CURLE_OK) {
			feed_client_free(c);
			return NULL;
		}
		c->ca_file = true;
	}
	return c;
}

void feed_client_free(struct feed_client *c)
{
	if (!c)
		return;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	free(c->base);
	free(c);
	curl_global_cleanup();
}

/* One GET of path (relative to the server) with a timeout; the body in *b
 * (caller frees b->data). Returns 0 on a 200 answer, -1 after logging. */
static int http_get(struct feed_client *c, const char *url, long timeout_s,
		    struct body *b)
{
	char num[21];
	long status = 0;
	CURLcode res;

	c->errbuf[0] = '\0';
	curl_easy_setopt(c->curl, CURLOPT_URL, url);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(c->curl, CURLOPT_TIMEOUT, timeout_s);

	res = curl_easy_perform(c->curl);
	if (res != CURLE_OK) {
		if (*c->stop)
			log_debug("request aborted by signal", NULL);
		else if (b->too_big)
			log_error("answer unusable", "url", url, "error",
				  "body exceeds the 64 MiB cap", NULL);
		else
			log_error("site manager unreachable", "url", url,
				  "error", c->errbuf[0] ? c->errbuf :
				  curl_easy_strerror(res), "hint",
				  res != CURLE_PEER_FAILED_VERIFICATION ? NULL :
				  c->ca_file ? "the server's certificate is not "
				  "one --ca-file's CA signed for this host name" :
				  "a site's own CA? give it with --ca-file",
				  NULL);
		return -1;
	}
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status != 200) {
		char snippet[201];
		size_t n = b->len < 200 ? b->len : 200;

		if (n)
			memcpy(snippet, b->data, n);
		snippet[n] = '\0';
		log_error("request failed", "url", url, "status",
			  log_i64(num, status), "body", snippet, NULL);
		return -1;
	}
	return 0;
}

int feed_slurm_version(const char *v, char *out, size_t outlen)
{
	size_t n = 0, digits = 0, parts = 1;

	if (outlen)
		out[0] = '\0';
	if (!v || outlen < FEED_VERSION_MAX)
		return -1;
	for (; v[n] && (isdigit((unsigned char)v[n]) || v[n] == '.'); n++) {
		if (v[n] == '.') {
			/* A dot after no digit, or a fifth number: not a
			 * version. A trailing dot is cut below. */
			if (!digits || ++parts > 4)
				return -1;
			digits = 0;
		} else if (++digits > 4) {
			return -1;
		}
	}
	if (n && v[n - 1] == '.') {
		n--;
		parts--;
	}
	if (parts < 2 || n >= FEED_VERSION_MAX)
		return -1;
	memcpy(out, v, n);
	out[n] = '\0';
	return 0;
}

char *feed_nodes_url(const char *server, int64_t since, int64_t base,
		     int wait_s, const char *slurmctld)
{
	char *url = NULL;
	char delta[32] = "", ctld[16 + FEED_VERSION_MAX] = "";

	if (base > 0)
		snprintf(delta, sizeof(delta), "&base=%" PRId64, base);
	/* Digits and dots only (feed_slurm_version): nothing to escape. */
	if (slurmctld && slurmctld[0])
		snprintf(ctld, sizeof(ctld), "&slurmctld=%s", slurmctld);
	if (asprintf(&url, "%s/api/v1/slurm/nodes?since=%" PRId64 "&wait=%d%s%s",
		     server, since, wait_s, delta, ctld) < 0)
		return NULL;
	return url;
}

int feed_fetch(struct feed_client *c, int64_t since, int64_t base, int wait_s,
	       const char *slurmctld, struct feed *out)
{
	struct body b = { 0 };
	char *url;
	char err[256];
	int rc = -1;

	memset(out, 0, sizeof(*out));
	url = feed_nodes_url(c->base, since, base, wait_s, slurmctld);
	if (!url)
		return -1;
	/* The server holds the request up to wait_s; the margin covers a slow
	 * network, and the timeout catches a server that never answers. */
	if (http_get(c, url, (long)wait_s + 30L, &b))
		goto out;
	if (feed_parse(b.data ? b.data : "", b.len, out, err, sizeof(err))) {
		log_error("feed unusable", "url", url, "error", err, NULL);
		goto out;
	}
	rc = 0;
out:
	free(b.data);
	free(url);
	return rc;
}

int feed_fetch_windows(struct feed_client *c, int64_t horizon_s,
		       struct windows *out)
{
	struct body b = { 0 };
	char *url = NULL;
	char err[256];
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (asprintf(&url, "%s/api/v1/slurm/reservations?horizon=%" PRId64,
		     c->base, horizon_s) < 0)
		return -1;
	if (http_get(c, url, 30L, &b))
		goto out;
	if (windows_parse(b.data ? b.data : "", b.len, out, err,
			  sizeof(err))) {
		log_error("reservations unusable", "url", url, "error", err,
			  NULL);
		goto out;
	}
	rc = 0;
out:
	free(b.data);
	free(url);
	return rc;
}
