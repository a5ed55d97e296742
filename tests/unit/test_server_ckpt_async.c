/* Checkpoints off the hot path (server/ckpt_async.c) without a network: the
 * test thread plays the update thread (rps_shard_handle), the shard's writer
 * thread is real and held back where a test needs the shard to move on while
 * a snapshot waits to be written. */
#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/ckpt.h"
#include "server/ckpt_async.h"
#include "src/ckpt.h"
#include "tests/unit/test_server_util.h"

struct fixture {
	struct rps_shard sh;
	struct t_io io;
	char dir[64];
};

static void params(struct fixture *f, struct rps_shard_params *p, enum rps_consistency c,
		   uint32_t every)
{
	t_params(p, c);
	p->optim.kind = RPS_OPT_MOMENTUM;
	p->optim.momentum = 0.5f;
	p->ckpt_dir = f->dir;
	p->ckpt_every = every;
	p->server_shards = 1;
}

static int setup_with(void **state, enum rps_consistency c, uint32_t every)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct rps_shard_params p;

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/rps-ckpta-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	params(f, &p, c, every);
	assert_int_equal(rps_shard_init(&f->sh, &p, &t_io_ops, &f->io), 0);
	atomic_store(&f->sh.server_rank, 0);
	assert_int_equal(rps_shard_ckpt_async_start(&f->sh), 0);
	assert_true(rps_shard_ckpt_async_on(&f->sh));
	*state = f;
	return 0;
}

static int setup_bsp(void **state)
{
	return setup_with(state, RPS_BSP, 0);
}

static int setup_asp(void **state)
{
	return setup_with(state, RPS_ASP, 1);
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	DIR *d;
	struct dirent *de;
	char path[512];

	rps_shard_stop(&f->sh); /* stops the writer too */
	assert_false(rps_shard_ckpt_async_on(&f->sh));
	rps_shard_fini(&f->sh);
	d = opendir(f->dir);
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", f->dir, de->d_name);
		if (unlink(path))
			rmdir(path);
	}
	if (d)
		closedir(d);
	rmdir(f->dir);
	free(f);
	return 0;
}

#define N7 300 /* 5 chunks of 64, the last short */

static void fill(float *v, size_t n, float x)
{
	for (size_t i = 0; i < n; i++)
		v[i] = x + (float)(i % 7);
}

/* One clock: both workers push into key 7, then CLOCK. */
static void one_clock(struct rps_shard *sh, uint32_t c)
{
	float g[N7];

	for (uint32_t w = 0; w < 2; w++) {
		fill(g, N7, (float)(w + 1 + c));
		t_push(sh, w, 7, 0, 0, N7, c, g, 10 * c + w);
		t_clock(sh, w, c, 1);
	}
}

static int file_exists(const struct fixture *f, uint64_t clock)
{
	char path[RPS_CKPT_PATH_MAX];

	assert_int_equal(rps_ckpt_path(f->dir, 0, 0, clock, path, sizeof(path)), 0);
	return access(path, F_OK) == 0;
}

static void request(struct rps_shard *sh)
{
	struct rps_ring_entry e;

	memset(&e, 0, sizeof(e));
	e.type = RPS_ENT_CKPT;
	rps_shard_handle(sh, &e);
}

/* The restored shard's key 7 (values, momentum) and clock. */
static void restore_check(struct fixture *f, uint64_t clock, const float *want,
			  const float *want_m)
{
	struct rps_shard_params p;
	struct rps_shard sh2;
	struct t_io io2;
	struct rps_shard_restore r;
	float v[N7];

	memset(&io2, 0, sizeof(io2));
	params(f, &p, f->sh.p.consistency, 0);
	assert_int_equal(rps_shard_init(&sh2, &p, &t_io_ops, &io2), 0);
	memset(&r, 0, sizeof(r));
	assert_int_equal(rps_ckpt_path(f->dir, 0, 0, clock, r.path, sizeof(r.path)), 0);
	r.nshards = 1;
	rps_shard_restore_run(&sh2, &r);
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.clock, clock);
	t_read(&sh2, 7, 0, 0, N7, v);
	assert_memory_equal(v, want, sizeof(v));
	assert_memory_equal(rps_srv_keytab_lookup(&sh2.tab, 7, 0)->opt.m, want_m, sizeof(v));
	rps_shard_fini(&sh2);
}

/* The file holds the shard as it was when the snapshot was taken, although
 * the shard moved on (3 more clocks) before the writer wrote any of it
 * (copy-on-write: the update thread kept each chunk before writing it). */
