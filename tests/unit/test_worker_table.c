/* Sparse tables, the worker's side without network: specs are checked,
 * bad calls are refused before anything is sent (no piece allocated), a
 * batch becomes one frame per shard with duplicates folded. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <rdmaps/table.h>

#include "src/keymap.h"
#include "src/rowinit.h"
#include "worker/table.h"
#include "worker/worker_int.h"

static struct rps_worker *w;
static float out[64 * 1024];

static int setup(void **state)
{
	struct rps_keymap km;
	struct rps_table_spec s;

	(void)state;
	assert_int_equal(rps_keymap_init(&km, RPS_KEYMAP_HASH, 2, 2, 0, 1000), 0);
	assert_int_equal(rps_worker_create_offline(&km, &w), 0);
	rps_table_spec_init(&s);
	s.dim = 4;
	s.field_mask = RPS_TABLE_SPEC_DIM;
	assert_int_equal(rps_wtable_resolve(&s, &s), 0);
	assert_int_equal(rps_wtable_add(w, 1, &s), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rps_worker_destroy(w);
	w = NULL;
	return 0;
}

static uint64_t pieces_total(void)
{
	uint64_t n;

	pthread_mutex_lock(&w->core.lock);
	n = w->core.pieces_total;
	pthread_mutex_unlock(&w->core.lock);
	return n;
}

static void test_spec(void **state)
{
	struct rps_table_spec s, r;

	(void)state;
	rps_table_spec_init(&s);
	assert_int_equal(rps_wtable_resolve(&s, &r), -EINVAL); /* dim not set */
	s.field_mask = RPS_TABLE_SPEC_DIM;
	assert_int_equal(rps_wtable_resolve(&s, &r), -EINVAL); /* dim 0 */
	s.dim = 4097;
	assert_int_equal(rps_wtable_resolve(&s, &r), -EINVAL);
	s.dim = 64;
	assert_int_equal(rps_wtable_resolve(&s, &r), 0);
	assert_int_equal(r.precision, RPS_TABLE_FP32);
	assert_int_equal(r.init, RPS_TABLE_INIT_UNIFORM);
	s.field_mask |= 1ull << 40;
	assert_int_equal(rps_wtable_resolve(&s, &r), -EINVAL); /* unknown bit */
	s.field_mask = RPS_TABLE_SPEC_DIM | RPS_TABLE_SPEC_PRECISION;
	s.precision = RPS_TABLE_FP16;
	assert_int_equal(rps_wtable_resolve(&s, &r), 0);
	assert_int_equal(r.precision, RPS_TABLE_FP16);
	s.precision = RPS_TABLE_BF16;
	assert_int_equal(rps_wtable_resolve(&s, &r), 0);
	assert_int_equal(r.precision, RPS_TABLE_BF16);
	s.precision = 9;
	assert_int_equal(rps_wtable_resolve(&s, &r), -EINVAL);
	s.precision = 0;
	s.field_mask |= RPS_TABLE_SPEC_INIT | RPS_TABLE_SPEC_INIT_SCALE;
	s.init = 3;
	assert_int_equal(rps_wtable_resolve(&s, &r), -EINVAL);
	s.init = RPS_TABLE_INIT_NORMAL;
	s.init_scale = NAN;
	assert_int_equal(rps_wtable_resolve(&s, &r), -EINVAL);
	s.init_scale = -1;
	assert_int_equal(rps_wtable_resolve(&s, &r), -EINVAL);
	s.init_scale = 0.1f;
	s.field_mask |= RPS_TABLE_SPEC_OPTIM;
	s.optim.lr = 0;
	assert_int_equal(rps_wtable_resolve(&s, &r), -EINVAL);
	s.optim.lr = 0.1f;
	assert_int_equal(rps_wtable_resolve(&s, &r), 0);
	assert_int_equal(rps_worker_declare_table(NULL, 1, &s), -EINVAL);
	assert_int_equal(rps_worker_declare_table(w, 1, NULL), -EINVAL);
	s.dim = 8; /* table 1 is declared with dim 4 here */
	assert_int_equal(rps_worker_declare_table(w, 1, &s), -EEXIST);
	assert_int_equal(rps_worker_table_dim(w, 1), 4);
	assert_int_equal(rps_worker_table_dim(w, 2), 0);
}

/* rps_table_initial_row: the servers' formula (src/rowinit.c) behind the
 * public API, checked against values worked out by hand, and refused input. */
