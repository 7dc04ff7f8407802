#include "log.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

bool log_debug_enabled;

static const char *level_name(enum log_level l)
{
	switch (l) {
	case LOG_DEBUG: return "DEBUG";
	case LOG_INFO:  return "INFO";
	case LOG_WARN:  return "WARN";
	case LOG_ERROR: return "ERROR";
	}
	return "INFO";
}

static bool needs_quotes(const char *v)
{
	if (!*v)
		return true;
	for (const char *p = v; *p; p++)
		if (*p <= ' ' || *p == '"' || *p == '=' || *p == '\\' ||
		    *p == 0x7f)
			return true;
	return false;
}

/* Escape so a value (e.g. an HTTP body from the server) can never break the
 * one-event-per-line property or forge extra fields. */
static void put_value(FILE *f, const char *v)
{
	if (!needs_quotes(v)) {
		fputs(v, f);
		return;
	}
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
		switch (*p) {
		case '"':  fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		default:
			if (*p < ' ' || *p == 0x7f)
				fprintf(f, "\\x%02x", *p);
			else
				fputc(*p, f);
		}
	}
	fputc('"', f);
}

void log_kv(enum log_level level, const char *msg, ...)
{
	struct timespec ts;
	struct tm tm;
	char when[32];
	va_list ap;
	FILE *f = stderr;

	if (level == LOG_DEBUG && !log_debug_enabled)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);

	/* One locked stdio sequence per line so lines never interleave. */
	flockfile(f);
	fprintf(f, "time=%s.%03ldZ level=%s msg=", when, ts.tv_nsec / 1000000L,
		level_name(level));
	put_value(f, msg);
	va_start(ap, msg);
	for (;;) {
		const char *k = va_arg(ap, const char *);
		const char *v;

		if (!k)
			break;
		v = va_arg(ap, const char *);
		if (!v)
			continue;
		fputc(' ', f);
		fputs(k, f);
		fputc('=', f);
		put_value(f, v);
	}
	va_end(ap);
	fputc('\n', f);
	funlockfile(f);
	fflush(f);
}

const char *log_u64(char buf[21], uint64_t v)
{
	snprintf(buf, 21, "%" PRIu64, v);
	return buf;
}

const char *log_i64(char buf[21], int64_t v)
{
	snprintf(buf, 21, "%" PRId64, v);
	return buf;
}

const char *rfc3339_utc(char *buf, size_t len, time_t t)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}