static void test_snapshot_not_live(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_ckpt_async_stats st;
	float at1[N7], m1[N7], now[N7];

	assert_int_equal(t_declare(sh, 7, 0, N7, RPS_INIT_CONST, 1.5f, 0, NULL), 0);
	one_clock(sh, 0);
	assert_int_equal(sh->clock, 1);
	t_read(sh, 7, 0, 0, N7, at1);
	memcpy(m1, rps_srv_keytab_lookup(&sh->tab, 7, 0)->opt.m, sizeof(m1));

	rps_shard_ckpt_async_hold(sh, 1);
	request(sh); /* snapshot of clock 1, handed to the (held) writer */
	for (uint32_t c = 1; c < 4; c++)
		one_clock(sh, c); /* the shard moves on meanwhile */
	assert_int_equal(sh->clock, 4);
	t_read(sh, 7, 0, 0, N7, now);
	assert_true(now[0] != at1[0]);
	assert_false(file_exists(f, 1));
	assert_int_equal(atomic_load(&sh->ckpts_ok), 0);

	rps_shard_ckpt_async_hold(sh, 0);
	rps_shard_ckpt_async_wait(sh);
	assert_true(file_exists(f, 1));
	assert_int_equal(atomic_load(&sh->ckpts_ok), 1);
	assert_int_equal(atomic_load(&sh->ckpt_clock), 1);
	restore_check(f, 1, at1, m1);
	rps_shard_ckpt_async_stats(sh, &st);
	assert_int_equal(st.written, 1);
	assert_int_equal(st.failed, 0);
	/* the writer was held: the update thread kept each of the 5 chunks of
	 * key 7 (values and momentum) before its first write into it, once */
	assert_int_equal(st.cow_chunks, 10);
}

/* A push into a chunk the writer is copying (claimed, not yet marked written)
 * does not wait for the writer: the update thread saves the chunk too, its
 * copy is the one in the file, and the writer drops its own. */
static void test_push_during_chunk_copy(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_ckpt_async_stats st;
	float at1[N7], m1[N7];

	assert_int_equal(t_declare(sh, 7, 0, N7, RPS_INIT_CONST, 1.5f, 0, NULL), 0);
	one_clock(sh, 0);
	t_read(sh, 7, 0, 0, N7, at1);
	memcpy(m1, rps_srv_keytab_lookup(&sh->tab, 7, 0)->opt.m, sizeof(m1));

	rps_shard_ckpt_async_hold(sh, 1);
	request(sh); /* snapshot of clock 1 */
	/* the writer stops inside its first chunk: key 7's values, chunk 0 */
	rps_shard_ckpt_async_hold_chunk(sh, 1);
	one_clock(sh, 1); /* writes every chunk, the one being copied too */
	assert_int_equal(sh->clock, 2);
	rps_shard_ckpt_async_stats(sh, &st);
	assert_int_equal(st.cow_chunks, 10); /* 5 chunks x (values, momentum) */
	rps_shard_ckpt_async_hold_chunk(sh, 0);
	rps_shard_ckpt_async_wait(sh);
	assert_int_equal(atomic_load(&sh->ckpts_ok), 1);
	restore_check(f, 1, at1, m1);
}

