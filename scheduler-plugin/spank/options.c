#include "options.h"

#include <string.h>

int ot_desktop_parse(const char *value, enum ot_desktop *out)
{
	if (!value)
		return -1;
	if (strcmp(value, "allow") == 0)
		*out = OT_DESKTOP_ALLOW;
	else if (strcmp(value, "avoid") == 0)
		*out = OT_DESKTOP_AVOID;
	else if (strcmp(value, "only-dedicated") == 0)
		*out = OT_DESKTOP_ONLY_DEDICATED;
	else
		return -1;
	return 0;
}

/*
 * Validation only, no state: the value the controller acts on travels in the
 * spank environment, and in slurmstepd (remote != 0) the callback runs again
 * on the forwarded value, which sbatch already checked.
 */
static int desktop_cb(int val, const char *optarg, int remote)
{
	enum ot_desktop d;

	(void)val;
	(void)remote;
	if (ot_desktop_parse(optarg, &d) < 0) {
		slurm_error("--desktop: \"%s\" is not valid: must be allow, avoid or only-dedicated",
			    optarg ? optarg : "");
		return -1;
	}
	return 0;
}

static struct spank_option desktop_option = {
	.name = "desktop",
	.arginfo = "allow|avoid|only-dedicated",
	.usage = "Overtime desktop PCs this job may run on. "
		 "allow: any node (default). "
		 "avoid: only dedicated (cluster-mode) nodes and desktops "
		 "nobody is using (constraint dedicated|desk-empty). "
		 "only-dedicated: only hosts in cluster mode "
		 "(constraint dedicated).",
	.has_arg = 1,
	.val = 0,
	.cb = desktop_cb,
};

int ot_options_register(spank_t sp)
{
	spank_err_t rc = spank_option_register(sp, &desktop_option);

	if (rc != ESPANK_SUCCESS) {
		slurm_error("overtime: cannot register --desktop: %s",
			    spank_strerror(rc));
		return -1;
	}
	return 0;
}
