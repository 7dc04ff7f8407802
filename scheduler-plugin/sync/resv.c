#include "resv.h"
#include "log.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

/* ---- parsing ---------------------------------------------------------- */

void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int parse_rfc3339_utc(const char *s, time_t *out)
{
	struct tm tm;
	const char *end;

	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (!end || *end)
		return -1;
	*out = timegm(&tm);
	return *out == (time_t)-1 ? -1 : 0;
}

/* Same rule as the feed's node names: a plain host name, never a hostlist
 * expression, since it goes into a reservation's node list. */
static bool valid_node(const char *s)
{
	if (!*s || strlen(s) > 255)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_' &&
		    *s != '.')
			return false;
	return true;
}

static int get_str(struct json_object *o, const char *key, bool required,
		   char **out)
{
	struct json_object *v;

	*out = NULL;
	if (!json_object_object_get_ex(o, key, &v))
		return required ? -1 : 0;
	if (!json_object_is_type(v, json_type_string))
		return -1;
	*out = strdup(json_object_get_string(v));
	return *out ? 0 : -1;
}

static int get_time(struct json_object *o, const char *key, time_t *out)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return -1;
	return parse_rfc3339_utc(json_object_get_string(v), out);
}

void window_free(struct window *w)
{
	free(w->node);
	free(w->mode);
	free(w->exception);
	free(w->reason);
}

static int parse_window(struct json_object *o, size_t i, struct window *w,
			char *err, size_t errlen)
{
	memset(w, 0, sizeof(*w));
	if (!json_object_is_type(o, json_type_object)) {
		set_err(err, errlen, "windows[%zu] is not an object", i);
		return -1;
	}
	if (get_str(o, "node", true, &w->node) || !valid_node(w->node)) {
		set_err(err, errlen, "windows[%zu]: missing or invalid node", i);
		return -1;
	}
	if (get_time(o, "start", &w->start) || get_time(o, "end", &w->end) ||
	    w->end <= w->start) {
		set_err(err, errlen, "window of %s: start and end must be "
			"RFC 3339 UTC instants, end after start", w->node);
		return -1;
	}
	if (get_str(o, "mode", false, &w->mode) ||
	    get_str(o, "exception", false, &w->exception) ||
	    get_str(o, "reason", false, &w->reason)) {
		set_err(err, errlen, "window of %s: a string field has another "
			"type", w->node);
		return -1;
	}
	{
		struct json_object *ps;

		if (json_object_object_get_ex(o, "powerSave", &ps)) {
			if (!json_object_is_type(ps, json_type_boolean)) {
				set_err(err, errlen, "window of %s: powerSave "
					"is not a boolean", w->node);
				return -1;
			}
			w->power_save = json_object_get_boolean(ps);
		}
	}
	/* Job comments start with our prefix; so must the reason. */
	if (!w->reason || strncmp(w->reason, OT_PREFIX, strlen(OT_PREFIX))) {
		char *r = NULL;

		if (asprintf(&r, OT_PREFIX " %s", w->reason ? w->reason :
			     "the schedule stops the guest") < 0) {
			set_err(err, errlen, "out of memory");
			return -1;
		}
		free(w->reason);
		w->reason = r;
	}
	return 0;
}

