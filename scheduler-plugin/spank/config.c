#include "config.h"
#include "identity.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int parse_agent(const char *val, struct ot_config *cfg,
		       char *err, size_t errlen)
{
	const char *host = NULL;

	if (has_prefix(val, "file:")) {
		const char *path = val + strlen("file:");

		if (path[0] != '/' || path[1] == '/') {
			snprintf(err, errlen,
				 "agent=%s: file: takes an absolute path (file:/run/overtime/agent-url), not a URL", val);
			return -1;
		}
		free(cfg->agent_file);
		cfg->agent_file = strdup(path);
		if (!cfg->agent_file) {
			snprintf(err, errlen, "agent=: out of memory");
			return -1;
		}
		return 0;
	}

	/*
	 * Only plain http(s) URLs: libcurl would accept file://, ftp:// and
	 * friends, and guess a scheme for a bare host.  Either means the admin
	 * wrote something other than they meant.
	 */
	if (has_prefix(val, "http://"))
		host = val + strlen("http://");
	else if (has_prefix(val, "https://"))
		host = val + strlen("https://");
	if (!host) {
		snprintf(err, errlen,
			 "agent=%s: must be an http:// or https:// URL", val);
		return -1;
	}
	if (*host == '\0' || *host == '/') {
		snprintf(err, errlen, "agent=%s: URL has no host", val);
		return -1;
	}
	free(cfg->agent);
	cfg->agent = strdup(val);
	if (!cfg->agent) {
		snprintf(err, errlen, "agent=: out of memory");
		return -1;
	}
	return 0;
}

static int parse_timeout(const char *val, struct ot_config *cfg,
			 char *err, size_t errlen)
{
	char *end;
	long ms;

	errno = 0;
	ms = strtol(val, &end, 10);
	/*
	 * The prolog and epilog block the job (and slurmd's PrologEpilogTimeout
	 * is ticking), so an unbounded or zero timeout is a misconfiguration.
	 */
	if (errno || end == val || *end != '\0' || ms < 1 ||
	    ms > OT_TIMEOUT_MAX_MS) {
		snprintf(err, errlen,
			 "timeout=%s: must be milliseconds between 1 and %ld",
			 val, OT_TIMEOUT_MAX_MS);
		return -1;
	}
	cfg->timeout_ms = ms;
	return 0;
}

/*
 * Checked here, at load, although only the prolog expands it: a pattern that
 * cannot be expanded must stop slurmd like any other bad argument, not skip
 * every job's passwd entry with an error in the log.
 */
static int parse_home(const char *val, struct ot_config *cfg,
		      char *err, size_t errlen)
{
	char why[128];

	if (ot_home_pattern_check(val, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "home=%s: %s", val, why);
		return -1;
	}
	free(cfg->home);
	cfg->home = strdup(val);
	if (!cfg->home) {
		snprintf(err, errlen, "home=: out of memory");
		return -1;
	}
	return 0;
}

int ot_config_parse(int ac, char **av, struct ot_config *cfg,
		    char *err, size_t errlen)
{
	cfg->agent = NULL;
	cfg->agent_file = NULL;
	cfg->tasks = OT_TASKS_IDLE;
	cfg->timeout_ms = OT_TIMEOUT_DEFAULT_MS;
	cfg->home = NULL;

	for (int i = 0; i < ac; i++) {
		const char *arg = av[i];
		int rc = 0;

		if (has_prefix(arg, "agent=")) {
			rc = parse_agent(arg + strlen("agent="), cfg, err,
					 errlen);
		} else if (has_prefix(arg, "tasks=")) {
			const char *v = arg + strlen("tasks=");

			if (strcmp(v, "idle") == 0) {
				cfg->tasks = OT_TASKS_IDLE;
			} else if (strcmp(v, "normal") == 0) {
				cfg->tasks = OT_TASKS_NORMAL;
			} else {
				snprintf(err, errlen,
					 "tasks=%s: must be idle or normal", v);
				rc = -1;
			}
		} else if (has_prefix(arg, "timeout=")) {
			rc = parse_timeout(arg + strlen("timeout="), cfg, err,
					   errlen);
		} else if (has_prefix(arg, "home=")) {
			rc = parse_home(arg + strlen("home="), cfg, err, errlen);
		} else {
			snprintf(err, errlen,
				 "unknown plugin argument \"%s\" (known: agent=URL, tasks=idle|normal, timeout=MS, home=PATTERN)",
				 arg);
			rc = -1;
		}
		if (rc < 0) {
			ot_config_free(cfg);
			return -1;
		}
	}
	return 0;
}

void ot_config_free(struct ot_config *cfg)
{
	free(cfg->agent);
	cfg->agent = NULL;
	free(cfg->agent_file);
	cfg->agent_file = NULL;
	free(cfg->home);
	cfg->home = NULL;
}

int ot_config_resolve_agent(struct ot_config *cfg, char *err, size_t errlen)
{
	char line[1024];
	FILE *f;
	size_t n;

	if (cfg->agent || !cfg->agent_file)
		return 0;
	f = fopen(cfg->agent_file, "r");
	if (!f) {
		snprintf(err, errlen, "agent=file:%s: %s", cfg->agent_file,
			 strerror(errno));
		return -1;
	}
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	n = strcspn(line, "\r\n");
	line[n] = '\0';
	if (line[0] == '\0') {
		snprintf(err, errlen, "agent=file:%s: empty (the node agent gave the guest no URL: --guest-url)",
			 cfg->agent_file);
		return -1;
	}
	if (has_prefix(line, "file:")) {
		snprintf(err, errlen, "agent=file:%s: holds another file: URL", cfg->agent_file);
		return -1;
	}
	return parse_agent(line, cfg, err, errlen);
}
