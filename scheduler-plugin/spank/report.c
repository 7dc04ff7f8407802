#include "report.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

void ot_sanitize(char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c < 0x20 || c == 0x7f)
			*s = '?';
	}
}

/*
 * Parse body into a JSON object, or return NULL with a reason.  The caller
 * owns the result (json_object_put).
 */
static struct json_object *parse_object(const char *body, size_t len,
					char *err, size_t errlen)
{
	struct json_tokener *tok;
	struct json_object *obj;
	enum json_tokener_error jerr;
	size_t end;

	if (!body || len == 0) {
		snprintf(err, errlen, "empty response");
		return NULL;
	}
	if (len > OT_RESPONSE_MAX) {
		snprintf(err, errlen, "response too large (%zu bytes, limit %d)",
			 len, OT_RESPONSE_MAX);
		return NULL;
	}

	tok = json_tokener_new();
	if (!tok) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	/*
	 * The agent is Go's encoding/json, which only writes strict JSON; being
	 * strict here turns anything else (an HTML error page from a proxy,
	 * a wrong service on the port) into a clear parse error.
	 */
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT |
				    JSON_TOKENER_VALIDATE_UTF8);
	obj = json_tokener_parse_ex(tok, body, (int)len);
	jerr = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);

	if (jerr != json_tokener_success) {
		/* json_tokener_continue: the text ended inside a value. */
		snprintf(err, errlen, "malformed JSON: %s",
			 jerr == json_tokener_continue ?
				 "unexpected end of input" :
				 json_tokener_error_desc(jerr));
		json_object_put(obj);
		return NULL;
	}
	for (; end < len; end++) {
		char c = body[end];

		/* Go's json.Encoder ends with a newline; anything else is junk. */
		if (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
			snprintf(err, errlen,
				 "malformed JSON: trailing data at byte %zu",
				 end);
			json_object_put(obj);
			return NULL;
		}
	}
	if (!json_object_is_type(obj, json_type_object)) {
		snprintf(err, errlen, "malformed JSON: not an object");
		json_object_put(obj);
		return NULL;
	}
	return obj;
}

/* Copy a string member (or an integer one, for "job") into dst; "" if absent. */
static void get_string(struct json_object *obj, const char *key,
		       char *dst, size_t dstlen)
{
	struct json_object *v;

	dst[0] = '\0';
	if (!json_object_object_get_ex(obj, key, &v))
		return;
	if (json_object_is_type(v, json_type_string))
		snprintf(dst, dstlen, "%s", json_object_get_string(v));
	else if (json_object_is_type(v, json_type_int))
		snprintf(dst, dstlen, "%lld",
			 (long long)json_object_get_int64(v));
	ot_sanitize(dst);
}

/* A number member, or NAN if absent or not a finite number. */
static double get_number(struct json_object *obj, const char *key)
{
	struct json_object *v;
	double d;

	if (!json_object_object_get_ex(obj, key, &v))
		return NAN;
	if (!json_object_is_type(v, json_type_double) &&
	    !json_object_is_type(v, json_type_int))
		return NAN;
	d = json_object_get_double(v);
	return isfinite(d) ? d : NAN;
}

/* An integer count, 0 if absent (the agent omits zero counts), -1 if mistyped. */
static long long get_count(struct json_object *obj, const char *key)
{
	struct json_object *v;

	if (!obj || !json_object_object_get_ex(obj, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_int))
		return -1;
	return (long long)json_object_get_int64(v);
}

int ot_parse_start(const char *body, size_t len, struct ot_job_start *out,
		   char *err, size_t errlen)
{
	struct json_object *obj;

	memset(out, 0, sizeof(*out));
	obj = parse_object(body, len, err, errlen);
	if (!obj)
		return -1;
	get_string(obj, "job", out->job, sizeof(out->job));
	get_string(obj, "host", out->host, sizeof(out->host));
	get_string(obj, "mode", out->mode, sizeof(out->mode));
	json_object_put(obj);
	return 0;
}

