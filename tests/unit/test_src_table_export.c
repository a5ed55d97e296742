/* src/table_export.c and src/npz.c's uint64 arrays: a model export's tables
 * (docs/tables.md, Export) written, read back by rps_table_export_read and by
 * numpy, and refused when their arrays do not match. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <rdmaps/model.h>
#include <rdmaps/table.h>

#include "src/npz.h"
#include "src/table_export.h"

static char dir[] = "/tmp/rps-texp-XXXXXX";

static int setup(void **st)
{
	(void)st;
	assert_non_null(mkdtemp(dir));
	return 0;
}

static int teardown(void **st)
{
	char cmd[128];

	(void)st;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

/* key "3" (4 floats), table 7 (3 rows of 2: ids ascending unless bad) */
static uint64_t ids[3] = {5, 1ull << 63, UINT64_MAX};
static float rows[6] = {1.5f, -2, 3, 4, 5, 6.25f};
static float key3[4] = {1, 2, 3, 4};

static void make(struct rps_npz_entry e[3])
{
	memset(e, 0, 3 * sizeof(*e));
	strcpy(e[0].name, "3");
	e[0].ndim = 1;
	e[0].shape[0] = 4;
	e[0].nelems = 4;
	e[0].data = key3;
	rps_table_export_names(7, e[1].name, e[2].name, sizeof(e[1].name));
	e[1].ndim = 1;
	e[1].shape[0] = 3;
	e[1].nelems = 3;
	e[1].u64 = ids;
	e[2].ndim = 2;
	e[2].shape[0] = 3;
	e[2].shape[1] = 2;
	e[2].nelems = 6;
	e[2].data = rows;
}

static void test_names(void **st)
{
	uint32_t t = 0;
	int r = -1;

	(void)st;
	assert_int_equal(rps_table_export_name("table7.ids", &t, &r), 1);
	assert_int_equal(t, 7);
	assert_int_equal(r, 0);
	assert_int_equal(rps_table_export_name("table4294967295.rows", &t, &r), 1);
	assert_int_equal(t, UINT32_MAX);
	assert_int_equal(r, 1);
	assert_int_equal(rps_table_export_name("table0.rows", &t, NULL), 1);
	assert_int_equal(rps_table_export_name("table4294967296.rows", NULL, NULL), 0);
	assert_int_equal(rps_table_export_name("table07.ids", NULL, NULL), 0);
	assert_int_equal(rps_table_export_name("table.ids", NULL, NULL), 0);
	assert_int_equal(rps_table_export_name("table7.idsx", NULL, NULL), 0);
	assert_int_equal(rps_table_export_name("7", NULL, NULL), 0);
}

static void test_round_trip(void **st)
{
	struct rps_npz_entry e[3];
	struct rps_table_export x;
	char path[256], cmd[1024];
	rps_key_t k = 3;
	size_t len = 4;
	float v[4];

	(void)st;
	make(e);
	snprintf(path, sizeof(path), "%s/m.npz", dir);
	assert_int_equal(rps_npz_write(path, e, 3), 0);
	assert_int_equal(rps_table_export_read(path, 7, &x), 0);
	assert_int_equal(x.table, 7);
	assert_int_equal(x.dim, 2);
	assert_int_equal(x.nrows, 3);
	assert_memory_equal(x.ids, ids, sizeof(ids));
	assert_memory_equal(x.rows, rows, sizeof(rows));
	rps_table_export_free(&x);
	assert_null(x.ids);
	assert_int_equal(rps_table_export_read(path, 8, &x), -ENOENT);
	assert_int_equal(rps_table_export_read(NULL, 7, &x), -EINVAL);
	/* the dense key loads from the same file: the table arrays are not keys */
	assert_int_equal(rps_model_load(path, &k, &len, 1, v), 0);
	assert_memory_equal(v, key3, sizeof(v));
	/* numpy reads the same: uint64 ids (the largest exactly), float32 rows */
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 -c \"import numpy as np; m = np.load('%s'); "
		 "i = m['table7.ids']; r = m['table7.rows']; "
		 "assert i.dtype == np.uint64 and list(i) == [5, 2**63, 2**64 - 1], i; "
		 "assert r.dtype == np.float32 and r.shape == (3, 2) and r[0, 0] == 1.5 "
		 "and r[2, 1] == 6.25, r\"",
		 path);
	assert_int_equal(system(cmd), 0);
}

static void test_refused(void **st)
{
	struct rps_npz_entry e[3];
	struct rps_table_export x;
	char path[256];
	uint64_t bad_ids[3] = {5, 5, 9};

	(void)st;
	snprintf(path, sizeof(path), "%s/bad.npz", dir);
	make(e);
	e[1].u64 = bad_ids; /* not strictly ascending */
	assert_int_equal(rps_npz_write(path, e, 3), 0);
	assert_int_equal(rps_table_export_read(path, 7, &x), -EINVAL);
	make(e);
	e[2].shape[0] = 2; /* rows 2 x 3: not as many as ids */
	e[2].shape[1] = 3;
	assert_int_equal(rps_npz_write(path, e, 3), 0);
	assert_int_equal(rps_table_export_read(path, 7, &x), -EINVAL);
	make(e);
	e[1].u64 = NULL; /* ids as float32 */
	e[1].data = rows;
	assert_int_equal(rps_npz_write(path, e, 3), 0);
	assert_int_equal(rps_table_export_read(path, 7, &x), -EINVAL);
	make(e);
	e[1].u64 = NULL; /* neither values */
	assert_int_equal(rps_npz_write(path, e, 3), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names),
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
