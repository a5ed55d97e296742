/* A shard's row table: lazy rows hold rps_row_init(seed, id), are found
 * again after the index grew many times, never move, and their versions
 * are even and equal at both ends outside a write. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <rdmaps/table.h>

#include "server/rowtab.h"
#include "src/rowinit.h"

static void test_lazy_rows(void **state)
{
	struct rps_rowtab rt;
	float want[16];
	int created;
	int64_t s;

	(void)state;
	assert_int_equal(rps_rowtab_init(&rt, 3, 0, 0, 0, 0, RPS_OPT_SGD, 0), -EINVAL);
	assert_int_equal(rps_rowtab_init(&rt, 3, 16, RPS_TABLE_INIT_NORMAL, 0.5f, 77, RPS_OPT_ADAM,
					 0),
			 0);
	assert_int_equal(rps_rowtab_find(&rt, 42), -1);
	s = rps_rowtab_get(&rt, 42, &created);
	assert_true(s >= 0);
	assert_true(created);
	rps_row_init(RPS_TABLE_INIT_NORMAL, 0.5f, 77, 42, 16, want);
	assert_memory_equal(rps_rowtab_data(&rt, (uint64_t)s), want, sizeof(want));
	assert_int_equal(rps_rowtab_get(&rt, 42, &created), s);
	assert_false(created);
	assert_non_null(rps_rowtab_m(&rt, (uint64_t)s));
	assert_non_null(rps_rowtab_v(&rt, (uint64_t)s));
	assert_int_equal(rt.nrows, 1);
	rps_rowtab_fini(&rt);
}

static void test_growth(void **state)
{
	struct rps_rowtab rt;
	const uint64_t n = 200000;
	float *first;

	(void)state;
	assert_int_equal(rps_rowtab_init(&rt, 1, 4, RPS_TABLE_INIT_UNIFORM, 1, 5, RPS_OPT_SGD, 0),
			 0);
	assert_int_equal(rps_rowtab_get(&rt, rps_mix64(0), NULL), 0);
	first = rps_rowtab_data(&rt, 0);
	for (uint64_t i = 1; i < n; i++)
		assert_int_equal(rps_rowtab_get(&rt, rps_mix64(i), NULL), (int64_t)i);
	assert_true(rt.rehashes > 5);
	assert_ptr_equal(rps_rowtab_data(&rt, 0), first); /* rows never move */
	for (uint64_t i = 0; i < n; i++) {
		int64_t s = rps_rowtab_find(&rt, rps_mix64(i));

		assert_int_equal(s, (int64_t)i);
		assert_int_equal(rps_rowtab_slot_id(&rt, (uint64_t)s), rps_mix64(i));
	}
	assert_int_equal(rps_rowtab_find(&rt, 12345), -1);
	rps_rowtab_fini(&rt);
}

static void test_versions(void **state)
{
	struct rps_rowtab rt;
	const char *slot;
	uint32_t b, e;

	(void)state;
	assert_int_equal(rps_rowtab_init(&rt, 1, 3, RPS_TABLE_INIT_ZERO, 0, 0, RPS_OPT_SGD, 10), 0);
	assert_int_equal(rps_rowtab_get(&rt, 9, NULL), 0);
	slot = rps_rowtab_slot(&rt, 0);
	assert_int_equal(rt.slot_bytes, 32); /* dim 3: 16 + 12 rounded up to 8 */
	assert_int_equal(rps_rowtab_slot_id(&rt, 0), 9);
	rps_rowtab_write_begin(&rt, 0);
	memcpy(&b, slot + 8, 4);
	memcpy(&e, slot + rt.slot_bytes - 4, 4);
	assert_int_equal(b, 1);
	assert_int_equal(e, 1);
	rps_rowtab_data(&rt, 0)[0] = 1.0f;
	rps_rowtab_write_end(&rt, 0);
	memcpy(&b, slot + 8, 4);
	memcpy(&e, slot + rt.slot_bytes - 4, 4);
	assert_int_equal(b, 2);
	assert_int_equal(e, 2);
	{
		float v[3] = {4, 5, 6};

		assert_int_equal(rps_rowtab_put(&rt, 9, v), 0); /* restore over it */
		assert_memory_equal(rps_rowtab_data(&rt, 0), v, sizeof(v));
		assert_int_equal(rps_rowtab_put(&rt, 10, v), 1);
	}
	rps_rowtab_fini(&rt);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lazy_rows),
		cmocka_unit_test(test_growth),
		cmocka_unit_test(test_versions),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
