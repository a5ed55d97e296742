/* rps_worker_register / rps_worker_unregister on an in-process worker
 * without network: argument errors, overlaps, unknown buffers, a buffer in
 * use (-EBUSY) and the table limit; a pull into a registered buffer holds
 * it only while the pull is in flight. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <rdmaps/worker.h>

#include "src/keymap.h"
#include "worker/worker_int.h"

static struct rps_worker *w;
static float buf[4096];

static int setup(void **state)
{
	struct rps_keymap km;

	(void)state;
	assert_int_equal(rps_keymap_init(&km, RPS_KEYMAP_HASH, 1, 2, 0, 1000), 0);
	assert_int_equal(rps_worker_create_offline(&km, &w), 0);
	assert_int_equal(rps_keytab_insert(&w->keys, rps_wkey_new(&w->km, 7, 100), NULL), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rps_worker_destroy(w);
	w = NULL;
	return 0;
}

static void test_args(void **state)
{
	(void)state;
	assert_int_equal(rps_worker_register(NULL, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(rps_worker_register(w, NULL, sizeof(buf)), -EINVAL);
	assert_int_equal(rps_worker_register(w, buf, 0), -EINVAL);
	assert_int_equal(rps_worker_register(w, (void *)(UINTPTR_MAX - 10), 100), -EINVAL);
	assert_int_equal(rps_worker_unregister(NULL, buf), -EINVAL);
	assert_int_equal(rps_worker_unregister(w, NULL), -EINVAL);
}

static void test_register_unregister(void **state)
{
	(void)state;
	assert_int_equal(rps_worker_unregister(w, buf), -ENOENT);
	assert_int_equal(rps_worker_register(w, buf, 1024 * sizeof(float)), 0);
	/* the same, or overlapping it at either end: -EEXIST */
	assert_int_equal(rps_worker_register(w, buf, 1024 * sizeof(float)), -EEXIST);
	assert_int_equal(rps_worker_register(w, buf + 1023, 8), -EEXIST);
	assert_int_equal(rps_worker_register(w, (char *)buf - 4, 8), -EEXIST);
	/* adjacent is fine */
	assert_int_equal(rps_worker_register(w, buf + 1024, 1024 * sizeof(float)), 0);
	/* unregister takes the address it was registered with */
	assert_int_equal(rps_worker_unregister(w, buf + 1), -ENOENT);
	assert_int_equal(rps_worker_unregister(w, buf), 0);
	assert_int_equal(rps_worker_unregister(w, buf), -ENOENT);
	assert_int_equal(rps_worker_unregister(w, buf + 1024), 0);
	/* registered again after it went */
	assert_int_equal(rps_worker_register(w, buf, sizeof(buf)), 0);
	assert_int_equal(rps_worker_unregister(w, buf), 0);
}

static void test_lookup_and_busy(void **state)
{
	struct rps_wreg *g;

	(void)state;
	assert_int_equal(rps_worker_register(w, buf, 1024 * sizeof(float)), 0);
	/* covering lookups find it; ranges that leave it do not */
	g = rps_wreg_get(w, buf + 10, 100 * sizeof(float));
	assert_non_null(g);
	assert_null(rps_wreg_get(w, buf + 1000, 100 * sizeof(float)));
	assert_null(rps_wreg_get(w, buf + 2000, 4));
	/* in use: -EBUSY, and it stays registered */
	assert_int_equal(rps_worker_unregister(w, buf), -EBUSY);
	assert_ptr_equal(rps_wreg_get(w, buf, 4), g);
	rps_wreg_put(g);
	assert_int_equal(rps_worker_unregister(w, buf), -EBUSY);
	rps_wreg_put(g);
	assert_int_equal(rps_worker_unregister(w, buf), 0);
	assert_null(rps_wreg_get(w, buf, 4));
}

static void test_full(void **state)
{
	static char mem[RPS_WREG_MAX + 1][64];
	struct rps_wreg *g;

	(void)state;
	for (int i = 0; i < RPS_WREG_MAX; i++)
		assert_int_equal(rps_worker_register(w, mem[i], sizeof(mem[i])), 0);
	assert_int_equal(rps_worker_register(w, mem[RPS_WREG_MAX], 64), -ENOSPC);
	assert_int_equal(rps_worker_unregister(w, mem[3]), 0);
	assert_int_equal(rps_worker_register(w, mem[RPS_WREG_MAX], 64), 0);
	g = rps_wreg_get(w, mem[RPS_WREG_MAX] + 8, 8);
	assert_non_null(g);
	rps_wreg_put(g);
	for (int i = 0; i <= RPS_WREG_MAX; i++)
		assert_int_equal(rps_worker_unregister(w, mem[i]), i == 3 ? -ENOENT : 0);
}

/* A pull into a registered buffer holds it until the pull is done (here:
 * failed, offline), then lets go. */
static void test_pull_holds(void **state)
{
	rps_key_t key = 7;
	size_t len = 100;
	struct rps_req *req = NULL;
	struct rps_wreg *g;

	(void)state;
	assert_int_equal(rps_worker_register(w, buf, 1024 * sizeof(float)), 0);
	g = rps_wreg_get(w, buf, 4);
	assert_non_null(g);
	assert_int_equal(rps_worker_pull(w, &key, buf, &len, 1, &req), 0);
	assert_int_equal(rps_req_wait(req, 5000), -ENOTCONN);
	assert_int_equal(atomic_load(&g->inflight), 1); /* only ours */
	rps_wreg_put(g);
	assert_int_equal(rps_worker_unregister(w, buf), 0);
	/* an unregistered buffer pulls as before */
	assert_int_equal(rps_worker_pull(w, &key, buf, &len, 1, &req), 0);
	assert_int_equal(rps_req_wait(req, 5000), -ENOTCONN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_args, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_register_unregister, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lookup_and_busy, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_full, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pull_holds, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
