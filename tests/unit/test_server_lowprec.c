/* Low-precision copies of slices (server/lowprec.h): made at a DECLARE with
 * RPS_DECLARE_FLAG_LOWPREC, refreshed by the update thread after every write
 * of the master (ASP steps, BSP clock ends, first assignments, ASSIGN, a
 * restore), always round-to-nearest-even of the float32 master as the
 * codecs' converters give it; the master itself stays float32. */
#include "tests/unit/test_server_util.h"

#include "server/lowprec.h"
#include "src/codec.h"
#include "src/rowprec.h"

#include <rdmaps/table.h>

struct fixture {
	struct rps_shard sh;
	struct t_io io;
};

static int setup_c(void **state, enum rps_consistency c)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct rps_shard_params p;

	assert_non_null(f);
	t_params(&p, c); /* chunks of 256 bytes: 64 floats, 128 2-byte elements */
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

/* A DECLARE of key (one slice) with the pull precision prec, init const a. */
static int declare_lp(struct rps_shard *sh, uint64_t key, uint64_t nelems, float a, uint32_t prec)
{
	struct t_io *io = sh->io_arg;
	struct rps_srv_req *req = calloc(1, sizeof(*req));
	struct rps_ring_entry e;
	int n = io->ndecl;

	assert_non_null(req);
	req->op = RPS_REQ_DECLARE;
	req->req_id = 2000 + (uint32_t)n;
	req->u.decl.key = key;
	req->u.decl.shard = sh->p.idx;
	req->u.decl.nelems = nelems;
	req->u.decl.init_kind = RPS_INIT_CONST;
	req->u.decl.init_a = a;
	req->u.decl.reserved = prec;
	req->u.decl_flags = RPS_DECLARE_FLAG_LOWPREC;
	rps_shard_push_entry(sh, req, &e);
	rps_shard_handle(sh, &e);
	assert_int_equal(io->ndecl, n + 1);
	return io->decl[n].status;
}

/* The 2-byte element the converters make of x. */
static uint16_t narrow1(uint32_t prec, float x)
{
	return prec == RPS_TABLE_BF16 ? rps_codec_bf16_one(x) : rps_codec_f16_one(x);
}

/* Every element of the copy == the converter's rounding of the master,
 * read whole and from an odd offset. */
static void check_copy(struct rps_shard *sh, uint64_t key)
{
	struct rps_slice_meta *m = rps_srv_keytab_lookup(&sh->tab, key, 0);
	const struct rps_lp_copy *lp;
	uint64_t n;
	float *master;
	uint16_t *copy;

	assert_non_null(m);
	lp = rps_lp_of(m);
	assert_non_null(lp);
	n = m->nelems;
	master = malloc(n * sizeof(float));
	copy = malloc(n * 2 + 4);
	assert_non_null(master);
	assert_non_null(copy);
	rps_shard_read(sh, m, 0, n, master);
	rps_lp_read(sh, m, 0, n, copy);
	for (uint64_t i = 0; i < n; i++) {
		if (copy[i] != narrow1(lp->prec, master[i]))
			fail_msg("key %llu element %llu: copy %#x, master %g rounds to %#x",
				 (unsigned long long)key, (unsigned long long)i, copy[i], master[i],
				 narrow1(lp->prec, master[i]));
	}
	if (n > 4) {
		rps_lp_read(sh, m, 3, n - 4, copy); /* odd offset, odd or even count */
		for (uint64_t i = 0; i < n - 4; i++)
			assert_int_equal(copy[i], narrow1(lp->prec, master[3 + i]));
	}
	/* the copy's chunks are clean (even versions, begin == end) */
	for (uint64_t c = 0; c < lp->sl.nchunks; c++) {
		const char *b = (const char *)sh->store.base + rps_store_chunk_off(&lp->sl, c);
		uint64_t vb, ve;

		memcpy(&vb, b, 8);
		memcpy(&ve, b + lp->sl.line + rps_store_chunk_len(&lp->sl, c), 8);
		assert_true(rps_store_image_clean(vb, ve));
	}
	free(master);
	free(copy);
}

