/*
 * Plugin arguments from plugstack.conf (agent=, tasks=, timeout=, home=).
 *
 * Slurm hands the same argv to every callback, and in the job script context
 * (prolog/epilog) slurm_spank_init() is never called, so callers parse the
 * arguments where they need them into a stack struct instead of keeping
 * global state.  This file has no Slurm dependency so the tests can link it.
 */
#ifndef OVERTIME_CONFIG_H
#define OVERTIME_CONFIG_H

#include <stddef.h>

enum ot_tasks {
	OT_TASKS_IDLE,   /* nice 19 + SCHED_IDLE: the desktop owner comes first */
	OT_TASKS_NORMAL, /* leave task priority alone */
};

#define OT_TIMEOUT_DEFAULT_MS 2000L
#define OT_TIMEOUT_MAX_MS 60000L

struct ot_config {
	char *agent;       /* base URL of the node agent, NULL if not configured */
	char *agent_file;  /* agent=file:PATH: read the URL from PATH when needed */
	enum ot_tasks tasks;
	long timeout_ms;
	/*
	 * home=PATTERN: the home directory of the passwd entries the prolog
	 * writes (identity.h), checked here; NULL for OT_HOME_DEFAULT.
	 */
	char *home;
};

/*
 * Parse argv into cfg.  Returns 0, or -1 with a message in err (cfg is then
 * left freed).  Unknown or malformed arguments are errors: a typo in
 * plugstack.conf must stop the plugin from loading, not silently disable it.
 */
int ot_config_parse(int ac, char **av, struct ot_config *cfg,
		    char *err, size_t errlen);

void ot_config_free(struct ot_config *cfg);

/*
 * For agent=file:PATH, read the URL (first line of PATH) into cfg->agent.
 * The file is written by the guest's init from what the node agent told it
 * (OVERTIME_AGENT_URL): one plugstack.conf, distributed configless to every
 * guest, cannot name each desktop's own agent.  Returns 0 (cfg->agent set, or
 * nothing configured) or -1 with a message in err.
 */
int ot_config_resolve_agent(struct ot_config *cfg, char *err, size_t errlen);

#endif
