/* BSP sums in worker-rank order (server/bsp_sum.h), driven entry by entry:
 * whatever order the frames of a clock arrive in, the applied sum is
 * ((w0 + w1) + w2) in float, bit for bit; RDMAPS_BSP_SUM=arrival adds as they
 * come; dead and revived workers keep their lanes. */
#include <cblas.h>
#include <math.h>

#include "tests/unit/test_server_util.h"
#include "server/bsp_sum.h"
#include "src/alloc.h"
#include "src/util.h"

#define W 3
#define N 10000 /* more than one block of the rank-order pass */
#define KEY 5

struct fixture {
	struct rps_shard sh;
	struct t_io io;
};

static float g[W][N];

/* Values of wide magnitude, both signs: their float sum depends on the order. */
static void fill_wide(void)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;

	for (int w = 0; w < W; w++) {
		for (int i = 0; i < N; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			g[w][i] = ldexpf(1.0f + (float)(x & 0xffff) / 65536.0f,
					 (int)((x >> 16) % 41) - 20) *
				  ((x >> 32) & 1 ? -1.0f : 1.0f);
		}
	}
}

static void setup_w(struct fixture *f, uint32_t nworkers, int arrival)
{
	struct rps_shard_params p;

	memset(f, 0, sizeof(*f));
	t_params(&p, RPS_BSP);
	p.nworkers = nworkers;
	p.bsp_arrival = arrival;
	p.shard_bytes = 1 << 20;
	p.optim.lr = 1.0f; /* SGD lr 1 from zeros: the parameters are -sum exactly */
	assert_int_equal(rps_shard_init(&f->sh, &p, &t_io_ops, &f->io), 0);
	assert_int_equal(t_declare(&f->sh, KEY, 0, N, RPS_INIT_ZEROS, 0, 0, NULL), 0);
}

static void teardown_w(struct fixture *f)
{
	rps_shard_stop(&f->sh);
	rps_shard_fini(&f->sh);
}

/* Worker w's push of clock c in three frames, [0, .3N) [.3N, .7N) [.7N, N),
 * delivered in the order frames[] gives (entries w * 3 + frame). */
static void push_frames(struct rps_shard *sh, const int *order, int n, uint32_t c)
{
	static const uint32_t off[4] = {0, N * 3 / 10, N * 7 / 10, N};

	for (int k = 0; k < n; k++) {
		int w = order[k] / 3, fr = order[k] % 3;

		t_push(sh, (uint32_t)w, KEY, 0, off[fr], off[fr + 1] - off[fr], c,
		       g[w] + off[fr], (uint32_t)k);
	}
}

static void clock_all(struct rps_shard *sh, uint32_t c)
{
	for (uint32_t w = 0; w < W; w++)
		t_clock(sh, w, c, 3);
}

/* -(((0 + g[a]) + g[b]) + g[c]) in float */
static void want_sum(float *v, int a, int b, int c)
{
	for (int i = 0; i < N; i++) {
		float s = 0.0f;

		s += g[a][i];
		s += g[b][i];
		s += g[c][i];
		v[i] = -s;
	}
}

static size_t ndiff(const float *a, const float *b)
{
	size_t d = 0;

	for (int i = 0; i < N; i++)
		d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
	return d;
}

static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};

/* Every worker order, frames of each worker also reversed and interleaved
 * with the others': the same bits, the rank-order sum. */