/* A request while one is in flight waits for it; both files are right. */
static void test_request_waits(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_ckpt_async_stats st;
	float at1[N7], m1[N7], at2[N7], m2[N7];

	assert_int_equal(t_declare(sh, 7, 0, N7, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	one_clock(sh, 0);
	t_read(sh, 7, 0, 0, N7, at1);
	memcpy(m1, rps_srv_keytab_lookup(&sh->tab, 7, 0)->opt.m, sizeof(m1));
	request(sh);
	one_clock(sh, 1);
	t_read(sh, 7, 0, 0, N7, at2);
	memcpy(m2, rps_srv_keytab_lookup(&sh->tab, 7, 0)->opt.m, sizeof(m2));
	request(sh); /* the first may still be in flight: waited for */
	rps_shard_ckpt_async_wait(sh);
	assert_true(file_exists(f, 1) && file_exists(f, 2));
	restore_check(f, 1, at1, m1);
	restore_check(f, 2, at2, m2);
	rps_shard_ckpt_async_stats(sh, &st);
	assert_int_equal(st.written, 2);
	assert_int_equal(st.skipped, 0);
}

/* A control request's CHECKPOINT: its result is published when the file is
 * committed, not when the snapshot is taken. */
static void test_creq_published_after_write(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_ring_entry e;
	char path[RPS_CKPT_PATH_MAX];

	assert_int_equal(t_declare(sh, 7, 0, N7, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	one_clock(sh, 0);
	rps_shard_ckpt_async_hold(sh, 1);
	memset(&e, 0, sizeof(e));
	e.type = RPS_ENT_CTLREQ;
	e.info.key = RPS_OP_CHECKPOINT;
	e.info.worker = 42; /* the request's generation */
	rps_shard_handle(sh, &e);
	one_clock(sh, 1);
	usleep(20000);
	assert_int_not_equal(atomic_load(&sh->creq_done), 42);
	rps_shard_ckpt_async_hold(sh, 0);
	for (int i = 0; i < 5000 && atomic_load(&sh->creq_done) != 42; i++)
		usleep(1000);
	assert_int_equal(atomic_load(&sh->creq_done), 42);
	assert_int_equal(sh->creq_res.rc, 0);
	assert_int_equal(sh->creq_res.clock, 1);
	assert_int_equal(sh->creq_res.nslices, 1);
	assert_int_equal(rps_ckpt_path(f->dir, 0, 0, 1, path, sizeof(path)), 0);
	assert_string_equal(sh->creq_res.text, path);
}

/* The writer fails (the temp file cannot be created): logged and counted,
 * the previous checkpoint stays; the next one works again. */
static void test_failure_keeps_previous(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_ckpt_async_stats st;
	char tmp[RPS_CKPT_PATH_MAX + 8];

	assert_int_equal(t_declare(sh, 7, 0, N7, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	one_clock(sh, 0);
	request(sh);
	rps_shard_ckpt_async_wait(sh);
	assert_true(file_exists(f, 1));
	one_clock(sh, 1);
	/* a directory where the temp file of clock 2 goes: open fails (EISDIR) */
	assert_int_equal(rps_ckpt_path(f->dir, 0, 0, 2, tmp, RPS_CKPT_PATH_MAX), 0);
	strcat(tmp, ".tmp");
	assert_int_equal(mkdir(tmp, 0700), 0);
	request(sh);
	rps_shard_ckpt_async_wait(sh);
	assert_int_equal(atomic_load(&sh->ckpts_failed), 1);
	assert_int_equal(atomic_load(&sh->ckpt_clock), 1);
	assert_true(file_exists(f, 1));
	assert_false(file_exists(f, 2));
	rps_shard_ckpt_async_stats(sh, &st);
	assert_int_equal(st.failed, 1);
	assert_int_equal(rmdir(tmp), 0);
	one_clock(sh, 2);
	request(sh);
	rps_shard_ckpt_async_wait(sh);
	assert_true(file_exists(f, 3));
	assert_int_equal(atomic_load(&sh->ckpts_ok), 2);
}

/* Stopping the shard waits for the write in flight. */
static void test_stop_waits(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;

	assert_int_equal(t_declare(sh, 7, 0, N7, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	one_clock(sh, 0);
	rps_shard_ckpt_async_hold(sh, 1);
	request(sh);
	assert_false(file_exists(f, 1));
	rps_shard_ckpt_async_stop(sh);
	assert_true(file_exists(f, 1));
	assert_int_equal(atomic_load(&sh->ckpts_ok), 1);
}

/* ASP, a checkpoint every clock: one due while the previous is in flight is
 * skipped (counted) and taken at the next clock boundary. */
static void test_asp_skips_when_busy(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_ckpt_async_stats st;

	assert_int_equal(t_declare(sh, 7, 0, N7, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	rps_shard_ckpt_async_hold(sh, 1);
	one_clock(sh, 0); /* clock 1: taken, held */
	one_clock(sh, 1); /* clock 2: the writer is busy: skipped */
	rps_shard_ckpt_async_stats(sh, &st);
	assert_int_equal(st.skipped, 1);
	rps_shard_ckpt_async_hold(sh, 0);
	rps_shard_ckpt_async_wait(sh);
	assert_true(file_exists(f, 1));
	assert_false(file_exists(f, 2));
	one_clock(sh, 2); /* clock 3: taken */
	rps_shard_ckpt_async_wait(sh);
	assert_true(file_exists(f, 3));
	rps_shard_ckpt_async_stats(sh, &st);
	assert_int_equal(st.written, 2);
	assert_int_equal(st.skipped, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_snapshot_not_live, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_push_during_chunk_copy, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_request_waits, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_creq_published_after_write, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_failure_keeps_previous, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_stop_waits, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_asp_skips_when_busy, setup_asp, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
