/* Pulls: validation, the consistency conditions, parking and the release of
 * parked pulls by the update thread once clocks move. */
#include <pthread.h>
#include <time.h>

#include "tests/unit/test_server_util.h"

struct fixture {
	struct rps_shard sh;
	struct t_io io;
};

static int setup_c(void **state, enum rps_consistency c)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct rps_shard_params p;

	assert_non_null(f);
	t_params(&p, c);
	p.max_msg = 4096;
	assert_int_equal(rps_shard_init(&f->sh, &p, &t_io_ops, &f->io), 0);
	*state = f;
	return 0;
}

static int setup_asp(void **state)
{
	return setup_c(state, RPS_ASP);
}

static int setup_bsp(void **state)
{
	return setup_c(state, RPS_BSP);
}

static int setup_ssp(void **state)
{
	return setup_c(state, RPS_SSP); /* staleness 1 */
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	struct rps_srv_req *r;

	rps_shard_stop(&f->sh);
	r = rps_shard_pull_unpark(&f->sh, NULL);
	while (r) {
		struct rps_srv_req *n = r->next;

		free(r);
		r = n;
	}
	rps_shard_fini(&f->sh);
	free(f);
	return 0;
}

static struct rps_srv_req *pull_req(uint32_t worker, uint64_t key, uint32_t count,
				    uint32_t min_clock, uint32_t id, struct rps_srv_conn *sc)
{
	struct rps_srv_req *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	r->op = RPS_REQ_PULL;
	r->req_id = id;
	r->worker = worker;
	r->sc = sc;
	r->u.pull.key = key;
	r->u.pull.count = count;
	r->u.pull.min_clock = min_clock;
	return r;
}

static void end_clock(struct rps_shard *sh, uint32_t w, uint32_t c)
{
	t_clock(sh, w, c, 0);
}