static void test_rank_order(void **state)
{
	float want[N], v[N], other[N];
	size_t differ = 0;

	(void)state;
	fill_wide();
	want_sum(want, 0, 1, 2);
	for (int p = 0; p < 6; p++) {
		const int *o = perms[p];
		/* whole pushes one after the other, then frames interleaved */
		int seq[9], mix[9];
		struct fixture f;

		for (int k = 0; k < 3; k++)
			for (int fr = 0; fr < 3; fr++) {
				seq[k * 3 + fr] = o[k] * 3 + fr;
				mix[fr * 3 + k] = o[k] * 3 + (2 - fr);
			}
		for (int variant = 0; variant < 2; variant++) {
			setup_w(&f, W, 0);
			assert_int_equal(rps_srv_keytab_lookup(&f.sh.tab, KEY, 0)->nlanes, W);
			push_frames(&f.sh, variant ? mix : seq, 9, 0);
			clock_all(&f.sh, 0);
			assert_int_equal(rps_store_clock(&f.sh.store), 1);
			t_read(&f.sh, KEY, 0, 0, N, v);
			if (ndiff(v, want))
				fail_msg("order %d%d%d (%s): %zu elements differ from the rank-order "
					 "sum",
					 o[0], o[1], o[2], variant ? "frames mixed" : "pushes whole",
					 ndiff(v, want));
			teardown_w(&f);
		}
		/* the data does depend on the order: the test could fail */
		want_sum(other, o[0], o[1], o[2]);
		differ += ndiff(other, want);
	}
	assert_true(differ > 100);
}

/* RDMAPS_BSP_SUM=arrival: one sum, added to in arrival order. */
static void test_arrival(void **state)
{
	static const int rev[9] = {6, 7, 8, 3, 4, 5, 0, 1, 2}; /* workers 2, 1, 0 */
	float want[N], v[N];
	struct fixture f;

	(void)state;
	fill_wide();
	setup_w(&f, W, 1);
	assert_int_equal(rps_srv_keytab_lookup(&f.sh.tab, KEY, 0)->nlanes, 1);
	push_frames(&f.sh, rev, 9, 0);
	clock_all(&f.sh, 0);
	t_read(&f.sh, KEY, 0, 0, N, v);
	want_sum(want, 2, 1, 0);
	assert_int_equal(ndiff(v, want), 0);
	teardown_w(&f);
}

/* One worker: one lane, whatever the setting. */
static void test_one_worker(void **state)
{
	struct fixture f;

	(void)state;
	setup_w(&f, 1, 0);
	assert_int_equal(rps_srv_keytab_lookup(&f.sh.tab, KEY, 0)->nlanes, 1);
	teardown_w(&f);
}

/* A worker that dies after pushing keeps its lane for that clock; its
 * replacement pushes into the same lane later; no lane is in use after each
 * clock is applied (what is left in them is never read: the next clocks'
 * sums below are exact). */
static void test_dead_revive(void **state)
{
	static const int w1[3] = {3, 4, 5}, w20[6] = {6, 7, 8, 0, 1, 2};
	float want[N], v[N];
	struct rps_slice_meta *m;
	struct fixture f;

	(void)state;
	fill_wide();
	setup_w(&f, W, 0);
	m = rps_srv_keytab_lookup(&f.sh.tab, KEY, 0);
	push_frames(&f.sh, w1, 3, 0);
	t_dead(&f.sh, 1);
	push_frames(&f.sh, w20, 6, 0);
	t_clock(&f.sh, 2, 0, 3);
	t_clock(&f.sh, 0, 0, 3);
	assert_int_equal(rps_store_clock(&f.sh.store), 1);
	t_read(&f.sh, KEY, 0, 0, N, v);
	want_sum(want, 0, 1, 2);
	assert_int_equal(ndiff(v, want), 0);
	for (size_t i = 0; i < RPS_ARRAY_SIZE(m->lanes_used); i++)
		assert_true(m->lanes_used[i] == 0);

	/* clock 1 without worker 1, then it is back for clock 2 */
	push_frames(&f.sh, w20, 6, 1);
	t_clock(&f.sh, 0, 1, 3);
	t_clock(&f.sh, 2, 1, 3);
	assert_int_equal(rps_store_clock(&f.sh.store), 2);
	t_revive(&f.sh, 1);
	{
		static const int all_rev[9] = {8, 7, 6, 5, 4, 3, 2, 1, 0};

		push_frames(&f.sh, all_rev, 9, 2);
	}
	clock_all(&f.sh, 2);
	assert_int_equal(rps_store_clock(&f.sh.store), 3);
	t_read(&f.sh, KEY, 0, 0, N, v);
	for (int i = 0; i < N; i++) {
		float s1 = (0.0f + g[0][i]) + g[2][i];
		float s2 = ((0.0f + g[0][i]) + g[1][i]) + g[2][i];
		float x = want[i]; /* after clock 0: -s0; then SGD lr 1 steps */

		x -= s1;
		x -= s2;
		if (memcmp(&x, &v[i], sizeof(float)))
			fail_msg("element %d: %.9g, want %.9g", i, v[i], x);
	}
	teardown_w(&f);
}

