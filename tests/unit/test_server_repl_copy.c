/* A replacement server joining as a backup (server/repl_copy.h): a primary
 * shard's state saved at an entry boundary (BSP, Adam, this clock's partial
 * sums in their worker lanes, a push of a later clock deferred, sequence
 * numbers seen) and loaded into an empty shard; the deferred push forwarded
 * after it as repl.c does, then both fed the same entries: the same bits,
 * clocks and optimizer state, and a push seen before the copy is recognised
 * by the copy. A state of another shape is refused with the reason. */
#include <math.h>

#include "tests/unit/test_server_util.h"
#include "server/repl.h"
#include "server/repl_copy.h"
#include "src/alloc.h"
#include "src/util.h"

#define KEY 9
#define N 300
#define N2 10

/* The backup gets a copy of what the primary's update thread takes. */
static void to_backup(struct rps_shard *b, const struct rps_ring_entry *e)
{
	struct rps_ring_entry be;

	if (e->type == RPS_ENT_PUSH) {
		const struct rps_srv_req *r = e->ptr;
		struct rps_srv_req *c = calloc(1, sizeof(*c));

		assert_non_null(c);
		*c = *r;
		c->meta = NULL;
		c->next = NULL;
		c->data = NULL;
		if (r->data) {
			c->data = malloc(r->u.push.count * sizeof(float));
			assert_non_null(c->data);
			memcpy(c->data, r->data, r->u.push.count * sizeof(float));
		}
		memset(&be, 0, sizeof(be));
		be.type = RPS_ENT_REPL;
		be.ptr = c;
		rps_shard_handle(b, &be);
	} else if (e->type == RPS_ENT_CLOCK) {
		be = *e;
		rps_shard_handle(b, &be);
	}
}

static void fwd(void *arg, struct rps_shard *sh, const struct rps_ring_entry *e)
{
	(void)sh;
	to_backup(arg, e);
}

static void push_seq(struct rps_shard *sh, uint32_t w, uint64_t key, uint32_t n, uint32_t clock,
		     const float *g, uint64_t seq, uint32_t req_id)
{
	struct rps_ring_entry e;
	struct rps_srv_req *req;

	t_push_entry(sh, w, key, 0, 0, n, clock, g, req_id, &e);
	req = e.ptr;
	req->seq = seq;
	req->has_seq = 1;
	rps_shard_handle(sh, &e);
}

static void grads(float *g, int n, uint64_t *x)
{
	for (int i = 0; i < n; i++) {
		*x ^= *x << 13;
		*x ^= *x >> 7;
		*x ^= *x << 17;
		g[i] = ldexpf((float)(*x & 0xffff) / 65536.0f - 0.5f, (int)((*x >> 16) % 9) - 4);
	}
}

static void same(struct rps_shard *a, struct rps_shard *b, uint64_t key, uint64_t n)
{
	struct rps_slice_meta *ma = rps_srv_keytab_lookup(&a->tab, key, 0);
	struct rps_slice_meta *mb = rps_srv_keytab_lookup(&b->tab, key, 0);
	float *va = calloc(n, sizeof(float)), *vb = calloc(n, sizeof(float));

	assert_non_null(ma);
	assert_non_null(mb);
	t_read(a, key, 0, 0, n, va);
	t_read(b, key, 0, 0, n, vb);
	assert_memory_equal(va, vb, n * sizeof(float));
	assert_memory_equal(ma->opt.m, mb->opt.m, n * sizeof(float));
	assert_memory_equal(ma->opt.v, mb->opt.v, n * sizeof(float));
	assert_int_equal(ma->opt.step, mb->opt.step);
	assert_int_equal(ma->data_off, mb->data_off); /* the same places */
	free(va);
	free(vb);
}

