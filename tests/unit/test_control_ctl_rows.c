/* control/ctl_rows.c: rdmaps-ctl export's table rows. Pieces from several
 * shards become one table sorted by id; a short, malformed or out-of-order
 * piece, a shard that stops short of its rows, fewer rows than the servers
 * announced, or an id from two shards are refused (nothing written). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "control/ctl_rows.h"
#include "src/proto.h"

#define DIM 2

/* One ROWS frame: rows [first, first + count) of shard's `total`, ids given. */
static size_t frame(char *buf, uint32_t shard, uint64_t total, uint64_t first, uint32_t count,
		    const uint64_t *ids)
{
	struct rps_export_rows h;

	memset(&h, 0, sizeof(h));
	h.table = 4;
	h.shard = shard;
	h.dim = DIM;
	h.total = total;
	h.first = first;
	h.count = count;
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), ids, count * 8);
	for (uint32_t i = 0; i < count; i++) {
		float v[DIM] = {(float)ids[i], -(float)ids[i]};

		memcpy(buf + sizeof(h) + count * 8 + i * sizeof(v), v, sizeof(v));
	}
	return sizeof(h) + count * (8 + sizeof(float) * DIM);
}

static void test_assemble(void **state)
{
	struct ctl_rows c;
	struct rps_npz_entry *e = NULL;
	size_t n = 0, len;
	char buf[1024], why[200];
	uint64_t a[3] = {30, 10, 20}, b[2] = {25, 5};

	(void)state;
	memset(&c, 0, sizeof(c));
	len = frame(buf, 0, 3, 0, 2, a);
	assert_int_equal(rps_ctl_rows_add(&c, buf, len, why, sizeof(why)), 0);
	len = frame(buf, 0, 3, 2, 1, a + 2);
	assert_int_equal(rps_ctl_rows_add(&c, buf, len, why, sizeof(why)), 0);
	len = frame(buf, 1, 2, 0, 2, b);
	assert_int_equal(rps_ctl_rows_add(&c, buf, len, why, sizeof(why)), 0);
	assert_int_equal(rps_ctl_rows_entries(&c, 4, &e, &n), -EPROTO); /* 5 came */
	assert_int_equal(rps_ctl_rows_entries(&c, 5, &e, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(e[0].name, "table4.ids");
	assert_string_equal(e[1].name, "table4.rows");
	assert_int_equal(e[0].nelems, 5);
	assert_int_equal(e[1].shape[0], 5);
	assert_int_equal(e[1].shape[1], DIM);
	for (int i = 0; i < 5; i++) {
		if (i)
			assert_true(e[0].u64[i] > e[0].u64[i - 1]);
		assert_true(e[1].data[i * DIM] == (float)e[0].u64[i]);
		assert_true(e[1].data[i * DIM + 1] == -(float)e[0].u64[i]);
	}
	assert_int_equal(e[0].u64[0], 5);
	assert_int_equal(e[0].u64[1], 10);
	assert_int_equal(e[0].u64[2], 20);
	assert_int_equal(e[0].u64[3], 25);
	assert_int_equal(e[0].u64[4], 30);
	rps_npz_free(e, n);
	rps_ctl_rows_free(&c);
}

static void test_refused(void **state)
{
	struct ctl_rows c;
	struct rps_npz_entry *e = NULL;
	size_t n = 0, len;
	char buf[1024] = {0}, why[200];
	uint64_t a[3] = {1, 2, 3};

	(void)state;
	memset(&c, 0, sizeof(c));
	assert_int_equal(rps_ctl_rows_add(&c, buf, 10, why, sizeof(why)), -EPROTO); /* short */
	len = frame(buf, 0, 3, 1, 1, a); /* a piece without its start */
	assert_int_equal(rps_ctl_rows_add(&c, buf, len, why, sizeof(why)), -EPROTO);
	len = frame(buf, 0, 3, 0, 2, a);
	assert_int_equal(rps_ctl_rows_add(&c, buf, len - 4, why, sizeof(why)), -EPROTO);
	assert_int_equal(rps_ctl_rows_add(&c, buf, len, why, sizeof(why)), 0);
	len = frame(buf, 0, 3, 0, 1, a); /* again from 0: out of order */
	assert_int_equal(rps_ctl_rows_add(&c, buf, len, why, sizeof(why)), -EPROTO);
	len = frame(buf, 0, 2, 2, 0, a); /* total changed */
	assert_int_equal(rps_ctl_rows_add(&c, buf, len, why, sizeof(why)), -EPROTO);
	/* shard 0 stops at 2 of its 3 rows */
	assert_int_equal(rps_ctl_rows_entries(&c, 2, &e, &n), -EPROTO);
	rps_npz_free(e, n);
	rps_ctl_rows_free(&c);
	/* the same id from two shards */
	memset(&c, 0, sizeof(c));
	e = NULL;
	n = 0;
	len = frame(buf, 0, 1, 0, 1, a);
	assert_int_equal(rps_ctl_rows_add(&c, buf, len, why, sizeof(why)), 0);
	len = frame(buf, 1, 1, 0, 1, a);
	assert_int_equal(rps_ctl_rows_add(&c, buf, len, why, sizeof(why)), 0);
	assert_int_equal(rps_ctl_rows_entries(&c, 2, &e, &n), -EPROTO);
	rps_npz_free(e, n);
	rps_ctl_rows_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_assemble),
	    cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