static void test_initial_row(void **state)
{
	struct rps_table_spec s;
	float a[8], b[8], z[3] = {1, 1, 1};

	(void)state;
	rps_table_spec_init(&s);
	s.dim = 8;
	s.init = RPS_TABLE_INIT_UNIFORM;
	s.init_scale = 0.5f;
	s.seed = 42;
	assert_int_equal(rps_table_initial_row(&s, 7, a), 0);
	rps_row_init(RPS_TABLE_INIT_UNIFORM, 0.5f, 42, 7, 8, b);
	assert_memory_equal(a, b, sizeof(a));
	for (int e = 0; e < 8; e++)
		assert_true(a[e] >= -0.5f && a[e] <= 0.5f);
	/* another id or seed gives another row */
	assert_int_equal(rps_table_initial_row(&s, 8, b), 0);
	assert_memory_not_equal(a, b, sizeof(a));
	s.seed = 43;
	assert_int_equal(rps_table_initial_row(&s, 7, b), 0);
	assert_memory_not_equal(a, b, sizeof(a));
	/* zero init, dim 3 */
	rps_table_spec_init(&s);
	s.dim = 3;
	s.init = RPS_TABLE_INIT_ZERO;
	assert_int_equal(rps_table_initial_row(&s, 1, z), 0);
	assert_true(z[0] == 0.0f && z[1] == 0.0f && z[2] == 0.0f);
	/* refused */
	assert_int_equal(rps_table_initial_row(NULL, 1, z), -EINVAL);
	assert_int_equal(rps_table_initial_row(&s, 1, NULL), -EINVAL);
	s.init = 9;
	assert_int_equal(rps_table_initial_row(&s, 1, z), -EINVAL);
	s.init = RPS_TABLE_INIT_ZERO;
	s.dim = 0;
	assert_int_equal(rps_table_initial_row(&s, 1, z), -EINVAL);
}

static void cb(int status, void *arg)
{
	(void)status;
	(void)arg;
}

static void test_bad_calls(void **state)
{
	uint64_t ids[3] = {1, 2, 3};
	uint64_t before = pieces_total();

	(void)state;
	assert_int_equal(rps_worker_pull_rows(w, 2, ids, 3, out), -ENOENT);
	assert_int_equal(rps_worker_push_rows(w, 2, ids, 3, out), -ENOENT);
	assert_int_equal(rps_worker_pull_rows_cb(w, 2, ids, 3, out, cb, NULL), -ENOENT);
	assert_int_equal(rps_worker_pull_rows(w, 1, ids, 0, out), -EINVAL);
	assert_int_equal(rps_worker_push_rows(w, 1, ids, 0, out), -EINVAL);
	assert_int_equal(rps_worker_pull_rows(w, 1, ids, RPS_TABLE_MAX_BATCH + 1ull, out), -EINVAL);
	assert_int_equal(rps_worker_pull_rows(w, 1, NULL, 3, out), -EINVAL);
	assert_int_equal(rps_worker_pull_rows(w, 1, ids, 3, NULL), -EINVAL);
	assert_int_equal(rps_worker_push_rows(w, 1, ids, 3, NULL), -EINVAL);
	assert_int_equal(rps_worker_pull_rows(NULL, 1, ids, 3, out), -EINVAL);
	assert_int_equal(rps_worker_pull_rows_cb(w, 1, ids, 3, out, NULL, NULL), -EINVAL);
	assert_int_equal(rps_worker_push_rows_cb(w, 1, ids, 3, out, NULL, NULL), -EINVAL);
	assert_int_equal(rps_worker_table_rows(w, 2, &before), -ENOENT);
	assert_int_equal(pieces_total(), before); /* nothing was sent */
}

/* A batch: one frame per shard touched, duplicates folded; offline, every
 * frame fails with -ENOTCONN. */
static void test_fanout(void **state)
{
	uint64_t ids[9] = {7, 7, 7, 7, 7, 7, 7, 7, 7};
	uint64_t before = pieces_total();
	uint64_t many[1000];
	int shards[4] = {0};
	int nshards = 0;

	(void)state;
	assert_int_equal(rps_worker_pull_rows(w, 1, ids, 9, out), -ENOTCONN);
	assert_int_equal(pieces_total() - before, 1);
	for (int i = 0; i < 1000; i++) {
		uint32_t s, sh;

		many[i] = (uint64_t)i * 0x9e3779b97f4a7c15ull;
		rps_row_route(1, many[i], 2, 2, &s, &sh);
		shards[s * 2 + sh] = 1;
	}
	for (int i = 0; i < 4; i++)
		nshards += shards[i];
	before = pieces_total();
	assert_int_equal(rps_worker_push_rows(w, 1, many, 1000, out), -ENOTCONN);
	assert_int_equal(pieces_total() - before, (uint64_t)nshards);
	assert_int_equal(nshards, 4);
	/* small frames: 64 floats an answer (16 rows of dim 4), 100 a push
	 * (408 bytes: 17 rows of id + 4 floats) */
	for (uint32_t i = 0; i < w->num_servers; i++) {
		w->servers[i].push_elems = 100;
		w->servers[i].pull_elems = 64;
	}
	before = pieces_total();
	assert_int_equal(rps_worker_pull_rows(w, 1, many, 1000, out), -ENOTCONN);
	assert_true(pieces_total() - before >= 1000 / 16);
	assert_true(pieces_total() - before <= 1000 / 16 + 4);
	before = pieces_total();
	assert_int_equal(rps_worker_push_rows(w, 1, many, 1000, out), -ENOTCONN);
	assert_true(pieces_total() - before >= 1000 / 17);
	assert_true(pieces_total() - before <= 1000 / 17 + 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_spec, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_calls, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fanout, setup, teardown),
	    cmocka_unit_test(test_initial_row),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