int ot_parse_report(const char *body, size_t len, struct ot_job_report *out,
		    char *err, size_t errlen)
{
	struct json_object *obj, *actions = NULL;

	memset(out, 0, sizeof(*out));
	obj = parse_object(body, len, err, errlen);
	if (!obj)
		return -1;

	get_string(obj, "job", out->job, sizeof(out->job));
	get_string(obj, "host", out->host, sizeof(out->host));
	get_string(obj, "mode", out->mode, sizeof(out->mode));
	get_string(obj, "start", out->start, sizeof(out->start));
	get_string(obj, "end", out->end, sizeof(out->end));
	get_string(obj, "summary", out->summary, sizeof(out->summary));
	out->seconds = get_number(obj, "seconds");
	out->throttled_seconds = get_number(obj, "throttledSeconds");
	out->frozen_seconds = get_number(obj, "frozenSeconds");
	out->owner_active_fraction = get_number(obj, "ownerActiveFraction");
	out->guest_cpu_seconds = get_number(obj, "guestCPUSeconds");
	out->steal_seconds = get_number(obj, "stealSeconds");
	out->desktop_slowdown = get_number(obj, "desktopSlowdown");
	out->slowdown_low = get_number(obj, "slowdownLow");
	out->slowdown_high = get_number(obj, "slowdownHigh");
	get_string(obj, "slowdownMethod", out->slowdown_method,
		   sizeof(out->slowdown_method));
	out->guest_slowdown = get_number(obj, "guestSlowdown");

	if (json_object_object_get_ex(obj, "actions", &actions) &&
	    !json_object_is_type(actions, json_type_object))
		actions = NULL;
	out->actions_throttle = get_count(actions, "throttle");
	out->actions_freeze = get_count(actions, "freeze");
	out->actions_evict = get_count(actions, "evict");

	json_object_put(obj);
	return 0;
}

int ot_parse_error(const char *body, size_t len, char *buf, size_t buflen)
{
	struct json_object *obj;
	char err[128];

	if (buflen == 0)
		return -1;
	buf[0] = '\0';
	obj = parse_object(body, len, err, sizeof(err));
	if (!obj)
		return -1;
	get_string(obj, "error", buf, buflen);
	json_object_put(obj);
	return buf[0] ? 0 : -1;
}

/* snprintf-append that never runs past buf, however long the input. */
__attribute__((format(printf, 4, 5)))
static void append(char *buf, size_t buflen, size_t *pos, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*pos >= buflen)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *pos, buflen - *pos, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	*pos += (size_t)n;
	if (*pos >= buflen)
		*pos = buflen;
}

static void append_str(char *buf, size_t buflen, size_t *pos,
		       const char *key, const char *val)
{
	if (val[0])
		append(buf, buflen, pos, "%s%s=%s", *pos ? " " : "", key, val);
}

static void append_num(char *buf, size_t buflen, size_t *pos,
		       const char *key, double val)
{
	if (!isnan(val))
		append(buf, buflen, pos, "%s%s=%g", *pos ? " " : "", key, val);
}

/* key="value" for a value with spaces; '"' in it becomes '\''. */
static void append_quoted(char *buf, size_t buflen, size_t *pos,
			  const char *key, const char *val)
{
	if (!val[0])
		return;
	append(buf, buflen, pos, "%s%s=\"", *pos ? " " : "", key);
	for (; *val; val++)
		append(buf, buflen, pos, "%c", *val == '"' ? '\'' : *val);
	append(buf, buflen, pos, "\"");
}

void ot_format_report(const struct ot_job_report *r, char *buf, size_t buflen)
{
	size_t pos = 0;

	if (buflen == 0)
		return;
	buf[0] = '\0';
	append_str(buf, buflen, &pos, "job", r->job);
	append_str(buf, buflen, &pos, "host", r->host);
	append_str(buf, buflen, &pos, "mode", r->mode);
	append_str(buf, buflen, &pos, "start", r->start);
	append_str(buf, buflen, &pos, "end", r->end);
	append_num(buf, buflen, &pos, "seconds", r->seconds);
	append_num(buf, buflen, &pos, "throttled", r->throttled_seconds);
	append_num(buf, buflen, &pos, "frozen", r->frozen_seconds);
	append_num(buf, buflen, &pos, "owner_active", r->owner_active_fraction);
	append_num(buf, buflen, &pos, "guest_cpu", r->guest_cpu_seconds);
	append_num(buf, buflen, &pos, "steal", r->steal_seconds);
	append_num(buf, buflen, &pos, "desktop_slowdown", r->desktop_slowdown);
	append_num(buf, buflen, &pos, "slowdown_low", r->slowdown_low);
	append_num(buf, buflen, &pos, "slowdown_high", r->slowdown_high);
	append_quoted(buf, buflen, &pos, "slowdown_method", r->slowdown_method);
	append_num(buf, buflen, &pos, "guest_slowdown", r->guest_slowdown);
	append(buf, buflen, &pos, "%sactions=throttle:%lld,freeze:%lld,evict:%lld",
	       pos ? " " : "", r->actions_throttle, r->actions_freeze,
	       r->actions_evict);
}
