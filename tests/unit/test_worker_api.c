/* The public worker API on an in-process worker without network: local
 * validation errors come back before anything is sent, valid calls fan out
 * into the expected pieces, and requests complete (with -ENOTCONN here). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <rdmaps/optim.h>
#include <rdmaps/worker.h>

#include "src/keymap.h"
#include "worker/worker_int.h"

static struct rps_worker *w;
static float buf[10000], vals[10000];

#define KEY_BIG 5    /* 2500 elements: 3 slices of 1000, 1000, 500 */
#define KEY_SMALL 9  /* 10 elements */

static void add_key(rps_key_t key, uint64_t n)
{
	assert_int_equal(rps_keytab_insert(&w->keys, rps_wkey_new(&w->km, key, n), NULL), 0);
}

static int setup(void **state)
{
	struct rps_keymap km;

	(void)state;
	assert_int_equal(rps_keymap_init(&km, RPS_KEYMAP_HASH, 2, 2, 0, 1000), 0);
	assert_int_equal(rps_worker_create_offline(&km, &w), 0);
	/* small frames so that slices split: 100 elements a PUSH, 64 a PULL_RESP */
	for (uint32_t i = 0; i < w->num_servers; i++) {
		w->servers[i].push_elems = 100;
		w->servers[i].pull_elems = 64;
	}
	add_key(KEY_BIG, 2500);
	add_key(KEY_SMALL, 10);
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

static uint64_t inflight(void)
{
	uint64_t n;

	pthread_mutex_lock(&w->core.lock);
	n = w->core.reqs_inflight;
	pthread_mutex_unlock(&w->core.lock);
	return n;
}

static int cb_calls;
static void cb(int status, void *arg)
{
	(void)status;
	(void)arg;
	cb_calls++;
}

static void test_validation_before_sending(void **state)
{
	rps_key_t keys[2] = { KEY_SMALL, 12345 };
	size_t lens[2] = { 10, 4 };
	struct rps_req *req = NULL;

	(void)state;
	/* unknown key */
	assert_int_equal(rps_worker_push(w, keys, buf, lens, 2, &req), -ENOENT);
	assert_int_equal(rps_worker_pull(w, keys, vals, lens, 2, &req), -ENOENT);
	assert_int_equal(rps_worker_pushpull(w, keys, buf, vals, lens, 2, &req), -ENOENT);
	assert_int_equal(rps_worker_push_cb(w, keys, buf, lens, 2, cb, NULL), -ENOENT);
	assert_int_equal(rps_worker_pull_cb(w, keys, vals, lens, 2, cb, NULL), -ENOENT);
	/* wrong length */
	keys[1] = KEY_BIG;
	lens[1] = 2499;
	assert_int_equal(rps_worker_push(w, keys, buf, lens, 2, &req), -EINVAL);
	assert_int_equal(rps_worker_pull(w, keys, vals, lens, 2, &req), -EINVAL);
	assert_int_equal(rps_worker_pushpull(w, keys, buf, vals, lens, 2, &req), -EINVAL);
	lens[1] = 2500;
	/* NULL pointers */
	assert_int_equal(rps_worker_push(w, keys, NULL, lens, 2, &req), -EINVAL);
	assert_int_equal(rps_worker_push(w, NULL, buf, lens, 2, &req), -EINVAL);
	assert_int_equal(rps_worker_push(w, keys, buf, NULL, 2, &req), -EINVAL);
	assert_int_equal(rps_worker_push(w, keys, buf, lens, 2, NULL), -EINVAL);
	assert_int_equal(rps_worker_pull(w, keys, NULL, lens, 2, &req), -EINVAL);
	assert_int_equal(rps_worker_pushpull(w, keys, buf, NULL, lens, 2, &req), -EINVAL);
	assert_int_equal(rps_worker_push_cb(w, keys, buf, lens, 2, NULL, NULL), -EINVAL);
	assert_int_equal(rps_worker_push(NULL, keys, buf, lens, 2, &req), -EINVAL);
	/* nothing was built, nothing is in flight, no callback ran */
	assert_int_equal(pieces_total(), 0);
	assert_int_equal(inflight(), 0);
	assert_int_equal(cb_calls, 0);
}

static void test_push_fanout(void **state)
{
	rps_key_t keys[2] = { KEY_SMALL, KEY_BIG };
	size_t lens[2] = { 10, 2500 };
	struct rps_req *req = NULL;
	uint64_t pushes = 0;

	(void)state;
	assert_int_equal(rps_worker_push(w, keys, buf, lens, 2, &req), 0);
	assert_non_null(req);
	/* 1 frame for the small key; 10 + 10 + 5 for the big one's slices */
	assert_int_equal(pieces_total(), 1 + 25);
	/* no connection here: every piece failed, the request says why */
	assert_int_equal(rps_req_wait(req, 1000), -ENOTCONN);
	assert_int_equal(inflight(), 0);
	/* frames that never left are not counted for the CLOCK */
	for (uint32_t i = 0; i < w->num_servers; i++)
		for (uint32_t j = 0; j < w->servers[i].nshards; j++)
			pushes += w->servers[i].shards[j].pushes;
	assert_int_equal(pushes, 0);
}

static void test_pull_fanout(void **state)
{
	rps_key_t keys[2] = { KEY_BIG, KEY_SMALL };
	size_t lens[2] = { 2500, 10 };
	struct rps_req *req = NULL;

	(void)state;
	assert_int_equal(rps_worker_pull(w, keys, vals, lens, 2, &req), 0);
	/* 16 + 16 + 8 frames of at most 64 for the big key, 1 for the small */
	assert_int_equal(pieces_total(), 40 + 1);
	assert_int_equal(rps_req_wait(req, 1000), -ENOTCONN);
}

static void test_pushpull_and_clock(void **state)
{
	rps_key_t key = KEY_BIG;
	size_t len = 2500;
	struct rps_req *req = NULL;

	(void)state;
	assert_int_equal(rps_worker_clock_value(w), 0);
	assert_int_equal(rps_worker_pushpull(w, &key, buf, vals, &len, 1, &req), 0);
	/* push, CLOCK (no piece), pull */
	assert_int_equal(pieces_total(), 25 + 40);
	assert_int_equal(rps_worker_clock_value(w), 1);
	assert_int_equal(rps_req_wait(req, 1000), -ENOTCONN);
	assert_int_equal(rps_worker_clock(w), -ENOTCONN);
	assert_int_equal(rps_worker_clock_value(w), 2);
}

static void test_empty_batch(void **state)
{
	struct rps_req *req = NULL;

	(void)state;
	assert_int_equal(rps_worker_push(w, NULL, NULL, NULL, 0, &req), 0);
	assert_int_equal(rps_req_wait(req, 0), 0);
	assert_int_equal(rps_worker_pull(w, NULL, NULL, NULL, 0, &req), 0);
	assert_int_equal(rps_req_wait(req, 0), 0);
}

static void test_declare_local_errors(void **state)
{
	rps_key_t keys[2] = { 77, 77 };
	size_t lens[2] = { 5, 6 };
	struct rps_init bad = { .kind = (enum rps_init_kind)42 };

	(void)state;
	assert_int_equal(rps_worker_declare(w, keys, lens, 0, NULL), 0);
	assert_int_equal(rps_worker_declare(w, NULL, lens, 2, NULL), -EINVAL);
	assert_int_equal(rps_worker_declare(w, keys, NULL, 2, NULL), -EINVAL);
	assert_int_equal(rps_worker_declare(w, keys, lens, 1, &bad), -EINVAL);
	lens[0] = 0;
	assert_int_equal(rps_worker_declare(w, keys, lens, 1, NULL), -EINVAL);
	lens[0] = 5;
	/* the same key twice in one call with two lengths */
	assert_int_equal(rps_worker_declare(w, keys, lens, 2, NULL), -EEXIST);
	/* a key this worker knows with another length */
	keys[0] = KEY_BIG;
	lens[0] = 7;
	assert_int_equal(rps_worker_declare(w, keys, lens, 1, NULL), -EEXIST);
	/* known with the same length: nothing to send */
	lens[0] = 2500;
	assert_int_equal(rps_worker_declare(w, keys, lens, 1, NULL), 0);
	assert_int_equal(pieces_total(), 0);
	/* a new key: one DECLARE per slice; offline they fail and the key stays unknown */
	keys[0] = 500;
	lens[0] = 1500;
	assert_int_equal(rps_worker_declare(w, keys, lens, 1, NULL), -ENOTCONN);
	assert_int_equal(pieces_total(), 2);
	assert_null(rps_keytab_find(&w->keys, 500));
}

/* Optimizer specs: a malformed one is refused before anything is sent;
 * set_optimizer only for keys this worker declared; a valid spec for known
 * keys goes out as one DECLARE per slice (offline: -ENOTCONN) and the keys
 * keep their old spec (none) when it fails. */
static void test_optimizer_spec_local(void **state)
{
	rps_key_t keys[2] = { KEY_BIG, KEY_SMALL };
	size_t lens[2] = { 2500, 10 };
	struct rps_optim_opts o;

	(void)state;
	rps_optim_opts_init(&o);
	o.lr = 0;
	assert_int_equal(rps_worker_declare_opt(w, keys, lens, 2, NULL, &o), -EINVAL);
	assert_int_equal(rps_worker_set_optimizer(w, keys, 2, &o), -EINVAL);
	o.lr = 0.1f;
	o.kind = (enum rps_optim_kind)99;
	assert_int_equal(rps_worker_declare_opt(w, keys, lens, 2, NULL, &o), -EINVAL);
	o.kind = RPS_OPT_ADAM;
	o.schedule = RPS_LR_COSINE; /* no total_steps */
	assert_int_equal(rps_worker_set_optimizer(w, keys, 2, &o), -EINVAL);
	assert_int_equal(rps_worker_set_optimizer(w, keys, 2, NULL), -EINVAL);
	o.total_steps = 100;
	keys[1] = 4242; /* never declared */
	assert_int_equal(rps_worker_set_optimizer(w, keys, 2, &o), -ENOENT);
	assert_int_equal(rps_worker_set_optimizer(NULL, keys, 2, &o), -EINVAL);
	assert_int_equal(pieces_total(), 0);
	/* optim NULL is rps_worker_declare: known keys, nothing to send */
	keys[1] = KEY_SMALL;
	assert_int_equal(rps_worker_declare_opt(w, keys, lens, 2, NULL, NULL), 0);
	assert_int_equal(pieces_total(), 0);
	/* valid: every slice of both keys (3 + 1) gets a DECLARE with the spec */
	assert_int_equal(rps_worker_set_optimizer(w, keys, 2, &o), -ENOTCONN);
	assert_int_equal(pieces_total(), 4);
	assert_null(atomic_load(&rps_keytab_find(&w->keys, KEY_BIG)->optim));
	assert_int_equal(rps_worker_declare_opt(w, keys, lens, 2, NULL, &o), -ENOTCONN);
	assert_int_equal(pieces_total(), 8);
	assert_null(atomic_load(&rps_keytab_find(&w->keys, KEY_SMALL)->optim));
}

static void test_getters(void **state)
{
	(void)state;
	assert_int_equal(rps_worker_num_servers(w), 2);
	assert_int_equal(rps_worker_rank(w), 0);
	assert_string_equal(rps_worker_transport(w), "none");
	assert_int_equal(rps_worker_barrier(w), -ENOTCONN);
	assert_int_equal(rps_worker_rank(NULL), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_validation_before_sending, setup, teardown),
		cmocka_unit_test_setup_teardown(test_push_fanout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pull_fanout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pushpull_and_clock, setup, teardown),
		cmocka_unit_test_setup_teardown(test_empty_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_declare_local_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_optimizer_spec_local, setup, teardown),
		cmocka_unit_test_setup_teardown(test_getters, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
