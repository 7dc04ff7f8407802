/* Structured logging: one logfmt line per event on stderr, so journald and
 * log shippers can parse fields without regexes. */
#ifndef OT_LOG_H
#define OT_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

extern bool log_debug_enabled;

/* log_kv(level, msg, key1, value1, key2, value2, ..., NULL).
 * Values are strings; a pair with a NULL value is left out, so callers can
 * pass optional fields inline. Values with spaces, quotes
 * or '=' are quoted so the line stays machine-parseable. The sentinel keeps
 * call sites short; the attribute makes the compiler check it is there. */
void log_kv(enum log_level level, const char *msg, ...)
	__attribute__((sentinel));

#define log_debug(...) \
	do { if (log_debug_enabled) log_kv(LOG_DEBUG, __VA_ARGS__); } while (0)
#define log_info(...)  log_kv(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_kv(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_kv(LOG_ERROR, __VA_ARGS__)

/* Number formatting for log values; buf must hold 21 bytes. */
const char *log_u64(char buf[21], uint64_t v);
const char *log_i64(char buf[21], int64_t v);

/* RFC 3339 UTC with seconds ("2026-11-22T01:00:00Z"); buf >= 21 bytes.
 * Used in job comments, where milliseconds would only be noise. */
const char *rfc3339_utc(char *buf, size_t len, time_t t);

#endif