static void test_copy_then_follow(void **state)
{
	struct rps_shard pr, bk;
	struct rps_shard_params p;
	struct t_io io_p, io_b;
	float g[N];
	uint64_t x = 0x9e3779b97f4a7c15ull, seq = 1000;
	void *buf = NULL;
	size_t len = 0;
	char why[240];
	uint32_t id = 1;

	(void)state;
	memset(&io_p, 0, sizeof(io_p));
	memset(&io_b, 0, sizeof(io_b));
	t_params(&p, RPS_BSP);
	p.optim.kind = RPS_OPT_ADAM;
	p.optim.lr = 0.01f;
	assert_int_equal(rps_shard_init(&pr, &p, &t_io_ops, &io_p), 0);
	assert_int_equal(rps_shard_init(&bk, &p, &t_io_ops, &io_b), 0);
	assert_int_equal(t_declare(&pr, KEY, 0, N, RPS_INIT_UNIFORM, -1, 1, NULL), 0);
	assert_int_equal(t_declare(&pr, KEY + 1, 0, N2, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	for (uint32_t c = 0; c < 3; c++)
		for (uint32_t w = 0; w < 2; w++) {
			grads(g, N, &x);
			push_seq(&pr, w, KEY, N, c, g, seq++, id++);
			push_seq(&pr, w, KEY + 1, N2, c, g, seq++, id++);
			t_clock(&pr, w, c, 2);
		}
	/* clock 3: worker 0's push in its lane; worker 1 is a clock ahead */
	grads(g, N, &x);
	push_seq(&pr, 0, KEY, N, 3, g, 5000, id++);
	grads(g, N, &x);
	push_seq(&pr, 1, KEY, N, 4, g, 6000, id++);
	assert_non_null(pr.deferred);
	assert_int_equal(rps_store_clock(&pr.store), 3);

	/* the copy at this entry boundary, then what repl.c forwards */
	assert_int_equal(rps_repl_copy_save(&pr, &buf, &len, why, sizeof(why)), 0);
	assert_int_equal(rps_repl_copy_load(&bk, buf, len, why, sizeof(why)), 0);
	rps_free(buf);
	assert_int_equal(rps_store_clock(&bk.store), 3);
	for (struct rps_srv_req *q = pr.deferred; q; q = q->next) {
		struct rps_ring_entry e;

		memset(&e, 0, sizeof(e));
		e.type = RPS_ENT_PUSH;
		e.ptr = q;
		to_backup(&bk, &e);
	}
	pr.fwd = fwd;
	pr.fwd_arg = &bk;

	/* worker 0's clock-3 push resent to the copy: seen, not applied */
	push_seq(&bk, 0, KEY, N, 3, g, 5000, 999);
	grads(g, N, &x);
	push_seq(&pr, 1, KEY, N, 3, g, 5001, id++);
	t_clock(&pr, 0, 3, 1);
	t_clock(&pr, 1, 3, 1);
	assert_int_equal(rps_store_clock(&pr.store), 4);
	grads(g, N, &x);
	push_seq(&pr, 0, KEY, N, 4, g, 5002, id++);
	t_clock(&pr, 0, 4, 1);
	t_clock(&pr, 1, 4, 1);
	for (uint32_t w = 0; w < 2; w++) {
		grads(g, N, &x);
		push_seq(&pr, w, KEY + 1, N2, 5, g, 7000 + w, id++);
		t_clock(&pr, w, 5, 1);
	}
	assert_int_equal(rps_store_clock(&pr.store), 6);
	assert_int_equal(rps_store_clock(&bk.store), 6);
	same(&pr, &bk, KEY, N);
	same(&pr, &bk, KEY + 1, N2);
	rps_shard_stop(&pr);
	rps_shard_fini(&pr);
	rps_shard_stop(&bk);
	rps_shard_fini(&bk);
}

/* Another number of workers: refused, saying why; a shard with slices too. */
static void test_copy_refused(void **state)
{
	struct rps_shard pr, bk, b3;
	struct rps_shard_params p;
	struct t_io io;
	void *buf = NULL;
	size_t len = 0;
	char why[240];

	(void)state;
	memset(&io, 0, sizeof(io));
	t_params(&p, RPS_BSP);
	assert_int_equal(rps_shard_init(&pr, &p, &t_io_ops, &io), 0);
	assert_int_equal(t_declare(&pr, KEY, 0, N, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	assert_int_equal(rps_repl_copy_save(&pr, &buf, &len, why, sizeof(why)), 0);
	p.nworkers = 3;
	assert_int_equal(rps_shard_init(&bk, &p, &t_io_ops, &io), 0);
	assert_int_equal(rps_repl_copy_load(&bk, buf, len, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "workers"));
	/* truncated */
	assert_int_equal(rps_repl_copy_load(&pr, buf, len / 2, why, sizeof(why)), -EEXIST);
	p.nworkers = 2;
	assert_int_equal(rps_shard_init(&b3, &p, &t_io_ops, &io), 0);
	assert_int_equal(rps_repl_copy_load(&b3, buf, len - 4, why, sizeof(why)), -EPROTO);
	rps_free(buf);
	rps_shard_stop(&pr);
	rps_shard_fini(&pr);
	rps_shard_stop(&bk);
	rps_shard_fini(&bk);
	rps_shard_stop(&b3);
	rps_shard_fini(&b3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_copy_then_follow),
	    cmocka_unit_test(test_copy_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
