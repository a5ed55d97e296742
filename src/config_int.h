/* Internal to the configuration files (src/config_*.c): the validation rules
 * and the helpers they share. Nothing outside src/config_*.c includes this. */
#ifndef RPS_CONFIG_INT_H
#define RPS_CONFIG_INT_H

#include "src/config.h"

/* Validation beyond the type, per setting. Settings not listed: INT >= 0,
 * U64 any, DOUBLE >= 0 and finite, STRING any that fits. */
struct rps_cfg_rule {
	const char *name;
	long long imin, imax;	   /* INT */
	uint64_t umin, umax, umul; /* U64: range, and a multiple of umul if set */
	double dmin, dmax;	   /* DOUBLE: [dmin, dmax]; open ends with dmin_open/dmax_open */
	int dmin_open, dmax_open;
	const char *choices; /* STRING: "a|b|c"; a leading '|' allows "" */
	int (*check)(const char *v, const char **why_p); /* STRING syntax */
};

/* config_table.c */
const struct rps_cfg_rule *rps_cfg_rule_for(const char *name);
const struct rps_config_entry *rps_cfg_entry_find(const char *name);
/* "shard-bytes" or "shard_bytes" -> the entry; NULL if unknown. */
const struct rps_config_entry *rps_cfg_entry_find_loose(const char *name, size_t len);
int rps_cfg_is_secret(const struct rps_config_entry *e);
int rps_cfg_is_size(const struct rps_config_entry *e);
/* The closest known name, if close enough to be a typo; else NULL. */
const char *rps_cfg_closest_name(const char *name);
/* Debug builds: assert every rule names a setting of the table. */
void rps_cfg_rules_check(void);

/* config_value.c */
int rps_cfg_check_hostport(const char *v, const char **why_p);
int rps_cfg_check_cores(const char *v, const char **why_p);
int rps_cfg_check_init(const char *v, const char **why_p);
int rps_cfg_check_secret(const char *v, const char **why_p);
/* config_token.c (issue 20): RDMAPS_TOKEN */
int rps_cfg_check_token(const char *v, const char **why_p);
/* A token set: it becomes the credential (secret) and gives the rank; a
 * secret beside it, or a rank or role it is not for: an error (the token
 * wins). 0 or -EINVAL. */
int rps_cfg_token_apply(struct rps_config *cfg);
int rps_cfg_parse_bool(const char *v, int *out_p);
/* Parse and validate value for e and store it in cfg; origin names the source
 * in the one error message ("RDMAPS_PORT", "--port", "port"); quiet: none. */
int rps_cfg_set_entry(struct rps_config *cfg, const struct rps_config_entry *e, const char *value,
		      const char *origin, char sep, int quiet);
void rps_cfg_set_default(struct rps_config *cfg, const struct rps_config_entry *e);
void rps_cfg_format_value(const struct rps_config *cfg, const struct rps_config_entry *e,
			  char *buf, size_t len);
int rps_cfg_entry_equal(const struct rps_config_entry *e, const struct rps_config *a,
			const struct rps_config *b);

/* config_env.c */
void rps_cfg_env_name(const struct rps_config_entry *e, char *buf, size_t len);
void rps_cfg_flag_name(const struct rps_config_entry *e, char *buf, size_t len);

#endif