static void test_pull_check(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_slice_meta *m = (void *)1;
	struct rps_pull p = {.key = 3, .count = 10};

	assert_int_equal(rps_shard_pull_check(sh, &p, &m), -ENOENT);
	assert_int_equal(t_declare(sh, 3, 0, 2000, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	assert_int_equal(rps_shard_pull_check(sh, &p, &m), 0);
	assert_ptr_equal(m, rps_srv_keytab_lookup(&sh->tab, 3, 0));
	p.offset = 1995;
	assert_int_equal(rps_shard_pull_check(sh, &p, &m), -EINVAL);
	p.offset = 2001;
	p.count = 0; /* a pure clock wait: no key needed */
	p.key = 12345;
	assert_int_equal(rps_shard_pull_check(sh, &p, &m), 0);
	assert_null(m);
	/* an answer beyond max_msg (4096 bytes) */
	p.key = 3;
	p.offset = 0;
	p.count = 1100;
	assert_int_equal(rps_shard_pull_check(sh, &p, &m), -EMSGSIZE);
	p.count = (4096 - 32) / 4;
	assert_int_equal(rps_shard_pull_check(sh, &p, &m), 0);
}

static void test_ready_bsp(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;

	assert_true(rps_shard_pull_ready(sh, 0, 0));
	assert_false(rps_shard_pull_ready(sh, 1, 0));
	end_clock(sh, 0, 0);
	assert_false(rps_shard_pull_ready(sh, 1, 0)); /* worker 1 not done */
	end_clock(sh, 1, 0);
	assert_true(rps_shard_pull_ready(sh, 1, 0));
	assert_false(rps_shard_pull_ready(sh, 2, 1));
}

static void test_ready_ssp(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;

	assert_true(rps_shard_pull_ready(sh, 1, 0)); /* clock 0 >= 1 - 1 */
	assert_false(rps_shard_pull_ready(sh, 2, 0));
	end_clock(sh, 0, 0);
	end_clock(sh, 1, 0);
	assert_true(rps_shard_pull_ready(sh, 2, 0));
}

static void test_ready_asp_own_clock(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;

	assert_false(rps_shard_pull_ready(sh, 1, 0));
	end_clock(sh, 0, 0);
	/* a worker reads its own writes: worker 1's clock does not matter */
	assert_true(rps_shard_pull_ready(sh, 1, 0));
	assert_false(rps_shard_pull_ready(sh, 1, 1));
	assert_int_equal(rps_store_clock(&sh->store), 0);
}

static void test_park_release(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_srv_req *now = pull_req(0, 0, 0, 0, 100, NULL);

	/* ready now: not parked */
	assert_int_equal(rps_shard_pull_park(sh, now), 1);
	free(now);
	assert_int_equal(atomic_load(&sh->nparked), 0);

	assert_int_equal(rps_shard_pull_park(sh, pull_req(0, 0, 0, 1, 1, NULL)), 0);
	assert_int_equal(rps_shard_pull_park(sh, pull_req(1, 0, 0, 2, 2, NULL)), 0);
	assert_int_equal(rps_shard_pull_park(sh, pull_req(1, 0, 0, 1, 3, NULL)), 0);
	assert_int_equal(atomic_load(&sh->nparked), 3);
	end_clock(sh, 0, 0);
	assert_int_equal(atomic_load(&f->io.npull), 0); /* BSP: worker 1 not done */
	end_clock(sh, 1, 0);
	/* clock 1: the two pulls at min_clock 1 answered, in order */
	assert_int_equal(atomic_load(&f->io.npull), 2);
	assert_int_equal(f->io.pull_ids[0], 1);
	assert_int_equal(f->io.pull_ids[1], 3);
	assert_int_equal(f->io.pull_clock[0], 1);
	assert_int_equal(atomic_load(&sh->nparked), 1);
	end_clock(sh, 0, 1);
	end_clock(sh, 1, 1);
	assert_int_equal(atomic_load(&f->io.npull), 3);
	assert_int_equal(f->io.pull_ids[2], 2);
	assert_int_equal(atomic_load(&sh->nparked), 0);
	assert_null(sh->parked);
	assert_null(sh->parked_tail);
}

static void test_park_after_push_bsp(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	float g[8] = {1, 1, 1, 1, 1, 1, 1, 1};

	assert_int_equal(t_declare(sh, 4, 0, 8, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	assert_int_equal(rps_shard_pull_park(sh, pull_req(0, 4, 8, 1, 9, NULL)), 0);
	t_push(sh, 0, 4, 0, 0, 8, 0, g, 1);
	t_clock(sh, 0, 0, 1);
	t_push(sh, 1, 4, 0, 0, 8, 0, g, 2);
	assert_int_equal(atomic_load(&f->io.npull), 0);
	t_clock(sh, 1, 0, 1);
	assert_int_equal(atomic_load(&f->io.npull), 1);
	assert_int_equal(f->io.pull_ids[0], 9);
}

static void test_unpark_conn(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_srv_conn a, b;
	struct rps_srv_req *r;
	int n = 0;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	assert_int_equal(rps_shard_pull_park(sh, pull_req(0, 0, 0, 5, 1, &a)), 0);
	assert_int_equal(rps_shard_pull_park(sh, pull_req(1, 0, 0, 5, 2, &b)), 0);
	assert_int_equal(rps_shard_pull_park(sh, pull_req(0, 0, 0, 5, 3, &a)), 0);
	r = rps_shard_pull_unpark(sh, &a);
	while (r) {
		struct rps_srv_req *next = r->next;

		assert_ptr_equal(r->sc, &a);
		n++;
		free(r);
		r = next;
	}
	assert_int_equal(n, 2);
	assert_int_equal(atomic_load(&sh->nparked), 1);
	assert_ptr_equal(sh->parked, sh->parked_tail);
	assert_int_equal(sh->parked->req_id, 2);
	/* and parking still appends correctly afterwards */
	assert_int_equal(rps_shard_pull_park(sh, pull_req(0, 0, 0, 5, 4, &a)), 0);
	assert_int_equal(sh->parked_tail->req_id, 4);
}

/* Parking on one thread while the update thread moves clocks on another:
 * every pull is answered exactly once, none is stranded. */
static void test_park_race(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct timespec ts = {0, 100000};
	const uint32_t clocks = 300;
	uint32_t answered_now = 0;

	assert_int_equal(rps_shard_start(sh, -1), 0);
	for (uint32_t c = 0; c < clocks; c++) {
		struct rps_ring_entry e;
		struct rps_srv_req *r = pull_req(0, 0, 0, c + 1, c, NULL);

		for (uint32_t w = 0; w < 2; w++) {
			t_clock_entry(w, c, 0, &e);
			assert_int_equal(rps_ring_push_wait(sh->ring, &e, 5000), 0);
		}
		if (rps_shard_pull_park(sh, r)) {
			free(r);
			answered_now++;
		}
	}
	for (int i = 0; i < 20000 && atomic_load(&f->io.npull) + answered_now < clocks; i++)
		nanosleep(&ts, NULL);
	assert_int_equal(atomic_load(&f->io.npull) + answered_now, clocks);
	assert_int_equal(atomic_load(&sh->nparked), 0);
	assert_int_equal(rps_store_clock(&sh->store), clocks);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_pull_check, setup_asp, teardown),
	    cmocka_unit_test_setup_teardown(test_ready_bsp, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_ready_ssp, setup_ssp, teardown),
	    cmocka_unit_test_setup_teardown(test_ready_asp_own_clock, setup_asp, teardown),
	    cmocka_unit_test_setup_teardown(test_park_release, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_park_after_push_bsp, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_unpark_conn, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_park_race, setup_bsp, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