static void test_declare_rules(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_slice_meta *m;

	/* 1/3 is representable in neither: the copy holds the rounded value */
	assert_int_equal(declare_lp(sh, 1, 300, 1.0f / 3.0f, RPS_TABLE_BF16), 0);
	m = rps_srv_keytab_lookup(&sh->tab, 1, 0);
	assert_non_null(m);
	assert_non_null(rps_lp_of(m));
	assert_int_equal(rps_lp_of(m)->prec, RPS_TABLE_BF16);
	/* 150 words in chunks of 64: three chunks */
	assert_int_equal(rps_lp_of(m)->sl.nelems, 150);
	assert_int_equal(rps_lp_of(m)->sl.nchunks, 3);
	check_copy(sh, 1);
	{
		float x;

		rps_shard_read(sh, m, 7, 1, &x);
		assert_true(x == 1.0f / 3.0f); /* the master stays float32 */
	}
	/* the same precision again: accepted, the same copy */
	{
		const struct rps_lp_copy *lp = rps_lp_of(m);

		assert_int_equal(declare_lp(sh, 1, 300, 1.0f / 3.0f, RPS_TABLE_BF16), 0);
		assert_ptr_equal(rps_lp_of(m), lp);
	}
	/* another precision: refused, with a reason naming the key and both */
	assert_int_equal(declare_lp(sh, 1, 300, 1.0f / 3.0f, RPS_TABLE_FP16), -EINVAL);
	assert_non_null(strstr(f->io.why, "key 1 slice 0"));
	assert_non_null(strstr(f->io.why, "fp16 refused"));
	assert_non_null(strstr(f->io.why, "bf16 copy"));
	assert_int_equal(rps_lp_of(m)->prec, RPS_TABLE_BF16);
	/* an unknown precision */
	assert_int_equal(declare_lp(sh, 2, 10, 0.0f, 3), -EINVAL);
	assert_non_null(strstr(f->io.why, "pull precision 3 unknown"));
	/* a key declared without a copy gets one later, filled from its values */
	assert_int_equal(t_declare(sh, 4, 0, 5, RPS_INIT_CONST, 70000.0f, 0, NULL), 0);
	assert_null(rps_lp_of(rps_srv_keytab_lookup(&sh->tab, 4, 0)));
	assert_int_equal(declare_lp(sh, 4, 5, 0.0f, RPS_TABLE_FP16), 0);
	check_copy(sh, 4); /* compact, odd count; 70000 is beyond fp16: inf */
	{
		uint16_t h[8];

		rps_lp_read(sh, rps_srv_keytab_lookup(&sh->tab, 4, 0), 0, 5, h);
		assert_int_equal(h[0], 0x7c00);
	}
}

static void test_refresh_asp(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	float g[300];

	assert_int_equal(declare_lp(sh, 1, 300, 0.1f, RPS_TABLE_BF16), 0);
	for (int i = 0; i < 300; i++)
		g[i] = 0.001f * (float)(i - 150);
	/* sgd lr 0.5: each push changes the master; the copy follows at once */
	t_push(sh, 0, 1, 0, 0, 300, 0, g, 1);
	check_copy(sh, 1);
	t_push(sh, 1, 1, 0, 70, 101, 0, g, 2); /* a piece across chunks, odd offset */
	check_copy(sh, 1);
	{
		float x;
		uint16_t h[4];
		struct rps_slice_meta *m = rps_srv_keytab_lookup(&sh->tab, 1, 0);

		rps_shard_read(sh, m, 0, 1, &x);
		assert_true(x == 0.1f + 0.5f * 0.15f); /* the master: float32 math */
		rps_lp_read(sh, m, 0, 1, h);
		assert_int_equal(h[0], rps_codec_bf16_one(x));
	}
}

static void test_refresh_bsp(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_slice_meta *m;
	uint16_t before[300], after[300];
	float g[300];

	assert_int_equal(declare_lp(sh, 1, 300, 0.5f, RPS_TABLE_FP16), 0);
	m = rps_srv_keytab_lookup(&sh->tab, 1, 0);
	rps_lp_read(sh, m, 0, 300, before);
	for (int i = 0; i < 300; i++)
		g[i] = 0.0001f * (float)i;
	t_push(sh, 0, 1, 0, 0, 300, 0, g, 1);
	t_push(sh, 1, 1, 0, 0, 300, 0, g, 2);
	t_clock(sh, 0, 0, 1);
	/* clock 0 not over (worker 1): the copy, like the master, unchanged */
	rps_lp_read(sh, m, 0, 300, after);
	assert_memory_equal(before, after, sizeof(before));
	t_clock(sh, 1, 0, 1);
	assert_int_equal(rps_store_clock(&sh->store), 1);
	rps_lp_read(sh, m, 0, 300, after);
	assert_memory_not_equal(before, after, sizeof(before));
	check_copy(sh, 1);
}

/* ASSIGN (rps_worker_load_model): the values become the master, the copy
 * their rounding. */
static void test_refresh_assign(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_srv_req *req = calloc(1, sizeof(*req));
	struct rps_ring_entry e;
	float v[300];

	assert_int_equal(declare_lp(sh, 1, 300, 0.0f, RPS_TABLE_BF16), 0);
	for (int i = 0; i < 300; i++)
		v[i] = 1.0f + (float)i / 1024.0f; /* most need more than 8 bits */
	assert_non_null(req);
	req->op = RPS_REQ_ASSIGN;
	req->req_id = 5;
	req->u.push.key = 1;
	req->u.push.shard = sh->p.idx;
	req->u.push.count = 300;
	req->status = rps_shard_push_check(sh, &req->u.push, &req->meta);
	assert_int_equal(req->status, 0);
	req->data = malloc(sizeof(v));
	assert_non_null(req->data);
	memcpy(req->data, v, sizeof(v));
	rps_shard_push_entry(sh, req, &e);
	assert_int_equal(e.type, RPS_ENT_ASSIGN);
	rps_shard_handle(sh, &e);
	check_copy(sh, 1);
	{
		struct rps_slice_meta *m = rps_srv_keytab_lookup(&sh->tab, 1, 0);
		float x;
		uint16_t h[4];

		rps_shard_read(sh, m, 3, 1, &x);
		assert_true(x == v[3]);
		rps_lp_read(sh, m, 3, 1, h);
		/* 1 + 3/1024 rounds to 1 in bfloat16 (8 significant bits) */
		assert_int_equal(h[0], rps_codec_bf16_one(1.0f));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_declare_rules, setup_asp, teardown),
	    cmocka_unit_test_setup_teardown(test_refresh_asp, setup_asp, teardown),
	    cmocka_unit_test_setup_teardown(test_refresh_bsp, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_refresh_assign, setup_asp, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
