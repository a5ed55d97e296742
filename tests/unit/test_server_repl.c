/* Replicated shards, the update threads' part (server/repl.h): the sequence
 * numbers seen (a resent push counts once, also for its clock), and a backup
 * shard fed what its primary's update thread took, in that order, holding the
 * same bits as the primary (Adam, ASP; BSP sums). */
#include <math.h>

#include "tests/unit/test_server_util.h"
#include "server/repl.h"
#include "src/util.h"

#define KEY 9
#define N 300

static void test_seen_window(void **state)
{
	struct rps_shard sh;
	struct rps_shard_params p;
	struct t_io io;
	const uint64_t base = 1700000000000000000ull;

	(void)state;
	memset(&io, 0, sizeof(io));
	t_params(&p, RPS_ASP);
	assert_int_equal(rps_shard_init(&sh, &p, &t_io_ops, &io), 0);
	assert_int_equal(rps_repl_seen_check(&sh, 0, base + 1), 0);
	assert_int_equal(rps_repl_seen_check(&sh, 0, base + 1), 1);
	/* out of order: 3 before 2 */
	assert_int_equal(rps_repl_seen_check(&sh, 0, base + 3), 0);
	assert_int_equal(rps_repl_seen_check(&sh, 0, base + 2), 0);
	assert_int_equal(rps_repl_seen_check(&sh, 0, base + 2), 1);
	assert_int_equal(rps_repl_seen_check(&sh, 0, base + 3), 1);
	/* another worker has its own */
	assert_int_equal(rps_repl_seen_check(&sh, 1, base + 1), 0);
	/* the window slides: what falls below it counts as seen */
	assert_int_equal(rps_repl_seen_check(&sh, 0, base + 5000), 0);
	assert_int_equal(rps_repl_seen_check(&sh, 0, base + 5000), 1);
	assert_int_equal(rps_repl_seen_check(&sh, 0, base + 4), 1);
	assert_int_equal(rps_repl_seen_check(&sh, 0, base + 4999), 0);
	/* a rank beyond the workers is not tracked */
	assert_int_equal(rps_repl_seen_check(&sh, 7, 1), 0);
	assert_int_equal(rps_repl_seen_check(&sh, 7, 1), 0);
	rps_shard_stop(&sh);
	rps_shard_fini(&sh);
}

/* A push with a sequence number, through the update thread's entry. */
static void push_seq(struct rps_shard *sh, uint32_t w, uint32_t clock, const float *g,
		     uint64_t seq, uint32_t req_id)
{
	struct rps_ring_entry e;
	struct rps_srv_req *req;

	t_push_entry(sh, w, KEY, 0, 0, N, clock, g, req_id, &e);
	req = e.ptr;
	req->seq = seq;
	req->has_seq = 1;
	rps_shard_handle(sh, &e);
}

