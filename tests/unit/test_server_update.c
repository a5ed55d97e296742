/* A shard's update logic driven entry by entry, without a network: declares,
 * ASP/SSP apply, BSP accumulate-and-apply-once, clocks, dead workers,
 * RPS_INIT_PUSH, refused pushes, and the update thread itself. */
#include <math.h>
#include <pthread.h>
#include <time.h>

#include "tests/unit/test_server_util.h"
#include "src/init.h"

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

static int teardown(void **state)
{
	struct fixture *f = *state;

	rps_shard_stop(&f->sh);
	rps_shard_fini(&f->sh);
	free(f);
	return 0;
}

static void fill(float *v, size_t n, float x)
{
	for (size_t i = 0; i < n; i++)
		v[i] = x;
}

/* ---- declare ---- */

static void test_declare(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_declare_ack a1, a2, a3, a4;
	const struct rps_slice_meta *m;
	float v[200];

	assert_int_equal(t_declare(sh, 7, 0, 200, RPS_INIT_CONST, 1.5f, 0, &a1), 0);
	assert_int_equal(a1.key, 7);
	assert_int_equal(a1.nelems, 200);
	assert_int_equal(a1.offset % 64, 0);
	assert_true(a1.offset >= 64 + 64 + 8 * RPS_MAX_WORKERS);
	/* the offset is the data of the first chunk */
	m = rps_srv_keytab_lookup(&sh->tab, 7, 0);
	assert_non_null(m);
	assert_ptr_equal((char *)sh->store.base + a1.offset,
			 (char *)rps_store_chunk_data(&sh->store, &m->sl, 0));
	/* 4 chunks of 64 floats, 64-byte lines, the last with 8 floats in 64 bytes */
	assert_true(m->sl.line == RPS_STORE_LINE && m->sl.chunk_bytes == 256 && m->sl.nchunks == 4);
	assert_true(a1.offset == m->sl.off + 64);
	assert_int_equal(rps_store_chunk_len(&m->sl, 3), 64);
	t_read(sh, 7, 0, 0, 200, v);
	for (int i = 0; i < 200; i++)
		assert_true(v[i] == 1.5f);
	/* a small slice: one compact chunk right after, 8-byte words */
	assert_int_equal(t_declare(sh, 18, 0, 3, RPS_INIT_CONST, 2.5f, 0, &a4), 0);
	m = rps_srv_keytab_lookup(&sh->tab, 18, 0);
	assert_non_null(m);
	assert_true(m->sl.line == RPS_STORE_WORD && m->sl.chunk_bytes == 16 && m->sl.nchunks == 1);
	assert_true(a4.offset == m->sl.off + 8);
	assert_true(m->sl.off == a1.offset - 64 + 3 * (256 + 128) + 128 + 64);
	t_read(sh, 18, 0, 0, 3, v);
	assert_true(v[0] == 2.5f && v[1] == 2.5f && v[2] == 2.5f);
	{
		uint64_t b, e;

		memcpy(&b, (char *)sh->store.base + m->sl.off, 8);
		memcpy(&e, (char *)sh->store.base + m->sl.off + 8 + 16, 8);
		assert_true(b == 2 && e == 2); /* filled once under the seqlock */
	}

	/* idempotent */
	assert_int_equal(t_declare(sh, 7, 0, 200, RPS_INIT_CONST, 9.0f, 0, &a2), 0);
	assert_memory_equal(&a1, &a2, sizeof(a1));
	t_read(sh, 7, 0, 0, 1, v);
	assert_true(v[0] == 1.5f);
	/* another length */
	assert_int_equal(t_declare(sh, 7, 0, 100, RPS_INIT_ZEROS, 0, 0, NULL), -EEXIST);
	/* other slice of the same key: its own place */
	assert_int_equal(t_declare(sh, 7, 1, 10, RPS_INIT_DEFAULT, 0, 0, &a3), 0);
	assert_true(a3.offset == a4.offset - 8 + 32 + 8); /* packed after key 18's 32 bytes */
	t_read(sh, 7, 1, 0, 10, v);
	for (int i = 0; i < 10; i++)
		assert_true(v[i] == 0.0f); /* the shard's default: zeros */
	/* bad initialiser, too big */
	assert_int_equal(t_declare(sh, 8, 0, 10, 99, 0, 0, NULL), -EINVAL);
	assert_int_equal(t_declare(sh, 9, 0, 1u << 20, RPS_INIT_ZEROS, 0, 0, NULL), -ENOSPC);
	assert_null(rps_srv_keytab_lookup(&sh->tab, 9, 0));
}

