/* rps_worker_save_model / rps_worker_load_model on an in-process worker
 * without network: every check comes before anything is built or sent (a
 * refused file sends nothing), a good file fans out into ASSIGN pieces like a
 * push's, and those count neither for the CLOCK nor as pushes. */
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
#include <rdmaps/worker.h>

#include "src/keymap.h"
#include "src/log.h"
#include "worker/worker_int.h"

static struct rps_worker *w;
static char dir[] = "/tmp/rps-wmodel-XXXXXX";
static char good[256], bad[256];

#define KEY_BIG	  5 /* 2500 elements: 3 slices of 1000, 1000, 500 */
#define KEY_SMALL 9 /* 10 elements */

static const rps_key_t keys[2] = {KEY_SMALL, KEY_BIG};
static const size_t lens[2] = {10, 2500};
static float vals[2510];

static int setup(void **state)
{
	struct rps_keymap km;

	(void)state;
	rps_log_set_level(RPS_LOG_ERROR);
	assert_non_null(mkdtemp(dir));
	snprintf(good, sizeof(good), "%s/good.npz", dir);
	snprintf(bad, sizeof(bad), "%s/bad.npz", dir);
	for (int i = 0; i < 2510; i++)
		vals[i] = (float)i;
	assert_int_equal(rps_model_save(good, keys, lens, 2, vals), 0);
	{
		const size_t wrong[2] = {10, 2499};

		assert_int_equal(rps_model_save(bad, keys, wrong, 2, vals), 0);
	}
	assert_int_equal(rps_keymap_init(&km, RPS_KEYMAP_HASH, 2, 2, 0, 1000), 0);
	assert_int_equal(rps_worker_create_offline(&km, &w), 0);
	for (uint32_t i = 0; i < w->num_servers; i++) {
		w->servers[i].push_elems = 100; /* 100 elements a frame */
		w->servers[i].pull_elems = 64;
	}
	assert_int_equal(rps_keytab_insert(&w->keys, rps_wkey_new(&w->km, KEY_BIG, 2500), NULL), 0);
	assert_int_equal(rps_keytab_insert(&w->keys, rps_wkey_new(&w->km, KEY_SMALL, 10), NULL), 0);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	rps_worker_destroy(w);
	w = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static uint64_t pieces_total(void)
{
	uint64_t n;

	pthread_mutex_lock(&w->core.lock);
	n = w->core.pieces_total;
	pthread_mutex_unlock(&w->core.lock);
	return n;
}

static uint32_t clock_pushes(void)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < w->num_servers; i++)
		for (uint32_t j = 0; j < w->servers[i].nshards; j++)
			n += w->servers[i].shards[j].pushes;
	return n;
}

static void test_checks_before_sending(void **state)
{
	const rps_key_t unknown[2] = {KEY_SMALL, 12345};
	const size_t wrong[2] = {10, 2499};
	char none[300];

	(void)state;
	snprintf(none, sizeof(none), "%s/none.npz", dir);
	/* the worker's own checks */
	assert_int_equal(rps_worker_load_model(NULL, keys, lens, 2, good), -EINVAL);
	assert_int_equal(rps_worker_load_model(w, keys, lens, 2, NULL), -EINVAL);
	assert_int_equal(rps_worker_load_model(w, keys, lens, 0, good), -EINVAL);
	assert_int_equal(rps_worker_load_model(w, NULL, lens, 2, good), -EINVAL);
	assert_int_equal(rps_worker_load_model(w, unknown, lens, 2, good), -ENOENT);
	assert_int_equal(rps_worker_load_model(w, keys, wrong, 2, good), -EINVAL);
	assert_int_equal(rps_worker_save_model(w, unknown, lens, 2, none), -ENOENT);
	assert_int_equal(rps_worker_save_model(w, keys, wrong, 2, none), -EINVAL);
	assert_int_equal(rps_worker_save_model(w, keys, lens, 2, NULL), -EINVAL);
	/* the file's: key 5 has 2499 floats; no file */
	assert_int_equal(rps_worker_load_model(w, keys, lens, 2, bad), -EINVAL);
	assert_int_equal(rps_worker_load_model(w, keys, lens, 2, none), -ENOENT);
	/* nothing built, nothing counted, nothing written */
	assert_int_equal(pieces_total(), 0);
	assert_int_equal(clock_pushes(), 0);
	assert_int_equal(access(none, F_OK), -1);
}

static void test_assign_fanout(void **state)
{
	struct rps_worker_stats st = {.field_mask = RPS_WORKER_STAT_ALL};

	(void)state;
	/* 1 frame for the small key; 10 + 10 + 5 for the big one's slices, as a
	 * push; no server here: every piece fails, the call says why */
	assert_int_equal(rps_worker_load_model(w, keys, lens, 2, good), -ENOTCONN);
	assert_int_equal(pieces_total(), 1 + 25);
	/* assignments are no pushes: not in the CLOCK, not in the counters */
	assert_int_equal(clock_pushes(), 0);
	assert_int_equal(rps_worker_stats(w, &st), 0);
	assert_int_equal(st.pushes, 0);
	assert_int_equal(st.bytes_out, 0);
}

/* Saving pulls: no server, no file. */
static void test_save_needs_the_pull(void **state)
{
	char out[300];

	(void)state;
	snprintf(out, sizeof(out), "%s/out.npz", dir);
	assert_int_equal(rps_worker_save_model(w, keys, lens, 2, out), -ENOTCONN);
	assert_int_equal(access(out, F_OK), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_checks_before_sending),
	    cmocka_unit_test(test_assign_fanout),
	    cmocka_unit_test(test_save_needs_the_pull),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