/* ASP: the same push twice is applied once, both acknowledged with 0. */
static void test_resend_applied_once(void **state)
{
	struct rps_shard sh;
	struct rps_shard_params p;
	struct t_io io;
	float g[N], v[N];

	(void)state;
	memset(&io, 0, sizeof(io));
	t_params(&p, RPS_ASP);
	p.optim.lr = 1.0f;
	assert_int_equal(rps_shard_init(&sh, &p, &t_io_ops, &io), 0);
	assert_int_equal(t_declare(&sh, KEY, 0, N, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	for (int i = 0; i < N; i++)
		g[i] = (float)(i % 7);
	push_seq(&sh, 0, 0, g, 100, 1);
	push_seq(&sh, 0, 0, g, 100, 2); /* resent */
	push_seq(&sh, 1, 0, g, 100, 3); /* another worker's number 100 */
	assert_int_equal(atomic_load(&io.npush), 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(io.push[i].status, 0);
	t_read(&sh, KEY, 0, 0, N, v);
	for (int i = 0; i < N; i++)
		assert_true(v[i] == -2.0f * (float)(i % 7));
	rps_shard_stop(&sh);
	rps_shard_fini(&sh);
}

/* BSP: a resent push counts once for its clock: with a CLOCK saying 1 push,
 * the clock ends after the first, and the resend changes nothing. */
static void test_resend_counted_once(void **state)
{
	struct rps_shard sh;
	struct rps_shard_params p;
	struct t_io io;
	float g[N], v[N];

	(void)state;
	memset(&io, 0, sizeof(io));
	t_params(&p, RPS_BSP);
	p.optim.lr = 1.0f;
	p.nworkers = 1;
	assert_int_equal(rps_shard_init(&sh, &p, &t_io_ops, &io), 0);
	assert_int_equal(t_declare(&sh, KEY, 0, N, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	for (int i = 0; i < N; i++)
		g[i] = 1.0f;
	/* clock 1's push arrives early (deferred), then again, then clock 0 */
	push_seq(&sh, 0, 1, g, 11, 1);
	push_seq(&sh, 0, 1, g, 11, 2);
	push_seq(&sh, 0, 0, g, 10, 3);
	push_seq(&sh, 0, 0, g, 10, 4);
	t_clock(&sh, 0, 0, 1);
	assert_int_equal(rps_store_clock(&sh.store), 1);
	t_clock(&sh, 0, 1, 1);
	assert_int_equal(rps_store_clock(&sh.store), 2);
	t_read(&sh, KEY, 0, 0, N, v);
	for (int i = 0; i < N; i++)
		assert_true(v[i] == -2.0f);
	assert_int_equal(atomic_load(&io.npush), 4);
	rps_shard_stop(&sh);
	rps_shard_fini(&sh);
}

/* A CLOCK sent again to a promoted backup (RPS_ENT_CLOCK_RESENT): ignored for
 * a clock the worker finished there, counted as any CLOCK otherwise; the
 * same CLOCK twice changes nothing. */
static void resent_clock(struct rps_shard *sh, uint32_t w, uint32_t clock, uint32_t pushes)
{
	struct rps_ring_entry e;

	t_clock_entry(w, clock, pushes, &e);
	e.u64 |= RPS_ENT_CLOCK_RESENT;
	rps_shard_handle(sh, &e);
}

static void test_resent_clocks(void **state)
{
	struct rps_shard sh;
	struct rps_shard_params p;
	struct t_io io;
	float g[N], v[N];

	(void)state;
	memset(&io, 0, sizeof(io));
	t_params(&p, RPS_BSP);
	p.optim.lr = 1.0f;
	p.nworkers = 2;
	assert_int_equal(rps_shard_init(&sh, &p, &t_io_ops, &io), 0);
	assert_int_equal(t_declare(&sh, KEY, 0, N, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	for (int i = 0; i < N; i++)
		g[i] = 1.0f;
	/* clock 0: both workers push once and end it */
	push_seq(&sh, 0, 0, g, 10, 1);
	push_seq(&sh, 1, 0, g, 20, 2);
	t_clock(&sh, 0, 0, 1);
	t_clock(&sh, 1, 0, 1);
	assert_int_equal(rps_store_clock(&sh.store), 1);
	/* clock 1: worker 0's CLOCK (1 push) came, its push not yet; then the
	 * failover: worker 0 sends clocks 0 and 1 again, and its push */
	t_clock(&sh, 0, 1, 1);
	resent_clock(&sh, 0, 0, 1); /* finished: ignored */
	resent_clock(&sh, 0, 1, 1); /* the same again: no change */
	push_seq(&sh, 0, 1, g, 11, 3);
	assert_int_equal(rps_store_clock(&sh.store), 1); /* worker 1 still in clock 1 */
	/* worker 1's CLOCK 1 was lost with the primary: only its resend comes */
	push_seq(&sh, 1, 1, g, 21, 4);
	resent_clock(&sh, 1, 0, 1);
	assert_int_equal(rps_store_clock(&sh.store), 1);
	resent_clock(&sh, 1, 1, 1);
	assert_int_equal(rps_store_clock(&sh.store), 2);
	t_read(&sh, KEY, 0, 0, N, v);
	for (int i = 0; i < N; i++)
		assert_true(v[i] == -4.0f);
	rps_shard_stop(&sh);
	rps_shard_fini(&sh);
}

/* A backup fed the primary's entries in the primary's order (as repl.c's
 * forward does): copies of the request, applied through rps_repl_apply. */

static void test_forward(void *arg, struct rps_shard *sh, const struct rps_ring_entry *e)
{
	struct rps_shard *b = arg;
	struct rps_ring_entry be;

	(void)sh;
	if (e->type == RPS_ENT_PUSH || e->type == RPS_ENT_DECLARE) {
		const struct rps_srv_req *r = e->ptr;
		struct rps_srv_req *c = calloc(1, sizeof(*c));

		assert_non_null(c);
		*c = *r;
		c->meta = NULL;
		c->next = NULL;
		c->u.decl_optim = NULL;
		if (e->type == RPS_ENT_PUSH) {
			c->data = NULL;
			if (r->data) {
				c->data = malloc(r->u.push.count * sizeof(float));
				assert_non_null(c->data);
				memcpy(c->data, r->data, r->u.push.count * sizeof(float));
			}
		} else if (r->u.decl_optim) {
			c->u.decl_optim = malloc(sizeof(*c->u.decl_optim));
			assert_non_null(c->u.decl_optim);
			*c->u.decl_optim = *r->u.decl_optim;
		}
		memset(&be, 0, sizeof(be));
		be.type = RPS_ENT_REPL;
		be.ptr = c;
		rps_shard_handle(b, &be);
		return;
	}
	if (e->type == RPS_ENT_CLOCK || e->type == RPS_ENT_DEAD || e->type == RPS_ENT_SYNC) {
		be = *e;
		rps_shard_handle(b, &be);
	}
}

static void same_bits(enum rps_consistency c)
{
	struct rps_shard pr, bk;
	struct rps_shard_params p;
	struct t_io io_p, io_b;
	float g[N], vp[N], vb[N];
	uint64_t x = 0x9e3779b97f4a7c15ull;

	memset(&io_p, 0, sizeof(io_p));
	memset(&io_b, 0, sizeof(io_b));
	t_params(&p, c);
	p.optim.kind = RPS_OPT_ADAM;
	p.optim.lr = 0.01f;
	assert_int_equal(rps_shard_init(&pr, &p, &t_io_ops, &io_p), 0);
	assert_int_equal(rps_shard_init(&bk, &p, &t_io_ops, &io_b), 0);
	pr.fwd = test_forward;
	pr.fwd_arg = &bk;
	assert_int_equal(t_declare(&pr, KEY, 0, N, RPS_INIT_UNIFORM, -1, 1, NULL), 0);
	for (uint32_t clock = 0; clock < 6; clock++) {
		for (uint32_t w = 0; w < 2; w++) {
			for (int i = 0; i < N; i++) {
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				g[i] = ldexpf((float)(x & 0xffff) / 65536.0f - 0.5f,
					      (int)((x >> 16) % 9) - 4);
			}
			push_seq(&pr, w, clock, g, 1000 + clock, clock * 2 + w);
			t_clock(&pr, w, clock, 1);
		}
	}
	t_read(&pr, KEY, 0, 0, N, vp);
	t_read(&bk, KEY, 0, 0, N, vb);
	assert_int_equal(rps_store_clock(&pr.store), 6);
	assert_int_equal(rps_store_clock(&bk.store), 6);
	assert_memory_equal(vp, vb, sizeof(vp));
	/* it did learn something */
	assert_int_equal(atomic_load(&io_b.npush), 12);
	rps_shard_stop(&pr);
	rps_shard_fini(&pr);
	rps_shard_stop(&bk);
	rps_shard_fini(&bk);
}

static void test_backup_same_bits_asp(void **state)
{
	(void)state;
	same_bits(RPS_ASP);
}

static void test_backup_same_bits_bsp(void **state)
{
	(void)state;
	same_bits(RPS_BSP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_seen_window),
	    cmocka_unit_test(test_resend_applied_once),
	    cmocka_unit_test(test_resend_counted_once),
	    cmocka_unit_test(test_resent_clocks),
	    cmocka_unit_test(test_backup_same_bits_asp),
	    cmocka_unit_test(test_backup_same_bits_bsp),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