static void test_declare_random(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	float u[300], n[300];
	double mean = 0, var = 0;

	assert_int_equal(t_declare(sh, 11, 0, 300, RPS_INIT_UNIFORM, -2.0f, 3.0f, NULL), 0);
	assert_int_equal(t_declare(sh, 12, 0, 300, RPS_INIT_NORMAL, 1.0f, 0.5f, NULL), 0);
	t_read(sh, 11, 0, 0, 300, u);
	t_read(sh, 12, 0, 0, 300, n);
	for (int i = 0; i < 300; i++) {
		struct rps_init in = {RPS_INIT_UNIFORM, -2.0f, 3.0f, 7};

		assert_true(u[i] >= -2.0f && u[i] < 3.0f);
		/* deterministic in (seed, key, slice, element) */
		assert_true(u[i] == rps_server_init_value(&in, 11, 0, (uint64_t)i));
		mean += n[i];
	}
	assert_true(u[0] != u[1]);
	mean /= 300;
	for (int i = 0; i < 300; i++)
		var += (n[i] - mean) * (n[i] - mean);
	var /= 300;
	assert_true(fabs(mean - 1.0) < 0.15);
	assert_true(fabs(sqrt(var) - 0.5) < 0.15);
}

static void test_init_parse(void **state)
{
	struct rps_init in = {.seed = 42};

	(void)state;
	assert_int_equal(rps_init_parse("zeros", &in, NULL), 0);
	assert_int_equal(in.kind, RPS_INIT_ZEROS);
	assert_int_equal(in.seed, 42);
	assert_int_equal(rps_init_parse("const:0.25", &in, NULL), 0);
	assert_int_equal(in.kind, RPS_INIT_CONST);
	assert_true(in.a == 0.25f);
	assert_int_equal(rps_init_parse("uniform:-1,1", &in, NULL), 0);
	assert_int_equal(in.kind, RPS_INIT_UNIFORM);
	assert_true(in.a == -1.0f && in.b == 1.0f);
	assert_int_equal(rps_init_parse("normal:0,0.01", &in, NULL), 0);
	assert_int_equal(in.kind, RPS_INIT_NORMAL);
	assert_true(in.b == 0.01f);
	assert_int_equal(rps_init_parse("push", &in, NULL), 0);
	assert_int_equal(in.kind, RPS_INIT_PUSH);
	assert_int_equal(rps_init_parse("const:", &in, NULL), -EINVAL);
	assert_int_equal(rps_init_parse("uniform:1", &in, NULL), -EINVAL);
	assert_int_equal(rps_init_parse("uniform:2,1", &in, NULL), -EINVAL);
	assert_int_equal(rps_init_parse("normal:0,-1", &in, NULL), -EINVAL);
	assert_int_equal(rps_init_parse("gauss", &in, NULL), -EINVAL);
	assert_int_equal(in.kind, RPS_INIT_PUSH); /* untouched on error */
	assert_int_equal(rps_server_consistency_parse("bsp"), RPS_BSP);
	assert_int_equal(rps_server_consistency_parse("ssp"), RPS_SSP);
	assert_int_equal(rps_server_consistency_parse("asp"), RPS_ASP);
	assert_int_equal(rps_server_consistency_parse("BSP!"), -EINVAL);
}

/* ---- ASP ---- */