int windows_parse(const char *buf, size_t len, struct windows *out,
		  char *err, size_t errlen)
{
	struct json_object *root, *v, *arr;
	struct json_tokener *tok;
	size_t n;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (len > FEED_MAX_BYTES) {
		set_err(err, errlen, "body of %zu bytes exceeds the cap", len);
		return -1;
	}
	tok = json_tokener_new();
	if (!tok) {
		set_err(err, errlen, "out of memory");
		return -1;
	}
	root = json_tokener_parse_ex(tok, buf, (int)len);
	if (!root || json_tokener_get_parse_end(tok) < len) {
		/* Trailing whitespace is fine, anything else is not. */
		size_t end = root ? json_tokener_get_parse_end(tok) : 0;

		while (root && end < len && isspace((unsigned char)buf[end]))
			end++;
		if (!root || end != len) {
			json_tokener_free(tok);
			json_object_put(root);
			set_err(err, errlen, "invalid JSON");
			return -1;
		}
	}
	json_tokener_free(tok);
	if (!json_object_is_type(root, json_type_object) ||
	    get_time(root, "now", &out->now)) {
		set_err(err, errlen, "missing or invalid now");
		goto out;
	}
	if (json_object_object_get_ex(root, "horizonSeconds", &v) &&
	    json_object_is_type(v, json_type_int))
		out->horizon_s = json_object_get_int64(v);
	if (!json_object_object_get_ex(root, "windows", &arr) ||
	    !json_object_is_type(arr, json_type_array)) {
		set_err(err, errlen, "missing or non-array windows");
		goto out;
	}
	n = json_object_array_length(arr);
	if (n && !(out->w = calloc(n, sizeof(*out->w)))) {
		set_err(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (parse_window(json_object_array_get_idx(arr, i), i,
				 &out->w[out->n], err, errlen)) {
			window_free(&out->w[out->n]);
			goto out;
		}
		out->n++;
	}
	rc = 0;
out:
	json_object_put(root);
	if (rc)
		windows_free(out);
	return rc;
}

void windows_free(struct windows *ws)
{
	for (size_t i = 0; i < ws->n; i++)
		window_free(&ws->w[i]);
	free(ws->w);
	memset(ws, 0, sizeof(*ws));
}

/* ---- reservations ----------------------------------------------------- */

char *resv_name(char *buf, size_t len, const char *node, time_t start)
{
	snprintf(buf, len, RESV_PREFIX "%s-%lld", node, (long long)start);
	return buf;
}

static bool resv_matches(const struct cur_resv *r, const struct window *w,
			 time_t now)
{
	if (!r->node_list || strcmp(r->node_list, w->node))
		return false;
	return r->start == w->start || (r->start <= now && w->start <= now);
}

size_t reconcile_reservations(const struct window *want, size_t nwant,
			      const struct cur_resv *cur, size_t ncur,
			      time_t now, struct resv_action *out)
{
	bool used[ncur + 1];
	size_t n = 0;

	memset(used, 0, sizeof(used));
	for (size_t i = 0; i < nwant; i++) {
		const struct window *w = &want[i];
		size_t j;

		if (w->end <= now)
			continue; /* over already: Slurm drops ended ones */
		for (j = 0; j < ncur; j++)
			if (!used[j] && resv_matches(&cur[j], w, now))
				break;
		if (j < ncur) {
			used[j] = true;
			if (cur[j].end != w->end)
				out[n++] = (struct resv_action){
					.kind = RA_UPDATE, .name = cur[j].name,
					.node = w->node, .start = cur[j].start,
					.end = w->end, .reason = w->reason };
			continue;
		}
		out[n++] = (struct resv_action){
			.kind = RA_CREATE, .node = w->node,
			.start = w->start > now ? w->start : now,
			.end = w->end, .reason = w->reason };
	}
	for (size_t j = 0; j < ncur; j++)
		if (!used[j])
			out[n++] = (struct resv_action){
				.kind = RA_DELETE, .name = cur[j].name,
				.node = cur[j].node_list, .start = cur[j].start,
				.end = cur[j].end };
	return n;
}

/* ---- short notice ----------------------------------------------------- */

enum warn_kind short_notice(const struct window *w, size_t n, const char *node,
			    const struct warn_job *j, time_t now, int lead_s,
			    const struct window **hit)
{
	const struct window *next = NULL;

	*hit = NULL;
	if (j->state != CJ_RUNNING && j->state != CJ_SUSPENDED)
		return WA_NONE;
	if (j->resv_name && !strncmp(j->resv_name, RESV_PREFIX,
				     strlen(RESV_PREFIX)))
		return WA_NONE;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(w[i].node, node) || w[i].end <= now)
			continue;
		if (w[i].start <= now) {
			*hit = &w[i];
			return WA_REQUEUE;
		}
		if (!next || w[i].start < next->start)
			next = &w[i];
	}
	if (!next || next->start - now > lead_s || j->state != CJ_RUNNING ||
	    j->end_time <= next->start ||
	    comment_is_warned_for(j->admin_comment, next))
		return WA_NONE;
	*hit = next;
	return WA_SIGNAL;
}

char *comment_warned(time_t now, const char *signame, const struct window *w)
{
	char t[32], s[32];
	char *c = NULL;

	if (asprintf(&c, OT_WARNED_PREFIX " at %s (SIG%s) of window %s: %s",
		     rfc3339_utc(t, sizeof(t), now), signame,
		     rfc3339_utc(s, sizeof(s), w->start), w->reason) < 0)
		return NULL;
	return c;
}

bool comment_is_warned_for(const char *comment, const struct window *w)
{
	char s[32], needle[48];

	if (!comment || strncmp(comment, OT_WARNED_PREFIX,
				strlen(OT_WARNED_PREFIX)))
		return false;
	snprintf(needle, sizeof(needle), " of window %s:",
		 rfc3339_utc(s, sizeof(s), w->start));
	return strstr(comment, needle) != NULL;
}

time_t next_deadline(const struct windows *ws, time_t now, int lead_s)
{
	time_t best = 0;

	for (size_t i = 0; i < ws->n; i++) {
		time_t c[2] = { ws->w[i].start - lead_s, ws->w[i].start };

		for (int k = 0; k < 2; k++)
			if (c[k] > now && (!best || c[k] < best))
				best = c[k];
	}
	return best;
}

/* ---- node declaration ------------------------------------------------- */

int node_decl_line(char *buf, size_t len, const char *node, int cpus,
		   int memory_mb, int gpus)
{
	int n;

	if (cpus <= 0 || memory_mb <= 0 || !valid_node(node))
		return -1;
	n = snprintf(buf, len, "NodeName=%s State=CLOUD Features="
		     OT_FEATURE_MANAGED " CPUs=%d RealMemory=%d", node, cpus,
		     memory_mb);
	if (n > 0 && gpus > 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, " Gres=gpu:%d", gpus);
	return n > 0 && (size_t)n < len ? 0 : -1;
}
