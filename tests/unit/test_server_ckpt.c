/* Shard checkpoints and SYNC without a network: periodic checkpoints at clock
 * boundaries (BSP: exactly the clocks before), restore into a fresh shard
 * (values, optimizer state, clocks), refusals (corrupt file, another
 * optimizer), on-request checkpoints, and the SYNC entry (late or reconnected
 * workers). */
#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/ckpt.h"
#include "tests/unit/test_server_util.h"

struct fixture {
	struct rps_shard sh;
	struct t_io io;
	char dir[64];
};

static void params(struct fixture *f, struct rps_shard_params *p, enum rps_optim_kind k)
{
	t_params(p, RPS_BSP);
	p->optim.kind = k;
	p->optim.momentum = 0.5f;
	p->ckpt_dir = f->dir;
	p->ckpt_every = 2;
	p->server_shards = 1;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct rps_shard_params p;

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/rps-ckpt-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	params(f, &p, RPS_OPT_MOMENTUM);
	assert_int_equal(rps_shard_init(&f->sh, &p, &t_io_ops, &f->io), 0);
	atomic_store(&f->sh.server_rank, 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	DIR *d = opendir(f->dir);
	struct dirent *de;
	char path[512];

	rps_shard_stop(&f->sh);
	rps_shard_fini(&f->sh);
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", f->dir, de->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* key 7: 200 floats, 4 chunks of 64 (the last short); key 8: K8 floats,
 * one compact chunk (an odd count) */
#define K8 37

static void fill(float *v, size_t n, float x)
{
	for (size_t i = 0; i < n; i++)
		v[i] = x;
}

/* One BSP clock: both workers push g (w + 1 + c) into both keys, then CLOCK. */
static void one_clock(struct rps_shard *sh, uint32_t c)
{
	float g[200];

	for (uint32_t w = 0; w < 2; w++) {
		fill(g, 200, (float)(w + 1 + c));
		t_push(sh, w, 7, 0, 0, 200, c, g, 10 * c + w);
		t_push(sh, w, 8, 0, 0, K8, c, g, 100 + 10 * c + w);
		t_clock(sh, w, c, 2);
	}
	assert_int_equal(rps_store_clock(&sh->store), c + 1);
}

static int file_exists(const struct fixture *f, uint64_t clock)
{
	char path[RPS_CKPT_PATH_MAX];

	assert_int_equal(rps_ckpt_path(f->dir, 0, 0, clock, path, sizeof(path)), 0);
	return access(path, F_OK) == 0;
}

static void restore_into(struct fixture *f, struct rps_shard *sh2, struct t_io *io2,
			 enum rps_optim_kind k, uint64_t clock, int want_rc)
{
	struct rps_shard_params p;
	struct rps_shard_restore r;

	params(f, &p, k);
	assert_int_equal(rps_shard_init(sh2, &p, &t_io_ops, io2), 0);
	memset(&r, 0, sizeof(r));
	assert_int_equal(rps_ckpt_path(f->dir, 0, 0, clock, r.path, sizeof(r.path)), 0);
	r.rank = 0;
	r.nshards = 1;
	rps_shard_restore_run(sh2, &r);
	assert_int_equal(atomic_load(&r.done), 1);
	assert_int_equal(r.rc, want_rc);
	if (!want_rc) {
		assert_int_equal(r.clock, clock);
		assert_int_equal(r.nslices, 2);
	}
}

/* Periodic checkpoints at clock boundaries; a restore gives back exactly the
 * parameters, the momentum and the clocks of that boundary. */
static void test_write_restore(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh, sh2;
	struct t_io io2;
	struct rps_declare_ack a;
	float at2[300], m2[300], v[300];
	struct rps_slice_meta *m, *mm;

	assert_int_equal(t_declare(sh, 7, 0, 200, RPS_INIT_CONST, 1.5f, 0, &a), 0);
	assert_int_equal(t_declare(sh, 8, 0, K8, RPS_INIT_ZEROS, 0, 0, &a), 0);
	one_clock(sh, 0);
	assert_false(file_exists(f, 1)); /* every 2 clocks */
	one_clock(sh, 1);
	assert_true(file_exists(f, 2));
	assert_int_equal(atomic_load(&sh->ckpts_ok), 1);
	assert_int_equal(atomic_load(&sh->ckpt_clock), 2);
	t_read(sh, 7, 0, 0, 200, at2);
	t_read(sh, 8, 0, 0, K8, at2 + 200);
	m = rps_srv_keytab_lookup(&sh->tab, 7, 0);
	memcpy(m2, m->opt.m, 200 * sizeof(float));
	memcpy(m2 + 200, rps_srv_keytab_lookup(&sh->tab, 8, 0)->opt.m, K8 * sizeof(float));
	one_clock(sh, 2); /* moves on; no file at 3 */
	assert_false(file_exists(f, 3));
	t_read(sh, 7, 0, 0, 1, v);
	assert_true(v[0] != at2[0]);

	memset(&io2, 0, sizeof(io2));
	restore_into(f, &sh2, &io2, RPS_OPT_MOMENTUM, 2, 0);
	assert_int_equal(rps_store_clock(&sh2.store), 2);
	assert_int_equal(rps_store_worker_clock(&sh2.store, 0), 2);
	assert_int_equal(rps_store_worker_clock(&sh2.store, 1), 2);
	t_read(&sh2, 7, 0, 0, 200, v);
	t_read(&sh2, 8, 0, 0, K8, v + 200);
	assert_memory_equal(v, at2, (200 + K8) * sizeof(float));
	mm = rps_srv_keytab_lookup(&sh2.tab, 7, 0);
	assert_non_null(mm);
	assert_memory_equal(mm->opt.m, m2, 200 * sizeof(float));
	assert_memory_equal(rps_srv_keytab_lookup(&sh2.tab, 8, 0)->opt.m, m2 + 200,
			    K8 * sizeof(float));
	/* the file holds values, not the layout: the restored slices have the
	 * geometry of their length, chunked with a short last chunk and compact */
	assert_true(mm->sl.line == RPS_STORE_LINE && mm->sl.nchunks == 4 &&
		    rps_store_chunk_len(&mm->sl, 3) == 64);
	assert_true(rps_srv_keytab_lookup(&sh2.tab, 8, 0)->sl.line == RPS_STORE_WORD);
	assert_true(rps_srv_keytab_lookup(&sh2.tab, 8, 0)->sl.chunk_bytes == 152);
	assert_int_equal(mm->opt.step, m->opt.step - 1);
	/* the restored shard goes on: the same clock 2 gives the same values */
	one_clock(&sh2, 2);
	t_read(&sh2, 7, 0, 0, 200, v);
	t_read(sh, 7, 0, 0, 200, at2);
	assert_memory_equal(v, at2, 200 * sizeof(float));
	/* a worker re-declaring finds its slice (idempotent, same place) */
	assert_int_equal(t_declare(&sh2, 7, 0, 200, RPS_INIT_CONST, 9.0f, 0, &a), 0);
	assert_int_equal(a.offset, mm->data_off);
	rps_shard_fini(&sh2);
}

/* A damaged file and a file of another optimizer are refused. */
static void test_refusals(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh, sh2;
	struct t_io io2;
	char path[RPS_CKPT_PATH_MAX];
	FILE *fp;
	long len;

	assert_int_equal(t_declare(sh, 7, 0, 200, RPS_INIT_CONST, 1.5f, 0, NULL), 0);
	assert_int_equal(t_declare(sh, 8, 0, K8, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	one_clock(sh, 0);
	one_clock(sh, 1);
	assert_true(file_exists(f, 2));

	memset(&io2, 0, sizeof(io2));
	restore_into(f, &sh2, &io2, RPS_OPT_SGD, 2, -EINVAL); /* another optimizer */
	rps_shard_fini(&sh2);

	assert_int_equal(rps_ckpt_path(f->dir, 0, 0, 2, path, sizeof(path)), 0);
	fp = fopen(path, "r+b");
	assert_non_null(fp);
	fseek(fp, 0, SEEK_END);
	len = ftell(fp);
	fseek(fp, len - 10, SEEK_SET); /* a parameter byte near the end */
	fputc(0x5a, fp);
	fclose(fp);
	memset(&io2, 0, sizeof(io2));
	restore_into(f, &sh2, &io2, RPS_OPT_MOMENTUM, 2, -EBADMSG);
	rps_shard_fini(&sh2);
}

/* A checkpoint on request (RPS_ENT_CKPT) is written at once. */
static void test_on_request(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_ring_entry e;

	assert_int_equal(t_declare(sh, 7, 0, 200, RPS_INIT_CONST, 1.5f, 0, NULL), 0);
	one_clock(sh, 0);
	assert_false(file_exists(f, 1));
	memset(&e, 0, sizeof(e));
	e.type = RPS_ENT_CKPT;
	rps_shard_handle(sh, &e);
	assert_true(file_exists(f, 1));
	assert_int_equal(atomic_load(&sh->ckpts_ok), 1);
	assert_int_equal(atomic_load(&sh->ckpts_failed), 0);
}

static void t_sync(struct rps_shard *sh, uint32_t w, uint32_t clock)
{
	struct rps_ring_entry e;

	memset(&e, 0, sizeof(e));
	e.type = RPS_ENT_SYNC;
	e.info.worker = w;
	e.info.clock = clock;
	rps_shard_handle(sh, &e);
}

/* SYNC: a worker that says it is at clock c is waited for from c on; a dead
 * one is waited for again; a SYNC never moves a worker back. */
static void test_sync(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	float g[200];

	assert_int_equal(t_declare(sh, 7, 0, 200, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	/* a restarted shard at 0, workers at 5 and 6: clock = min = 5 */
	t_sync(sh, 0, 5);
	assert_int_equal(rps_store_clock(&sh->store), 0);
	t_sync(sh, 1, 6);
	assert_int_equal(rps_store_clock(&sh->store), 5);
	assert_int_equal(rps_store_worker_clock(&sh->store, 1), 6);
	t_sync(sh, 1, 3); /* never back */
	assert_int_equal(rps_store_worker_clock(&sh->store, 1), 6);
	/* worker 0 finishes clock 5 with one push: clock 6 = the sum applied */
	fill(g, 200, 2.0f);
	t_push(sh, 0, 7, 0, 0, 200, 5, g, 1);
	t_clock(sh, 0, 5, 1);
	assert_int_equal(rps_store_clock(&sh->store), 6);
	t_read(sh, 7, 0, 0, 1, g);
	assert_true(g[0] == -1.0f); /* momentum: v = 2, w = -0.5 * 2 */
	/* worker 1 dies; a replacement syncs at 8: waited for from 8 */
	t_dead(sh, 1);
	assert_int_equal(sh->live[1], 0);
	t_sync(sh, 1, 8);
	assert_int_equal(sh->live[1], 1);
	assert_int_equal(rps_store_worker_clock(&sh->store, 1), 8);
	t_clock(sh, 0, 6, 0);
	t_clock(sh, 0, 7, 0);
	assert_int_equal(rps_store_clock(&sh->store), 8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_write_restore, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_on_request, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sync, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