static void test_asp_apply(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	float g[100], v[100];

	assert_int_equal(t_declare(sh, 1, 0, 100, RPS_INIT_CONST, 1.0f, 0, NULL), 0);
	/* a piece across a chunk boundary (64) */
	fill(g, 30, 2.0f);
	t_push(sh, 0, 1, 0, 50, 30, 0, g, 77);
	assert_int_equal(atomic_load(&f->io.npush), 1);
	assert_int_equal(f->io.push[0].req_id, 77);
	assert_int_equal(f->io.push[0].status, 0);
	t_read(sh, 1, 0, 0, 100, v);
	for (int i = 0; i < 100; i++)
		assert_true(v[i] == ((i >= 50 && i < 80) ? 0.0f : 1.0f)); /* 1 - 0.5 * 2 */
	/* the chunk versions moved and are even again */
	for (uint64_t c = 0; c < 2; c++) {
		uint64_t ver =
		    *(volatile uint64_t *)((char *)sh->store.base +
					   rps_store_chunk_off(
					       &rps_srv_keytab_lookup(&sh->tab, 1, 0)->sl, c));
		assert_true(ver > 0 && (ver & 1) == 0);
	}
	/* applied as popped: worker 1's push too, no waiting for clocks */
	fill(g, 100, -1.0f);
	t_push(sh, 1, 1, 0, 0, 100, 0, g, 78);
	t_read(sh, 1, 0, 0, 100, v);
	assert_true(v[0] == 1.5f);
	assert_true(v[60] == 0.5f);
	assert_int_equal(atomic_load(&sh->pushes_applied), 2);
}

