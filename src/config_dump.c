/* Printing the configuration: --config (every value and its source) and
 * --help (every flag with its default). */
#include "src/config_int.h"

#include <stdlib.h>
#include <string.h>

/* Where the current value came from, derived without extra state: the
 * environment if the variable is set and gives this value, the default if
 * no variable is set and it is the default, a flag otherwise. */
static const char *value_source(const struct rps_config *cfg, const struct rps_config_entry *e,
				struct rps_config *scratch)
{
	char var[80];
	const char *v;

	rps_cfg_env_name(e, var, sizeof(var));
	v = getenv(var);
	/* quiet: a bad variable was reported by rps_config_init, which kept the default */
	if (v && rps_cfg_set_entry(scratch, e, v, var, '=', 1) == 0)
		return rps_cfg_entry_equal(e, cfg, scratch) ? "env" : "flag";
	rps_cfg_set_default(scratch, e);
	return rps_cfg_entry_equal(e, cfg, scratch) ? "default" : "flag";
}

void rps_config_dump(const struct rps_config *cfg, FILE *out)
{
	struct rps_config scratch;

	memset(&scratch, 0, sizeof(scratch));
	fprintf(out, "# %-22s %-24s %-8s %s\n", "setting", "value", "source", "meaning");
	for (const struct rps_config_entry *e = rps_config_table; e->name; e++) {
		char val[RPS_STR_MAX + 8];

		rps_cfg_format_value(cfg, e, val, sizeof(val));
		fprintf(out, "  %-22s %-24s %-8s %s\n", e->name, val,
			value_source(cfg, e, &scratch), e->help);
	}
}

void rps_config_usage(FILE *out)
{
	fprintf(out, "settings (flag, or variable RDMAPS_<NAME>; flags win over variables):\n");
	for (const struct rps_config_entry *e = rps_config_table; e->name; e++) {
		char flag[96];
		const char *arg;
		size_t n;

		rps_cfg_flag_name(e, flag, sizeof(flag));
		switch (e->type) {
		case RPS_CFG_INT:
			arg = " N";
			break;
		case RPS_CFG_U64:
			arg = rps_cfg_is_size(e) ? " SIZE" : " N";
			break;
		case RPS_CFG_DOUBLE:
			arg = " X";
			break;
		case RPS_CFG_BOOL:
			arg = "[=0|1]";
			break;
		default:
			arg = " STR";
			break;
		}
		n = strlen(flag);
		snprintf(flag + n, sizeof(flag) - n, "%s", arg);
		fprintf(out, "  %-28s %s (default %s)\n", flag, e->help,
			e->dflt[0] ? e->dflt : "\"\"");
	}
	fprintf(out, "  %-28s %s\n", "--config", "print every setting, its value and source");
	fprintf(out, "  %-28s %s\n", "--", "stop parsing flags");
}
