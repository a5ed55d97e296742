/* Reading the configuration from its sources: defaults, then RDMAPS_*
 * environment variables (unknown ones warned about), then --flags. */
#include "src/config_int.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"

void rps_cfg_env_name(const struct rps_config_entry *e, char *buf, size_t len)
{
	size_t n = 0;

	n = (size_t)snprintf(buf, len, "RDMAPS_");
	for (const char *p = e->name; *p && n + 1 < len; p++)
		buf[n++] = (char)toupper((unsigned char)*p);
	buf[n] = '\0';
}

void rps_cfg_flag_name(const struct rps_config_entry *e, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "--");

	for (const char *p = e->name; *p && n + 1 < len; p++)
		buf[n++] = *p == '_' ? '-' : *p;
	buf[n] = '\0';
}

/* RDMAPS_* variables that are not settings but belong to the test harness
 * (tools/softroce/rxe-run exports RDMAPS_RXE_DEV0, RDMAPS_RXE_IP0, ...) or
 * the benchmark suite (RDMAPS_BENCH_ROUNDS, read by tools/bench). */
static const char *const env_not_settings[] = {"RDMAPS_RXE_", "RDMAPS_SOFTROCE_",
					       "RDMAPS_BENCH_"};

static int env_is_harness(const char *v)
{
	for (size_t i = 0; i < RPS_ARRAY_SIZE(env_not_settings); i++)
		if (!strncmp(v, env_not_settings[i], strlen(env_not_settings[i])))
			return 1;
	return 0;
}

/* Each problem with the environment ("RDMAPS_PORT=abc", an unknown variable)
 * is reported once per process, however many configurations are filled (every
 * worker and server fills its own). Remembered by a hash of "NAME=value". */
static pthread_mutex_t reported_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t reported[64];
static unsigned nreported;

/* 1 the first time for this text (the caller reports it), else 0. */
static int first_report(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	int first = 1;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	pthread_mutex_lock(&reported_lock);
	for (unsigned i = 0; i < nreported; i++)
		if (reported[i] == h)
			first = 0;
	if (first && nreported < RPS_ARRAY_SIZE(reported))
		reported[nreported++] = h;
	pthread_mutex_unlock(&reported_lock);
	return first;
}

static void warn_unknown_env(void)
{
	for (char **ep = environ; ep && *ep; ep++) {
		const char *v = *ep;
		const char *eq = strchr(v, '=');
		char name[64];
		size_t n;

		if (strncmp(v, "RDMAPS_", 7) || !eq || env_is_harness(v))
			continue;
		n = (size_t)(eq - v) - 7;
		if (n < sizeof(name)) {
			for (size_t i = 0; i < n; i++)
				name[i] = (char)tolower((unsigned char)v[7 + i]);
			name[n] = '\0';
			if (rps_cfg_entry_find(name))
				continue;
		} else {
			name[0] = '\0';
		}
		if (!first_report(v, (size_t)(eq - v)))
			continue;
		const char *near = name[0] ? rps_cfg_closest_name(name) : NULL;

		if (near) {
			char suggest[80];

			rps_cfg_env_name(rps_cfg_entry_find(near), suggest, sizeof(suggest));
			RPS_WARN("unknown variable %.*s ignored (did you mean %s?)", (int)(eq - v),
				 v, suggest);
		} else {
			RPS_WARN("unknown variable %.*s ignored (not an rdmaps setting; --config "
				 "lists them)",
				 (int)(eq - v), v);
		}
	}
}