static void test_asp_clocks(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	float g[4] = {1, 1, 1, 1};

	assert_int_equal(t_declare(sh, 1, 0, 4, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	/* CLOCK before its pushes: not done until both pushes counted */
	t_clock(sh, 0, 0, 2);
	assert_int_equal(rps_store_worker_clock(&sh->store, 0), 0);
	t_push(sh, 0, 1, 0, 0, 4, 0, g, 1);
	assert_int_equal(rps_store_worker_clock(&sh->store, 0), 0);
	t_push(sh, 0, 1, 0, 0, 4, 0, g, 2);
	assert_int_equal(rps_store_worker_clock(&sh->store, 0), 1);
	assert_int_equal(rps_store_clock(&sh->store), 0); /* worker 1 still at 0 */
	/* worker 0 runs ahead: clocks 1 and 2 with no pushes for this shard */
	t_clock(sh, 0, 2, 0);
	assert_int_equal(rps_store_worker_clock(&sh->store, 0), 1); /* 1 not ended yet */
	t_clock(sh, 0, 1, 0);
	assert_int_equal(rps_store_worker_clock(&sh->store, 0), 3);
	/* worker 1: push first, then CLOCK */
	t_push(sh, 1, 1, 0, 0, 4, 0, g, 3);
	assert_int_equal(rps_store_worker_clock(&sh->store, 1), 0);
	t_clock(sh, 1, 0, 1);
	assert_int_equal(rps_store_worker_clock(&sh->store, 1), 1);
	assert_int_equal(rps_store_clock(&sh->store), 1); /* min(3, 1) */
	/* a stale CLOCK is ignored */
	t_clock(sh, 1, 0, 5);
	assert_int_equal(rps_store_worker_clock(&sh->store, 1), 1);
}

static void test_ssp_staleness(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	float g[4] = {1, 1, 1, 1};
	float v[4];

	/* staleness_lr: a push s clocks behind the shard gets lr / (1 + s) */
	sh->p.optim.staleness_lr = 1;
	sh->optim_noclip.staleness_lr = 1;
	assert_int_equal(t_declare(sh, 3, 0, 4, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	for (uint32_t c = 0; c < 2; c++) {
		t_clock(sh, 0, c, 0);
		t_clock(sh, 1, c, 0);
	}
	assert_int_equal(rps_store_clock(&sh->store), 2);
	t_push(sh, 0, 3, 0, 0, 4, 0, g, 1); /* pushed at clock 0: 2 behind */
	t_read(sh, 3, 0, 0, 4, v);
	assert_float_equal(v[0], -0.5f / 3.0f, 1e-6);
}

/* ---- refused pushes still count for the clock ---- */

static void test_refused_push_counts(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_slice_meta *m = NULL;
	struct rps_push p = {.key = 5, .slice = 0, .offset = 0, .count = 4};
	float g[8] = {0};
	float v[4];

	assert_int_equal(rps_shard_push_check(sh, &p, &m), -ENOENT);
	assert_int_equal(t_declare(sh, 5, 0, 4, RPS_INIT_CONST, 3.0f, 0, NULL), 0);
	assert_int_equal(rps_shard_push_check(sh, &p, &m), 0);
	assert_non_null(m);
	p.offset = 1;
	assert_int_equal(rps_shard_push_check(sh, &p, &m), -EINVAL);
	p.offset = 5;
	p.count = 0;
	assert_int_equal(rps_shard_push_check(sh, &p, &m), -EINVAL);

	t_push(sh, 0, 6, 0, 0, 4, 0, g, 10); /* unknown key */
	t_push(sh, 0, 5, 0, 2, 4, 0, g, 11); /* beyond the slice */
	assert_int_equal(f->io.push[0].status, -ENOENT);
	assert_int_equal(f->io.push[1].status, -EINVAL);
	t_read(sh, 5, 0, 0, 4, v);
	for (int i = 0; i < 4; i++)
		assert_true(v[i] == 3.0f); /* nothing changed */
	assert_int_equal(atomic_load(&sh->pushes_applied), 0);
	t_clock(sh, 0, 0, 2); /* the worker sent two frames */
	assert_int_equal(rps_store_worker_clock(&sh->store, 0), 1);
}

/* A push of one piece of a tensor whose whole norm is tensor_norm. */
static void push_norm(struct rps_shard *sh, uint64_t key, uint64_t off, uint32_t count,
		      const float *g, float tensor_norm, uint32_t req_id)
{
	struct rps_ring_entry e;

	t_push_entry(sh, 0, key, 0, off, count, 0, g, req_id, &e);
	assert_int_equal(e.type, RPS_ENT_PUSH);
	((struct rps_srv_req *)e.ptr)->u.push.tensor_norm = tensor_norm;
	rps_shard_handle(sh, &e);
}

/* Clipping is per tensor: 64 elements of 2 (norm 16) clipped at 4 are scaled by
 * 1/4, whether they come in one piece or in four (as a small frame size cuts
 * them); each value becomes 1 - 0.5 * 0.5 = 0.75 exactly. Without the tensor's
 * norm each piece of 16 (norm 8) would be clipped on its own, by 1/2. */
static void test_clip_per_tensor(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	float g[64], v[64];

	sh->p.optim.clip_norm = 4.0f;
	fill(g, 64, 2.0f);
	for (uint64_t k = 20; k < 23; k++)
		assert_int_equal(t_declare(sh, k, 0, 64, RPS_INIT_CONST, 1.0f, 0, NULL), 0);
	push_norm(sh, 20, 0, 64, g, 16.0f, 1); /* one frame */
	for (uint32_t i = 0; i < 4; i++)
		push_norm(sh, 21, 16 * i, 16, g, 16.0f, 2 + i); /* four frames */
	for (uint32_t i = 0; i < 4; i++)
		push_norm(sh, 22, 16 * i, 16, g, 0.0f, 6 + i); /* four, no tensor norm */
	t_read(sh, 20, 0, 0, 64, v);
	for (int i = 0; i < 64; i++)
		assert_true(v[i] == 0.75f);
	t_read(sh, 21, 0, 0, 64, v);
	for (int i = 0; i < 64; i++)
		assert_true(v[i] == 0.75f);
	t_read(sh, 22, 0, 0, 64, v);
	for (int i = 0; i < 64; i++)
		assert_true(v[i] == 0.5f); /* per piece: what the tensor norm avoids */
}

/* ---- BSP ---- */

static void test_bsp_apply_once(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	float g[100], v[100];

	/* clipping at 1 is per worker's tensor (here each push is a whole
	 * tensor): each push of norm 2 is clipped to 1 before it is added, and
	 * the sum (2) is applied as it is */
	sh->p.optim.clip_norm = 1.0f;
	assert_int_equal(t_declare(sh, 2, 0, 100, RPS_INIT_CONST, 1.0f, 0, NULL), 0);
	fill(g, 100, 0.0f);
	g[70] = 2.0f;
	t_push(sh, 0, 2, 0, 0, 100, 0, g, 1);
	t_push(sh, 1, 2, 0, 0, 100, 0, g, 2);
	assert_int_equal(atomic_load(&f->io.npush), 2); /* acked when summed */
	t_read(sh, 2, 0, 0, 100, v);
	assert_true(v[70] == 1.0f); /* not applied yet */
	t_clock(sh, 0, 0, 1);
	assert_int_equal(rps_store_worker_clock(&sh->store, 0), 1);
	assert_int_equal(rps_store_clock(&sh->store), 0);
	t_read(sh, 2, 0, 0, 100, v);
	assert_true(v[70] == 1.0f); /* worker 1 not done */
	t_clock(sh, 1, 0, 1);
	assert_int_equal(rps_store_clock(&sh->store), 1);
	t_read(sh, 2, 0, 0, 100, v);
	assert_true(v[70] == 0.0f); /* 1 - 0.5 * (clip(2) + clip(2)) */
	assert_true(v[0] == 1.0f && v[99] == 1.0f);
	assert_null(sh->dirty);
	/* no lane in use: what they hold is never read again (bsp_sum.h) */
	for (size_t i = 0; i < RPS_MAX_WORKERS / 64; i++)
		assert_true(rps_srv_keytab_lookup(&sh->tab, 2, 0)->lanes_used[i] == 0);

	/* next clock: sums start from zero (a partial push zeroes its lane, a
	 * whole one is written over it) */
	sh->p.optim.clip_norm = 0;
	fill(g, 100, 0.5f);
	t_push(sh, 0, 2, 0, 0, 50, 1, g, 3);
	t_push(sh, 0, 2, 0, 50, 50, 1, g, 4);
	t_push(sh, 1, 2, 0, 0, 100, 1, g, 5);
	t_clock(sh, 1, 1, 1);
	t_clock(sh, 0, 1, 2);
	assert_int_equal(rps_store_clock(&sh->store), 2);
	t_read(sh, 2, 0, 0, 100, v);
	assert_float_equal(v[0], 1.0f - 0.5f * 1.0f, 1e-6);
	assert_float_equal(v[70], 0.0f - 0.5f * 1.0f, 1e-6);
}

static void test_bsp_step_is_clock(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	float g[4] = {1, 1, 1, 1};
	float v[4];

	/* step schedule halving every clock: the clock-c sum uses lr * 0.5^c */
	sh->p.optim.schedule = RPS_LR_STEP;
	sh->p.optim.step_size = 1;
	sh->p.optim.gamma = 0.5f;
	sh->optim_noclip = sh->p.optim;
	assert_int_equal(t_declare(sh, 4, 0, 4, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	for (uint32_t c = 0; c < 3; c++) {
		t_push(sh, 0, 4, 0, 0, 4, c, g, c);
		t_clock(sh, 0, c, 1);
		t_clock(sh, 1, c, 0);
		assert_int_equal(rps_store_clock(&sh->store), c + 1);
	}
	t_read(sh, 4, 0, 0, 4, v);
	assert_float_equal(v[0], -(0.5f + 0.25f + 0.125f), 1e-6);
}

static void test_bsp_defer_future_clock(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	float g[4] = {1, 1, 1, 1};
	float v[4];

	assert_int_equal(t_declare(sh, 1, 0, 4, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	t_push(sh, 0, 1, 0, 0, 4, 0, g, 1);
	t_clock(sh, 0, 0, 1);
	/* worker 0 pushes for clock 1 before the shard got there: held back */
	t_push(sh, 0, 1, 0, 0, 4, 1, g, 2);
	assert_int_equal(atomic_load(&f->io.npush), 1);
	t_clock(sh, 1, 0, 0);
	/* clock 0 applied with only the clock-0 push; the clock-1 push summed now */
	assert_int_equal(rps_store_clock(&sh->store), 1);
	assert_int_equal(atomic_load(&f->io.npush), 2);
	t_read(sh, 1, 0, 0, 4, v);
	assert_float_equal(v[0], -0.5f, 1e-6);
	t_clock(sh, 0, 1, 1);
	t_clock(sh, 1, 1, 0);
	t_read(sh, 1, 0, 0, 4, v);
	assert_float_equal(v[0], -1.0f, 1e-6);
}

static void test_bsp_dead_worker(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	float g[4] = {1, 1, 1, 1};
	float v[4];

	assert_int_equal(t_declare(sh, 1, 0, 4, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	t_push(sh, 0, 1, 0, 0, 4, 0, g, 1);
	t_clock(sh, 0, 0, 1);
	assert_int_equal(rps_store_clock(&sh->store), 0);
	/* worker 1 dies: the barrier shrinks */
	t_dead(sh, 1);
	assert_int_equal(rps_store_clock(&sh->store), 1);
	t_read(sh, 1, 0, 0, 4, v);
	assert_float_equal(v[0], -0.5f, 1e-6);
	/* and stays out */
	t_push(sh, 0, 1, 0, 0, 4, 1, g, 2);
	t_clock(sh, 0, 1, 1);
	assert_int_equal(rps_store_clock(&sh->store), 2);
	t_dead(sh, 0); /* nobody left: the clock stays */
	assert_int_equal(rps_store_clock(&sh->store), 2);
}

static void test_bsp_rejoin(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	float g[4] = {1, 1, 1, 1};
	float v[4];

	assert_int_equal(t_declare(sh, 1, 0, 4, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	t_dead(sh, 1);
	for (uint32_t c = 0; c < 2; c++)
		t_clock(sh, 0, c, 0);
	assert_int_equal(rps_store_clock(&sh->store), 2);
	/* a replacement takes rank 1: waited for again, from clock 2 on */
	t_revive(sh, 1);
	assert_int_equal(rps_store_worker_clock(&sh->store, 1), 2);
	t_clock(sh, 0, 2, 0);
	assert_int_equal(rps_store_clock(&sh->store), 2);
	/* it starts at clock 0: old CLOCKs are ignored, old pushes summed now */
	t_push(sh, 1, 1, 0, 0, 4, 0, g, 1);
	t_clock(sh, 1, 0, 1);
	t_clock(sh, 1, 1, 0);
	assert_int_equal(rps_store_clock(&sh->store), 2);
	t_clock(sh, 1, 2, 0);
	assert_int_equal(rps_store_clock(&sh->store), 3);
	t_read(sh, 1, 0, 0, 4, v);
	assert_float_equal(v[0], -0.5f, 1e-6);
	assert_int_equal(f->io.push[0].status, 0);
}

/* ---- RPS_INIT_PUSH ---- */

static void init_push_case(struct fixture *f)
{
	struct rps_shard *sh = &f->sh;
	float a[100], v[100];

	assert_int_equal(t_declare(sh, 9, 0, 100, RPS_INIT_PUSH, 0, 0, NULL), 0);
	t_read(sh, 9, 0, 0, 100, v);
	for (int i = 0; i < 100; i++)
		assert_true(v[i] == 0.0f);
	for (int i = 0; i < 100; i++)
		a[i] = (float)i;
	/* the first piece assigns */
	t_push(sh, 0, 9, 0, 0, 60, 0, a, 1);
	t_read(sh, 9, 0, 0, 100, v);
	for (int i = 0; i < 60; i++)
		assert_true(v[i] == (float)i);
	assert_true(v[60] == 0.0f);
	/* still pending: another worker's same piece assigns too (not a step) */
	t_push(sh, 1, 9, 0, 0, 60, 0, a, 2);
	t_read(sh, 9, 0, 0, 60, v);
	for (int i = 0; i < 60; i++)
		assert_true(v[i] == (float)i);
	/* the rest: now fully assigned */
	t_push(sh, 0, 9, 0, 60, 40, 0, a + 60, 3);
	t_read(sh, 9, 0, 0, 100, v);
	for (int i = 0; i < 100; i++)
		assert_true(v[i] == (float)i);
	assert_int_equal(rps_srv_keytab_lookup(&sh->tab, 9, 0)->pending_init, 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(f->io.push[i].status, 0);
}

static void test_init_push_asp(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	float b[100], v[100];

	init_push_case(f);
	fill(b, 100, 1.0f);
	t_push(sh, 1, 9, 0, 0, 100, 0, b, 4); /* a gradient now */
	t_read(sh, 9, 0, 0, 100, v);
	for (int i = 0; i < 100; i++)
		assert_float_equal(v[i], (float)i - 0.5f, 1e-5);
}

static void test_init_push_bsp(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	float b[100], v[100];

	init_push_case(f);
	/* the assigning pushes counted for clock 0; nothing to sum */
	t_clock(sh, 0, 0, 2);
	t_clock(sh, 1, 0, 1);
	assert_int_equal(rps_store_clock(&sh->store), 1);
	t_read(sh, 9, 0, 0, 100, v);
	assert_true(v[10] == 10.0f);
	fill(b, 100, 1.0f);
	t_push(sh, 0, 9, 0, 0, 100, 1, b, 5);
	t_push(sh, 1, 9, 0, 0, 100, 1, b, 6);
	t_clock(sh, 0, 1, 1);
	t_clock(sh, 1, 1, 1);
	t_read(sh, 9, 0, 0, 100, v);
	for (int i = 0; i < 100; i++)
		assert_float_equal(v[i], (float)i - 1.0f, 1e-5);
}

/* ---- the update thread ---- */

static void test_update_thread(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct timespec ts = {0, 1000000};
	float g[16];
	float v[16];
	const int n = 500;

	assert_int_equal(t_declare(sh, 1, 0, 16, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	assert_int_equal(rps_shard_start(sh, 0), 0);
	fill(g, 16, -0.002f);
	for (int i = 0; i < n; i++) {
		struct rps_ring_entry e;

		t_push_entry(sh, (uint32_t)(i & 1), 1, 0, 0, 16, 0, g, (uint32_t)i, &e);
		assert_int_equal(rps_ring_push_wait(sh->ring, &e, 5000), 0);
	}
	for (uint32_t w = 0; w < 2; w++) {
		struct rps_ring_entry e;

		t_clock_entry(w, 0, n / 2, &e);
		assert_int_equal(rps_ring_push_wait(sh->ring, &e, 5000), 0);
	}
	for (int i = 0; i < 5000 && rps_store_clock(&sh->store) < 1; i++)
		nanosleep(&ts, NULL);
	assert_int_equal(rps_store_clock(&sh->store), 1);
	assert_int_equal(atomic_load(&f->io.npush), n);
	t_read(sh, 1, 0, 0, 16, v);
	assert_float_equal(v[3], 0.001f * n, 1e-4);
	rps_shard_stop(sh);
	assert_int_equal(sh->thread_ok, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_declare, setup_asp, teardown),
	    cmocka_unit_test_setup_teardown(test_declare_random, setup_asp, teardown),
	    cmocka_unit_test(test_init_parse),
	    cmocka_unit_test_setup_teardown(test_asp_apply, setup_asp, teardown),
	    cmocka_unit_test_setup_teardown(test_asp_clocks, setup_asp, teardown),
	    cmocka_unit_test_setup_teardown(test_ssp_staleness, setup_asp, teardown),
	    cmocka_unit_test_setup_teardown(test_refused_push_counts, setup_asp, teardown),
	    cmocka_unit_test_setup_teardown(test_clip_per_tensor, setup_asp, teardown),
	    cmocka_unit_test_setup_teardown(test_bsp_apply_once, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_bsp_step_is_clock, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_bsp_defer_future_clock, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_bsp_dead_worker, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_bsp_rejoin, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_init_push_asp, setup_asp, teardown),
	    cmocka_unit_test_setup_teardown(test_init_push_bsp, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_update_thread, setup_asp, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
