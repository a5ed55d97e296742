/* The public configuration object (include/rdmaps/config.h): create, destroy
 * and the typed getters by name. */
#include "src/config_int.h"

#include <errno.h>
#include <string.h>

#include "src/alloc.h"

int rps_config_create(struct rps_config **cfg_p)
{
	struct rps_config *cfg;
	int rc;

	*cfg_p = NULL;
	cfg = rps_malloc(sizeof(*cfg));
	if (!cfg)
		return -ENOMEM;
	rc = rps_config_init(cfg); /* a bad variable was logged there */
	if (rc) {
		rps_free(cfg);
		return rc;
	}
	*cfg_p = cfg;
	return 0;
}

void rps_config_destroy(struct rps_config *cfg)
{
	rps_free(cfg);
}

/* The entry of name, of one of the two types; -ENOENT, -EINVAL (other type). */
static int entry_typed(const char *name, enum rps_config_type t1, enum rps_config_type t2,
		       const struct rps_config_entry **e_p)
{
	const struct rps_config_entry *e = rps_cfg_entry_find_loose(name, strlen(name));

	if (!e)
		return -ENOENT;
	if (e->type != t1 && e->type != t2)
		return -EINVAL;
	*e_p = e;
	return 0;
}

#define FIELD_OF(cfg, e) ((const char *)(cfg) + (e)->offset)

int rps_config_get_str(const struct rps_config *cfg, const char *name, const char **value_p)
{
	const struct rps_config_entry *e;
	int rc = entry_typed(name, RPS_CFG_STRING, RPS_CFG_STRING, &e);

	if (!rc)
		*value_p = FIELD_OF(cfg, e);
	return rc;
}

int rps_config_get_int(const struct rps_config *cfg, const char *name, int *value_p)
{
	const struct rps_config_entry *e;
	int rc = entry_typed(name, RPS_CFG_INT, RPS_CFG_BOOL, &e);

	if (!rc)
		memcpy(value_p, FIELD_OF(cfg, e), sizeof(int));
	return rc;
}

int rps_config_get_u64(const struct rps_config *cfg, const char *name, uint64_t *value_p)
{
	const struct rps_config_entry *e;
	int rc = entry_typed(name, RPS_CFG_U64, RPS_CFG_U64, &e);

	if (!rc)
		memcpy(value_p, FIELD_OF(cfg, e), sizeof(uint64_t));
	return rc;
}

int rps_config_get_double(const struct rps_config *cfg, const char *name, double *value_p)
{
	const struct rps_config_entry *e;
	int rc = entry_typed(name, RPS_CFG_DOUBLE, RPS_CFG_DOUBLE, &e);

	if (!rc)
		memcpy(value_p, FIELD_OF(cfg, e), sizeof(double));
	return rc;
}
