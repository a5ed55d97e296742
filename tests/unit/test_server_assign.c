/* ASSIGN (rps_worker_load_model) in a shard driven entry by entry: the values
 * become the parameters, the optimizer state and step start afresh, no clock
 * counts it (BSP neither waits for nor holds it back), a wrong offset or
 * count is refused with nothing changed, and RPS_INIT_PUSH slices count it as
 * their first assignment. */
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
	/* momentum: state that an assignment must reset */
	p.optim.kind = RPS_OPT_MOMENTUM;
	p.optim.momentum = 0.5f;
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

	rps_shard_fini(&f->sh);
	free(f);
	return 0;
}

/* An ASSIGN the way the network thread builds it (validation included). */
static void assign(struct rps_shard *sh, uint32_t worker, uint64_t key, uint64_t off,
		   uint32_t count, uint32_t clock, const float *vals, uint32_t req_id)
{
	struct rps_srv_req *req = calloc(1, sizeof(*req));
	struct rps_ring_entry e;

	assert_non_null(req);
	req->op = RPS_REQ_ASSIGN;
	req->req_id = req_id;
	req->worker = worker;
	req->u.push.key = key;
	req->u.push.shard = sh->p.idx;
	req->u.push.offset = off;
	req->u.push.count = count;
	req->u.push.clock = clock;
	req->status = rps_shard_push_check(sh, &req->u.push, &req->meta);
	if (!req->status && count) {
		req->data = malloc(count * sizeof(float));
		assert_non_null(req->data);
		memcpy(req->data, vals, count * sizeof(float));
	}
	rps_shard_push_entry(sh, req, &e);
	assert_int_equal(e.type, RPS_ENT_ASSIGN);
	assert_true(e.info.key == key);
	assert_true(e.info.timestamp_ns == UINT64_MAX); /* as urgent as a control entry */
	rps_shard_handle(sh, &e);
}

static int last_status(struct fixture *f, uint32_t req_id)
{
	int n = atomic_load(&f->io.npush);

	assert_true(n > 0);
	assert_int_equal(f->io.push[n - 1].req_id, req_id);
	return f->io.push[n - 1].status;
}

/* Chunk c's begin and end version words. */
static void versions(struct rps_shard *sh, const struct rps_slice_meta *m, uint64_t c,
		     uint64_t *b_p, uint64_t *e_p)
{
	const char *begin = (const char *)sh->store.base + rps_store_chunk_off(&m->sl, c);

	memcpy(b_p, begin, sizeof(*b_p));
	memcpy(e_p, begin + m->sl.line + rps_store_chunk_len(&m->sl, c), sizeof(*e_p));
}

/* Every chunk written under its seqlock since *before: versions moved on and
 * are even again (no write left open). */
static void versions_moved(struct rps_shard *sh, const struct rps_slice_meta *m,
			   const uint64_t *before)
{
	for (uint64_t c = 0; c < m->sl.nchunks; c++) {
		uint64_t b, e;

		versions(sh, m, c, &b, &e);
		assert_true(b == e && (b & 1) == 0);
		assert_true(b > before[c]);
	}
}

/* ASP: values exact, momentum state and step reset, clocks untouched; the
 * next push steps from a fresh state. Assigned in two pieces, as frames. */
static void test_assign_asp(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_slice_meta *m;
	float g[200], want[200], v[200];
	uint64_t ver[4];

	for (int i = 0; i < 200; i++) {
		g[i] = 1.0f;
		want[i] = (float)i * 0.25f - 7.0f;
	}
	assert_int_equal(t_declare(sh, 7, 0, 200, RPS_INIT_CONST, 1.0f, 0, NULL), 0);
	m = rps_srv_keytab_lookup(&sh->tab, 7, 0);
	assert_non_null(m);
	t_push(sh, 0, 7, 0, 0, 200, 0, g, 1);
	t_push(sh, 1, 7, 0, 0, 200, 0, g, 2);
	assert_true(m->opt.step == 2 && m->opt.m[5] != 0.0f);
	assert_int_equal(atomic_load(&sh->pushes_applied), 2);
	assert_true(m->sl.nchunks == 4);
	for (uint64_t c = 0; c < 4; c++) {
		uint64_t e;

		versions(sh, m, c, &ver[c], &e);
	}

	assign(sh, 0, 7, 0, 120, 0, want, 3);
	assert_int_equal(last_status(f, 3), 0);
	assign(sh, 0, 7, 120, 80, 0, want + 120, 4);
	assert_int_equal(last_status(f, 4), 0);
	t_read(sh, 7, 0, 0, 200, v);
	assert_memory_equal(v, want, sizeof(v));
	for (int i = 0; i < 200; i++)
		assert_true(m->opt.m[i] == 0.0f);
	assert_true(m->opt.step == 0 && m->elems_applied == 0);
	versions_moved(sh, m, ver);
	/* no push, no clock */
	assert_int_equal(atomic_load(&sh->pushes_applied), 2);
	assert_int_equal(rps_store_worker_clock(&sh->store, 0), 0);
	assert_int_equal(rps_store_clock(&sh->store), 0);

	/* fresh momentum: v = g, w -= 0.5 * g */
	t_push(sh, 0, 7, 0, 0, 200, 0, g, 5);
	t_read(sh, 7, 0, 0, 200, v);
	for (int i = 0; i < 200; i++)
		assert_true(v[i] == want[i] - 0.5f);
	assert_true(m->opt.step == 1);
	/* the worker's CLOCK counts its 3 pushes, not the 2 assignments */
	t_clock(sh, 0, 0, 2);
	assert_int_equal(rps_store_worker_clock(&sh->store, 0), 1);
}