int rps_config_init(struct rps_config *cfg)
{
	int rc = 0;

	rps_cfg_rules_check();
	memset(cfg, 0, sizeof(*cfg));
	for (const struct rps_config_entry *e = rps_config_table; e->name; e++)
		rps_cfg_set_default(cfg, e);
	for (const struct rps_config_entry *e = rps_config_table; e->name; e++) {
		char var[80], seen[RPS_STR_MAX + 96];
		const char *v;

		rps_cfg_env_name(e, var, sizeof(var));
		v = getenv(var);
		if (!v || !rps_cfg_set_entry(cfg, e, v, var, '=', 1))
			continue;
		/* bad: the default stays; say why, once per process */
		snprintf(seen, sizeof(seen), "%s=%s", var, v);
		if (first_report(seen, strlen(seen)))
			rps_cfg_set_entry(cfg, e, v, var, '=', 0);
		rc = -EINVAL;
	}
	rps_log_set_level(rps_log_level_parse(cfg->log_level));
	warn_unknown_env();
	if (rps_cfg_token_apply(cfg))
		rc = -EINVAL;
	return rc;
}

static int is_bool_word(const char *s)
{
	int b;

	return rps_cfg_parse_bool(s, &b) == 0;
}

int rps_config_wants_help(int argc, char *const *argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return 1;
	}
	return 0;
}

int rps_config_parse_args(struct rps_config *cfg, int *argc_p, char **argv, int *dump_p)
{
	struct rps_config tmp = *cfg;
	int argc = *argc_p, nkeep = 0, dump = 0, level_set = 0;
	char **keep;
	int i;

	keep = rps_malloc(sizeof(*keep) * ((size_t)argc + 1));
	if (!keep) {
		RPS_ERR("parse flags: out of memory");
		return -ENOMEM;
	}
	if (argc > 0)
		keep[nkeep++] = argv[0];
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const struct rps_config_entry *e;
		const char *name, *eq, *value;
		char origin[80];
		size_t len;

		if (!strcmp(a, "--")) {
			while (i < argc)
				keep[nkeep++] = argv[i++];
			break;
		}
		if (strncmp(a, "--", 2) || !strcmp(a, "--help")) {
			keep[nkeep++] = argv[i];
			continue;
		}
		if (!strcmp(a, "--config")) {
			dump = 1;
			continue;
		}
		name = a + 2;
		eq = strchr(name, '=');
		len = eq ? (size_t)(eq - name) : strlen(name);
		e = rps_cfg_entry_find_loose(name, len);
		if (!e) {
			char lname[64];
			const char *near = NULL;

			if (len < sizeof(lname)) {
				for (size_t k = 0; k < len; k++)
					lname[k] = name[k] == '-' ? '_' : name[k];
				lname[len] = '\0';
				near = rps_cfg_closest_name(lname);
			}
			if (near) {
				rps_cfg_flag_name(rps_cfg_entry_find(near), origin, sizeof(origin));
				RPS_ERR("unknown flag --%.*s (did you mean %s?)", (int)len, name,
					origin);
			} else {
				RPS_ERR("unknown flag --%.*s (--help lists the flags)", (int)len,
					name);
			}
			goto err_free_keep;
		}
		rps_cfg_flag_name(e, origin, sizeof(origin));
		if (eq) {
			value = eq + 1;
		} else if (e->type == RPS_CFG_BOOL) {
			value = "1";
			if (i + 1 < argc && is_bool_word(argv[i + 1]))
				value = argv[++i];
		} else if (i + 1 < argc) {
			value = argv[++i];
		} else {
			RPS_ERR("flag %s needs a value", origin);
			goto err_free_keep;
		}
		if (rps_cfg_set_entry(&tmp, e, value, origin, eq ? '=' : ' ', 0))
			goto err_free_keep;
		if (!strcmp(e->name, "log_level"))
			level_set = 1;
	}
	if (rps_cfg_token_apply(&tmp))
		goto err_free_keep;
	for (int k = 0; k < nkeep; k++)
		argv[k] = keep[k];
	argv[nkeep] = NULL;
	*argc_p = nkeep;
	*cfg = tmp;
	if (dump && dump_p)
		*dump_p = 1;
	if (level_set)
		rps_log_set_level(rps_log_level_parse(cfg->log_level));
	rps_free(keep);
	return 0;

err_free_keep:
	rps_free(keep);
	return -EINVAL;
}
