/* Tables in a model export: names of the arrays and the reader
 * (include/rdmaps/table.h, rps_table_export_read). */
#include "src/table_export.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmaps/table.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/npz.h"

int rps_table_export_name(const char *name, uint32_t *table_p, int *rows_p)
{
	uint64_t t = 0;
	const char *p = name;
	int rows;

	if (strncmp(p, "table", 5))
		return 0;
	p += 5;
	if (*p < '0' || *p > '9' || (*p == '0' && p[1] != '.'))
		return 0;
	while (*p >= '0' && *p <= '9') {
		t = t * 10 + (uint64_t)(*p++ - '0');
		if (t > UINT32_MAX)
			return 0;
	}
	if (!strcmp(p, ".ids"))
		rows = 0;
	else if (!strcmp(p, ".rows"))
		rows = 1;
	else
		return 0;
	if (table_p)
		*table_p = (uint32_t)t;
	if (rows_p)
		*rows_p = rows;
	return 1;
}

void rps_table_export_names(uint32_t t, char *ids, char *rows, size_t len)
{
	snprintf(ids, len, "table%" PRIu32 ".ids", t);
	snprintf(rows, len, "table%" PRIu32 ".rows", t);
}

/* The two arrays of table t checked against each other: 0 or -EINVAL with
 * the reason logged. */
static int check_pair(const char *path, uint32_t t, const struct rps_npz_entry *ie,
		      const struct rps_npz_entry *re)
{
	const char *why = NULL;

	if (!ie->u64 || ie->ndim != 1)
		why = "ids is not a 1-D uint64 array";
	else if (re->u64 || re->ndim != 2 || !re->shape[1] || re->shape[1] > RPS_TABLE_MAX_DIM)
		why = "rows is not a 2-D float32 array of 1..4096 columns";
	else if (re->shape[0] != ie->shape[0])
		why = "ids and rows have different lengths";
	for (size_t i = 1; !why && i < ie->nelems; i++)
		if (ie->u64[i] <= ie->u64[i - 1])
			why = "ids are not strictly ascending";
	if (!why)
		return 0;
	RPS_ERR("%s: table %" PRIu32 ": %s (not an rdmaps export's table)", path, t, why);
	return -EINVAL;
}

int rps_table_export_read(const char *path, rps_table_t table, struct rps_table_export *x)
{
	struct rps_npz_entry *e = NULL;
	struct rps_npz_entry *ie, *re;
	char in[40], rn[40];
	size_t ne = 0;
	int rc;

	if (!path || !x)
		return -EINVAL;
	memset(x, 0, sizeof(*x));
	rc = rps_npz_read(path, &e, &ne);
	if (rc)
		return rc;
	rps_table_export_names(table, in, rn, sizeof(in));
	ie = (struct rps_npz_entry *)rps_npz_find(e, ne, in);
	re = (struct rps_npz_entry *)rps_npz_find(e, ne, rn);
	if (!ie || !re) {
		RPS_ERR("%s: no table %" PRIu32 " (arrays %s and %s)", path, table, in, rn);
		rc = -ENOENT;
	} else {
		rc = check_pair(path, table, ie, re);
	}
	if (!rc) {
		x->table = table;
		x->dim = (uint32_t)re->shape[1];
		x->nrows = ie->nelems;
		x->ids = ie->u64; /* taken: the entries no longer own them */
		x->rows = re->data;
		ie->u64 = NULL;
		re->data = NULL;
	}
	rps_npz_free(e, ne);
	return rc;
}

void rps_table_export_free(struct rps_table_export *x)
{
	if (!x)
		return;
	rps_free(x->ids);
	rps_free(x->rows);
	memset(x, 0, sizeof(*x));
}