/* BSP: an assignment for any clock is applied at once, never held back and
 * never counted; the clock waits for the pushes the CLOCK announced. */
static void test_assign_bsp_no_clock(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	float vals[4] = {10, 20, 30, 40}, g[4] = {2, 2, 2, 2}, v[4];

	assert_int_equal(t_declare(sh, 3, 0, 4, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	assign(sh, 0, 3, 0, 4, 5, vals, 1); /* clock 5: a push would wait */
	assert_int_equal(last_status(f, 1), 0);
	t_read(sh, 3, 0, 0, 4, v);
	assert_memory_equal(v, vals, sizeof(v));
	assert_null(sh->deferred);

	/* worker 0 announces one push for clock 0: the assignment is not it */
	t_clock(sh, 0, 0, 1);
	t_clock(sh, 1, 0, 0);
	assert_int_equal(rps_store_worker_clock(&sh->store, 0), 0);
	assert_int_equal(rps_store_clock(&sh->store), 0);
	t_push(sh, 0, 3, 0, 0, 4, 0, g, 2);
	assert_int_equal(rps_store_clock(&sh->store), 1);
	/* sum applied once, from the assigned values: w -= 0.5 * 2 */
	t_read(sh, 3, 0, 0, 4, v);
	for (int i = 0; i < 4; i++)
		assert_true(v[i] == vals[i] - 1.0f);
}

/* A wrong offset or count, an unknown key: refused, nothing changes. */
static void test_assign_refused(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	float vals[8] = {1, 2, 3, 4, 5, 6, 7, 8}, v[4];

	assert_int_equal(t_declare(sh, 5, 0, 4, RPS_INIT_CONST, 3.0f, 0, NULL), 0);
	assign(sh, 0, 5, 1, 4, 0, vals, 1); /* beyond the slice */
	assert_int_equal(last_status(f, 1), -EINVAL);
	assign(sh, 0, 5, 5, 0, 0, vals, 2); /* offset past the end */
	assert_int_equal(last_status(f, 2), -EINVAL);
	assign(sh, 0, 6, 0, 4, 0, vals, 3); /* no such key */
	assert_int_equal(last_status(f, 3), -ENOENT);
	t_read(sh, 5, 0, 0, 4, v);
	for (int i = 0; i < 4; i++)
		assert_true(v[i] == 3.0f);
	assert_int_equal(rps_store_worker_clock(&sh->store, 0), 0);
}

/* RPS_INIT_PUSH: an assignment is a first assignment too; afterwards pushes
 * step from it. */
static void test_assign_init_push(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_slice_meta *m;
	float vals[70], g[70], v[70];

	for (int i = 0; i < 70; i++) {
		vals[i] = (float)i;
		g[i] = 2.0f;
	}
	assert_int_equal(t_declare(sh, 9, 0, 70, RPS_INIT_PUSH, 0, 0, NULL), 0);
	m = rps_srv_keytab_lookup(&sh->tab, 9, 0);
	assert_true(m->pending_init);
	assign(sh, 0, 9, 0, 30, 0, vals, 1);
	assert_true(m->pending_init);
	assign(sh, 0, 9, 30, 40, 0, vals + 30, 2);
	assert_false(m->pending_init);
	t_read(sh, 9, 0, 0, 70, v);
	assert_memory_equal(v, vals, sizeof(v));
	t_push(sh, 1, 9, 0, 0, 70, 0, g, 3);
	t_read(sh, 9, 0, 0, 70, v);
	for (int i = 0; i < 70; i++)
		assert_true(v[i] == vals[i] - 1.0f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_assign_asp, setup_asp, teardown),
	    cmocka_unit_test_setup_teardown(test_assign_bsp_no_clock, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_assign_refused, setup_asp, teardown),
	    cmocka_unit_test_setup_teardown(test_assign_init_push, setup_asp, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