/* Whole-slice pushes are written over what the last clock left in a lane
 * (no memset, no pass over zeros): the sums are still those of saxpy into
 * zeros, bit for bit, -0 included, after a clock of partial pushes and after
 * a clock of whole ones, in any arrival order, a second push of the same
 * worker added to its first. Driven through bsp_sum.h directly. */
static void ref_sum(float *want, const int *ws, int n, float scale)
{
	float lanes[W][N];

	memset(lanes, 0, sizeof(lanes));
	for (int k = 0; k < n; k++)
		cblas_saxpy(N, scale, g[ws[k]], 1, lanes[ws[k]], 1);
	memset(want, 0, N * sizeof(float));
	for (int w = 0; w < W; w++) /* rank order; every lane was used */
		cblas_saxpy(N, 1.0f, lanes[w], 1, want, 1);
}

static void test_whole_overwrite(void **state)
{
	static const int c1[4] = {2, 0, 1, 0}; /* worker 0 twice */
	static const int c2[3] = {1, 2, 0};
	struct rps_slice_meta m;
	float want[N];
	float *sum;

	(void)state;
	fill_wide();
	for (int i = 0; i < N; i += 7) /* -0 and +0 products: the sign matters */
		g[i % W][i] = (i / 7) % 2 ? -0.0f : 0.0f;
	g[0][1] = -0.0f;
	g[1][1] = -0.0f;
	g[2][1] = -0.0f;
	memset(&m, 0, sizeof(m));
	m.nelems = N;
	assert_int_equal(rps_bsp_sum_init(&m, W), 0);

	/* clock 0: partial pushes (the lanes are zeroed first) */
	for (int w = 0; w < W; w++) {
		rps_bsp_sum_add(&m, (uint32_t)w, N / 2, N - N / 2, 0.5f, g[w] + N / 2);
		rps_bsp_sum_add(&m, (uint32_t)w, 0, N / 2, 0.5f, g[w]);
	}
	sum = rps_bsp_sum_total(&m);
	assert_non_null(sum);
	{
		static const int all[3] = {0, 1, 2};

		ref_sum(want, all, 3, 0.5f);
	}
	assert_int_equal(ndiff(sum, want), 0);
	rps_bsp_sum_clear(&m);

	/* clocks 1 and 2: whole pushes over the lanes' leftovers */
	for (int k = 0; k < 4; k++)
		rps_bsp_sum_add(&m, (uint32_t)c1[k], 0, N, 0.25f, g[c1[k]]);
	sum = rps_bsp_sum_total(&m);
	ref_sum(want, c1, 4, 0.25f);
	assert_int_equal(ndiff(sum, want), 0);
	rps_bsp_sum_clear(&m);
	for (int k = 0; k < 3; k++)
		rps_bsp_sum_add(&m, (uint32_t)c2[k], 0, N, 1.0f, g[c2[k]]);
	sum = rps_bsp_sum_total(&m);
	ref_sum(want, c2, 3, 1.0f);
	assert_int_equal(ndiff(sum, want), 0);
	assert_true(signbit(sum[1]) == 0); /* ((0 + -0) + -0) + -0 is +0 */
	rps_bsp_sum_clear(&m);
	assert_null(rps_bsp_sum_total(&m)); /* nothing this clock */
	rps_free(m.acc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rank_order),
	    cmocka_unit_test(test_arrival),
	    cmocka_unit_test(test_one_worker),
	    cmocka_unit_test(test_dead_revive),
	    cmocka_unit_test(test_whole_overwrite),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
