/* A worker replaced while the notice of its death is still on its way: the
 * replacement's SYNC (data path) reaches the shard before the old
 * incarnation's DEAD (control channel). The notice names the old pid and must
 * not make the replacement dead; in the usual order (DEAD, then SYNC) the
 * replacement is waited for from its SYNC clock. BSP sums stay exact. */
#include "tests/unit/test_server_util.h"

struct fixture {
	struct rps_shard sh;
	struct t_io io;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct rps_shard_params p;

	assert_non_null(f);
	t_params(&p, RPS_BSP);
	assert_int_equal(rps_shard_init(&f->sh, &p, &t_io_ops, &f->io), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	rps_shard_stop(&f->sh);
	rps_shard_fini(&f->sh);
	free(f);
	return 0;
}

static void entry(struct rps_shard *sh, uint32_t type, uint32_t w, uint32_t clock, uint32_t pid)
{
	struct rps_ring_entry e;

	memset(&e, 0, sizeof(e));
	e.type = type;
	e.info.worker = w;
	e.info.clock = clock;
	e.u64 = pid;
	rps_shard_handle(sh, &e);
}

/* One BSP clock c of both workers: each pushes 1s into key 1. */
static void both_clock(struct rps_shard *sh, uint32_t c, uint32_t id)
{
	float g[4] = {1, 1, 1, 1};

	for (uint32_t w = 0; w < 2; w++) {
		t_push(sh, w, 1, 0, 0, 4, c, g, id + w);
		t_clock(sh, w, c, 1);
	}
}

static void test_dead_notice_after_sync(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	float g[4] = {1, 1, 1, 1};
	float v[4];

	assert_int_equal(t_declare(sh, 1, 0, 4, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	both_clock(sh, 0, 1);
	both_clock(sh, 1, 3);
	assert_int_equal(rps_store_clock(&sh->store), 2);
	/* worker 1 (pid 100) dies in clock 2 after one push, before its CLOCK */
	t_push(sh, 1, 1, 0, 0, 4, 2, g, 5);
	/* its replacement (pid 200) syncs at clock 2 before the notice comes */
	entry(sh, RPS_ENT_SYNC, 1, 2, 200);
	entry(sh, RPS_ENT_DEAD, 1, 0, 100); /* the old incarnation's notice */
	assert_int_equal(sh->live[1], 1);
	entry(sh, RPS_ENT_REVIVE, 1, 0, 200); /* the map with the replacement */
	/* worker 0 ends clock 2: the shard still waits for the replacement */
	t_push(sh, 0, 1, 0, 0, 4, 2, g, 6);
	t_clock(sh, 0, 2, 1);
	assert_int_equal(rps_store_clock(&sh->store), 2);
	/* the replacement's clock 2: one push, CLOCK 2 with count 1 */
	t_push(sh, 1, 1, 0, 0, 4, 2, g, 7);
	assert_int_equal(rps_store_clock(&sh->store), 2);
	t_clock(sh, 1, 2, 1);
	assert_int_equal(rps_store_clock(&sh->store), 3);
	/* then both go on together */
	both_clock(sh, 3, 8);
	assert_int_equal(rps_store_clock(&sh->store), 4);
	t_read(sh, 1, 0, 0, 4, v);
	/* sgd lr 0.5: clocks 0, 1, 3 sum 2 each, clock 2 sums 3 (the dead
	 * incarnation's push of clock 2 stays in: it was applied) */
	assert_float_equal(v[0], -0.5f * (2 + 2 + 3 + 2), 1e-5);
}

static void test_dead_notice_first(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	float g[4] = {1, 1, 1, 1};

	assert_int_equal(t_declare(sh, 1, 0, 4, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	both_clock(sh, 0, 1);
	entry(sh, RPS_ENT_DEAD, 1, 0, 100);
	assert_int_equal(sh->live[1], 0);
	t_push(sh, 0, 1, 0, 0, 4, 1, g, 3);
	t_clock(sh, 0, 1, 1);
	assert_int_equal(rps_store_clock(&sh->store), 2);
	/* the replacement syncs at 2, then the map names it */
	entry(sh, RPS_ENT_SYNC, 1, 2, 200);
	entry(sh, RPS_ENT_REVIVE, 1, 0, 200);
	assert_int_equal(sh->live[1], 1);
	t_push(sh, 0, 1, 0, 0, 4, 2, g, 4);
	t_clock(sh, 0, 2, 1);
	assert_int_equal(rps_store_clock(&sh->store), 2);
	t_push(sh, 1, 1, 0, 0, 4, 2, g, 5);
	t_clock(sh, 1, 2, 1);
	assert_int_equal(rps_store_clock(&sh->store), 3);
	/* a late notice about the first incarnation changes nothing now */
	entry(sh, RPS_ENT_DEAD, 1, 0, 100);
	assert_int_equal(sh->live[1], 1);
	/* the replacement's own death (its pid) counts */
	entry(sh, RPS_ENT_DEAD, 1, 0, 200);
	assert_int_equal(sh->live[1], 0);
}

/* Without pids (an older worker, or a notice from the map at start) a
 * notice is taken as it comes, as before. */
static void test_no_pid(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;

	assert_int_equal(t_declare(sh, 1, 0, 4, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	entry(sh, RPS_ENT_SYNC, 1, 0, 0);
	entry(sh, RPS_ENT_DEAD, 1, 0, 100);
	assert_int_equal(sh->live[1], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_dead_notice_after_sync, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dead_notice_first, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_pid, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
