/* Control requests in a shard (server/snap.c) without a network: under BSP a
 * request with a target clock runs exactly when the shard reaches it (not
 * before, not later), at once when the shard is at or past it, at once under
 * ASP; an EXPORT snapshot equals what a pull reads at that clock; a
 * CHECKPOINT writes its file (or says there is no directory); a newer request
 * replaces one still waiting. */
#include <dirent.h>
#include <stdio.h>
#include <unistd.h>

#include "server/snap.h"
#include "src/alloc.h"
#include "src/ckpt.h"
#include "tests/unit/test_server_util.h"

#define N7 200

struct fixture {
	struct rps_shard sh;
	struct t_io io;
	char dir[64];
};

static int setup_c(void **state, enum rps_consistency c, int with_dir)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct rps_shard_params p;

	assert_non_null(f);
	t_params(&p, c);
	if (with_dir) {
		snprintf(f->dir, sizeof(f->dir), "/tmp/rps-snap-XXXXXX");
		assert_non_null(mkdtemp(f->dir));
		p.ckpt_dir = f->dir;
		p.server_shards = 1;
	}
	assert_int_equal(rps_shard_init(&f->sh, &p, &t_io_ops, &f->io), 0);
	atomic_store(&f->sh.server_rank, 0);
	assert_int_equal(t_declare(&f->sh, 7, 0, N7, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	*state = f;
	return 0;
}

static int setup_bsp(void **state)
{
	return setup_c(state, RPS_BSP, 1);
}

static int setup_asp(void **state)
{
	return setup_c(state, RPS_ASP, 0);
}

static int setup_nodir(void **state)
{
	return setup_c(state, RPS_BSP, 0);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	rps_free(f->sh.creq_res.snap);
	rps_shard_stop(&f->sh);
	rps_shard_fini(&f->sh);
	if (f->dir[0]) {
		DIR *d = opendir(f->dir);
		struct dirent *de;
		char path[512];

		while (d && (de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", f->dir, de->d_name);
			unlink(path);
		}
		if (d)
			closedir(d);
		rmdir(f->dir);
	}
	free(f);
	return 0;
}

/* One clock: both workers push w + 1 + c into key 7, then CLOCK. */
static void one_clock(struct rps_shard *sh, uint32_t c)
{
	float g[N7];

	for (uint32_t w = 0; w < 2; w++) {
		for (int i = 0; i < N7; i++)
			g[i] = (float)(w + 1 + c + (uint32_t)i % 3);
		t_push(sh, w, 7, 0, 0, N7, c, g, 10 * c + w);
		t_clock(sh, w, c, 1);
	}
}

static void request(struct rps_shard *sh, uint32_t gen, uint32_t op, int has_target,
		    uint64_t target)
{
	struct rps_ring_entry e;

	memset(&e, 0, sizeof(e));
	e.type = RPS_ENT_CTLREQ;
	e.info.worker = gen;
	e.info.key = op;
	e.info.nelems = has_target ? 1 : 0;
	e.u64 = target;
	rps_shard_handle(sh, &e);
}

static uint32_t done(struct rps_shard *sh)
{
	return atomic_load(&sh->creq_done);
}

/* The snapshot: one record, key 7, equal to what a pull reads now. */
static void assert_snap_is_now(struct rps_shard *sh, uint64_t clock)
{
	const struct rps_shard_creq_res *r = &sh->creq_res;
	struct rps_export_part part;
	float now[N7];

	assert_int_equal(r->rc, 0);
	assert_int_equal(r->clock, clock);
	assert_int_equal(r->nslices, 1);
	assert_int_equal(r->nelems, N7);
	assert_int_equal(r->snap_len, sizeof(part) + N7 * sizeof(float));
	memcpy(&part, r->snap, sizeof(part));
	assert_int_equal(part.key, 7);
	assert_int_equal(part.slice, 0);
	assert_int_equal(part.slice_elems, N7);
	assert_int_equal(part.clock, clock);
	rps_shard_read(sh, rps_srv_keytab_lookup(&sh->tab, 7, 0), 0, N7, now);
	assert_memory_equal((const char *)r->snap + sizeof(part), now, sizeof(now));
}

static void test_bsp_target_later(void **state)
{
	struct fixture *f = *state;
	float at2[N7];

	request(&f->sh, 1, RPS_OP_EXPORT, 1, 2);
	assert_int_equal(done(&f->sh), 0); /* at clock 0: waits */
	one_clock(&f->sh, 0);
	assert_int_equal(done(&f->sh), 0);
	one_clock(&f->sh, 1);
	assert_int_equal(rps_store_clock(&f->sh.store), 2);
	assert_int_equal(done(&f->sh), 1);
	assert_snap_is_now(&f->sh, 2);
	memcpy(at2, (const char *)f->sh.creq_res.snap + sizeof(struct rps_export_part),
	       sizeof(at2));
	assert_true(at2[0] == -0.5f * (1 + 2 + 2 + 3)); /* lr 0.5, clocks 0 and 1 */
	/* not later: the next clock does not change it */
	one_clock(&f->sh, 2);
	assert_memory_equal((const char *)f->sh.creq_res.snap + sizeof(struct rps_export_part), at2,
			    sizeof(at2));
}

/* Several clocks at once (a dead worker lets the clock jump): the request
 * still runs at its target, not at the end of the jump. */
static void test_bsp_target_in_a_jump(void **state)
{
	struct fixture *f = *state;

	/* worker 0 finishes clocks 0..2 (nothing to push here); worker 1 none */
	for (uint32_t c = 0; c < 3; c++)
		t_clock(&f->sh, 0, c, 0);
	assert_int_equal(rps_store_clock(&f->sh.store), 0);
	request(&f->sh, 1, RPS_OP_EXPORT, 1, 1);
	assert_int_equal(done(&f->sh), 0);
	t_dead(&f->sh, 1); /* clock 0 -> 3 in one go */
	assert_int_equal(rps_store_clock(&f->sh.store), 3);
	assert_int_equal(done(&f->sh), 1);
	assert_int_equal(f->sh.creq_res.clock, 1);
}

static void test_bsp_at_or_past(void **state)
{
	struct fixture *f = *state;

	one_clock(&f->sh, 0);
	one_clock(&f->sh, 1);
	request(&f->sh, 1, RPS_OP_EXPORT, 1, 2); /* at it */
	assert_int_equal(done(&f->sh), 1);
	assert_snap_is_now(&f->sh, 2);
	request(&f->sh, 2, RPS_OP_EXPORT, 1, 1); /* past it */
	assert_int_equal(done(&f->sh), 2);
	assert_snap_is_now(&f->sh, 2);
	request(&f->sh, 3, RPS_OP_EXPORT, 0, 0); /* no target */
	assert_int_equal(done(&f->sh), 3);
	assert_snap_is_now(&f->sh, 2);
}

static void test_asp_at_once(void **state)
{
	struct fixture *f = *state;

	request(&f->sh, 1, RPS_OP_EXPORT, 1, 5);
	assert_int_equal(done(&f->sh), 1);
	assert_snap_is_now(&f->sh, 0);
}

static void test_checkpoint_at_target(void **state)
{
	struct fixture *f = *state;
	char path[RPS_CKPT_PATH_MAX];

	request(&f->sh, 1, RPS_OP_CHECKPOINT, 1, 1);
	assert_int_equal(done(&f->sh), 0);
	one_clock(&f->sh, 0);
	assert_int_equal(done(&f->sh), 1);
	assert_int_equal(f->sh.creq_res.rc, 0);
	assert_int_equal(f->sh.creq_res.clock, 1);
	assert_int_equal(f->sh.creq_res.nslices, 1);
	assert_int_equal(rps_ckpt_path(f->dir, 0, 0, 1, path, sizeof(path)), 0);
	assert_string_equal(f->sh.creq_res.text, path);
	assert_int_equal(access(path, F_OK), 0);
}

static void test_checkpoint_no_dir(void **state)
{
	struct fixture *f = *state;

	request(&f->sh, 4, RPS_OP_CHECKPOINT, 0, 0);
	assert_int_equal(done(&f->sh), 4);
	assert_int_equal(f->sh.creq_res.rc, -ENOTSUP);
	assert_non_null(strstr(f->sh.creq_res.text, "no checkpoint directory"));
}

static void test_newer_replaces_waiting(void **state)
{
	struct fixture *f = *state;

	request(&f->sh, 1, RPS_OP_EXPORT, 1, 2);
	assert_int_equal(done(&f->sh), 0);
	request(&f->sh, 2, RPS_OP_EXPORT, 0, 0);
	assert_int_equal(done(&f->sh), 2);
	one_clock(&f->sh, 0);
	one_clock(&f->sh, 1);
	assert_int_equal(done(&f->sh), 2); /* gen 1 is gone */
	assert_int_equal(f->sh.creq_res.clock, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_bsp_target_later, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_bsp_target_in_a_jump, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_bsp_at_or_past, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_asp_at_once, setup_asp, teardown),
	    cmocka_unit_test_setup_teardown(test_checkpoint_at_target, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_checkpoint_no_dir, setup_nodir, teardown),
	    cmocka_unit_test_setup_teardown(test_newer_replaces_waiting, setup_bsp, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
