/* itest-table-export: tables in a model export (tests/integration/table.sh
 * BIN export; 2 servers of 2 shards, 2 workers, BSP).
 *
 * Two tables declared by every worker: 1 sgd (fp32, uniform init), 2 adam
 * stored as fp16. For K clocks every worker pushes integer gradients for ids
 * drawn from a pool of 64 large feature hashes (overlapping between workers,
 * duplicates inside a batch); pool entries 48..63 are never touched. Then
 * worker 0 exports the model (rps_ctl_export, as rdmaps-ctl export does,
 * with the job's secret from $ITEST_SECRET) to $ITEST_EXPORT and reads it back with rps_table_export_read: each table's
 * ids must be exactly the touched ids, ascending, and every row equal, bit
 * for bit, K clocks of local math (per clock the sum of both workers'
 * gradients, one optimizer step, rounded to fp16 for table 2). Untouched
 * rows are absent. Table 3 (sgd, dim 1024, 300 rows pushed once by worker
 * 0) takes several ROWS frames per shard (63 rows of 1024 floats each): every
 * row exact too. A dense key exported beside the tables must still load
 * with rps_model_load (the table arrays are not keys).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmaps/ctl.h>
#include <rdmaps/model.h>
#include <rdmaps/optim.h>
#include <rdmaps/table.h>
#include <rdmaps/worker.h>

#include "src/optim.h"
#include "src/rowinit.h"
#include "src/rowprec.h"

#define DIM   8
#define POOL  64
#define USED  48
#define BATCH 40
#define K     4
#define SEED  0xe5907ull
#define KEY   5
#define KLEN  100
#define BDIM  1024
#define BROWS 300

static int failures;

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "itest-table-export: FAIL: " __VA_ARGS__);                         \
		fputc('\n', stderr);                                                               \
		failures++;                                                                        \
	} while (0)

#define EXPECT(call, want)                                                                         \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_ != (want))                                                                 \
			FAIL("%s: %d, expected %d", #call, rc_, (want));                           \
	} while (0)

static uint64_t pool_id(int j)
{
	return rps_mix64(0x77e9ull + (uint64_t)j) | 1ull << 62;
}

static void batch_ids(int r, int c, uint64_t *ids)
{
	for (int j = 0; j < BATCH - 5; j++)
		ids[j] = pool_id((r * 5 + c * 13 + j * 7) % USED);
	for (int j = 0; j < 5; j++)
		ids[BATCH - 5 + j] = ids[j];
}

static float grad(int r, int c, int j, int e)
{
	return (float)(((r + 2) * 5 + c * 3 + j * 11 + e) % 7 - 3);
}

static void make_spec(struct rps_table_spec *s, int t)
{
	rps_table_spec_init(s);
	s->dim = DIM;
	s->init = RPS_TABLE_INIT_UNIFORM;
	s->init_scale = 0.5f;
	s->seed = SEED + (uint64_t)t;
	s->optim.kind = t == 1 ? RPS_OPT_SGD : RPS_OPT_ADAM;
	s->optim.lr = t == 1 ? 1.0f : 0.1f;
	s->precision = t == 1 ? RPS_TABLE_FP32 : RPS_TABLE_FP16;
	s->capacity_hint = 1000;
	s->field_mask = RPS_TABLE_SPEC_ALL;
}

/* K clocks of nw workers on table t: exp[p] for touched[p]. */
static void expected(int t, int nw, float exp[POOL][DIM], int touched[POOL])
{
	static float m[POOL][DIM], v[POOL][DIM];
	uint32_t steps[POOL] = {0};
	struct rps_table_spec s;

	make_spec(&s, t);
	memset(m, 0, sizeof(m));
	memset(v, 0, sizeof(v));
	memset(touched, 0, POOL * sizeof(int));
	for (int p = 0; p < POOL; p++)
		rps_table_initial_row(&s, pool_id(p), exp[p]);
	for (int c = 0; c < K; c++) {
		float sum[POOL][DIM];
		int hit[POOL] = {0};

		memset(sum, 0, sizeof(sum));
		for (int r = 0; r < nw; r++) {
			uint64_t ids[BATCH];

			batch_ids(r, c, ids);
			for (int j = 0; j < BATCH; j++)
				for (int p = 0; p < POOL; p++)
					if (pool_id(p) == ids[j]) {
						hit[p] = 1;
						for (int e = 0; e < DIM; e++)
							sum[p][e] += grad(r, c, j, e);
					}
		}
		for (int p = 0; p < POOL; p++)
			if (hit[p]) {
				touched[p] = 1;
				rps_optim_apply(&s.optim, exp[p], sum[p], m[p], v[p], DIM,
						steps[p]++, 0);
				rps_row_round(s.precision, exp[p], DIM);
			}
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void check_table(const char *path, int t, int nw)
{
	static float exp[POOL][DIM];
	int touched[POOL], n = 0, bad = 0;
	uint64_t want[POOL];
	struct rps_table_export x;

	expected(t, nw, exp, touched);
	for (int p = 0; p < POOL; p++)
		if (touched[p])
			want[n++] = pool_id(p);
	qsort(want, (size_t)n, sizeof(want[0]), cmp_u64);
	if (rps_table_export_read(path, (rps_table_t)t, &x)) {
		FAIL("table %d: cannot read it from %s", t, path);
		return;
	}
	if (x.dim != DIM || x.nrows != (size_t)n) {
		FAIL("table %d: %zu rows of %u, expected %d of %d (untouched rows must be absent)",
		     t, x.nrows, x.dim, n, DIM);
	} else {
		for (int i = 0; i < n; i++) {
			int p = 0;

			if (x.ids[i] != want[i]) {
				if (bad++ < 5)
					FAIL("table %d: row %d is id %llx, expected %llx", t, i,
					     (unsigned long long)x.ids[i],
					     (unsigned long long)want[i]);
				continue;
			}
			while (pool_id(p) != x.ids[i])
				p++;
			if (memcmp(x.rows + (size_t)i * DIM, exp[p], sizeof(exp[p])) && bad++ < 5)
				FAIL("table %d: row of pool %d (id %llx): %.9g..., expected %.9g...",
				     t, p, (unsigned long long)x.ids[i],
				     (double)x.rows[(size_t)i * DIM], (double)exp[p][0]);
		}
		if (!bad)
			printf("itest-table-export: table %d (%s): %d rows exported, every row exact "
			       "after %d clocks of %d workers, %d untouched ids absent\n",
			       t, t == 1 ? "sgd fp32" : "adam fp16", n, K, nw, POOL - n);
	}
	rps_table_export_free(&x);
}

/* Table 3: one push of BROWS rows by worker 0 at clock 0. */
static uint64_t big_id(int i)
{
	return rps_mix64(0xb16ull + (uint64_t)i);
}
static float big_grad(int i, int e)
{
	return (float)((i + e) % 5 - 2);
}
static void big_spec(struct rps_table_spec *s)
{
	make_spec(s, 1);
	s->dim = BDIM;
	s->seed = SEED + 3;
}

static void check_big(const char *path)
{
	static float exp[BDIM], g[BDIM];
	struct rps_table_spec s;
	struct rps_table_export x;
	int bad = 0;

	big_spec(&s);
	if (rps_table_export_read(path, 3, &x)) {
		FAIL("table 3: cannot read it from %s", path);
		return;
	}
	if (x.dim != BDIM || x.nrows != BROWS)
		FAIL("table 3: %zu rows of %u, expected %d of %d", x.nrows, x.dim, BROWS, BDIM);
	for (int i = 0; i < BROWS && x.nrows == BROWS && x.dim == BDIM; i++) {
		uint64_t id = big_id(i);
		size_t lo = 0, hi = x.nrows;

		while (lo < hi) { /* ids ascending: binary search */
			size_t mid = (lo + hi) / 2;

			if (x.ids[mid] < id)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo == x.nrows || x.ids[lo] != id) {
			if (bad++ < 5)
				FAIL("table 3: id %llx missing", (unsigned long long)id);
			continue;
		}
		rps_table_initial_row(&s, id, exp);
		for (int e = 0; e < BDIM; e++)
			g[e] = big_grad(i, e);
		rps_optim_apply(&s.optim, exp, g, NULL, NULL, BDIM, 0, 0);
		if (memcmp(x.rows + lo * BDIM, exp, sizeof(exp)) && bad++ < 5)
			FAIL("table 3: row %d (id %llx) differs", i, (unsigned long long)id);
	}
	if (!bad && x.nrows == BROWS)
		printf("itest-table-export: table 3 (sgd fp32, dim %d): %d rows exported in "
		       "pieces, every row exact\n",
		       BDIM, BROWS);
	rps_table_export_free(&x);
}

static void check_dense(const char *path)
{
	rps_key_t key = KEY;
	size_t len = KLEN;
	float v[KLEN];

	EXPECT(rps_model_load(path, &key, &len, 1, v), 0);
	for (int i = 0; i < KLEN; i++)
		if (v[i] != (float)(-K * i)) {
			FAIL("dense key %d element %d: %g, expected %d", KEY, i, (double)v[i],
			     -K * i);
			return;
		}
	printf("itest-table-export: dense key %d loads from the same file (%d floats)\n", KEY,
	       KLEN);
}

int main(void)
{
	const char *path = getenv("ITEST_EXPORT");
	struct rps_worker *w;
	struct rps_table_spec s;
	rps_key_t key = KEY;
	size_t klen = KLEN;
	float kg[KLEN];
	int rank, nw, rc;

	if (!path) {
		fprintf(stderr, "itest-table-export: set ITEST_EXPORT=FILE.npz\n");
		return 2;
	}
	rc = rps_worker_create(NULL, &w);
	if (rc) {
		fprintf(stderr, "itest-table-export: worker: %s\n", rps_strerror(rc));
		return 1;
	}
	rank = rps_worker_rank(w);
	nw = rps_worker_num_workers(w);
	for (int t = 1; t <= 2; t++) {
		make_spec(&s, t);
		EXPECT(rps_worker_declare_table(w, (rps_table_t)t, &s), 0);
	}
	big_spec(&s);
	EXPECT(rps_worker_declare_table(w, 3, &s), 0);
	EXPECT(rps_worker_declare(w, &key, &klen, 1, NULL), 0);
	EXPECT(rps_worker_barrier(w), 0);
	for (int c = 0; c < K; c++) {
		uint64_t ids[BATCH];
		float g[BATCH * DIM];

		batch_ids(rank, c, ids);
		for (int j = 0; j < BATCH; j++)
			for (int e = 0; e < DIM; e++)
				g[j * DIM + e] = grad(rank, c, j, e);
		for (int t = 1; t <= 2; t++)
			EXPECT(rps_worker_push_rows(w, (rps_table_t)t, ids, BATCH, g), 0);
		if (c == 0 && rank == 0) {
			static uint64_t bids[BROWS];
			static float bg[BROWS * BDIM];

			for (int i = 0; i < BROWS; i++) {
				bids[i] = big_id(i);
				for (int e = 0; e < BDIM; e++)
					bg[(size_t)i * BDIM + e] = big_grad(i, e);
			}
			EXPECT(rps_worker_push_rows(w, 3, bids, BROWS, bg), 0);
		}
		for (int i = 0; i < KLEN; i++)
			kg[i] = rank == 0 ? (float)i : 0.0f;
		{
			struct rps_req *rq = NULL;

			EXPECT(rps_worker_push(w, &key, kg, &klen, 1, &rq), 0);
			if (rq)
				EXPECT(rps_req_wait(rq, -1), 0);
		}
		EXPECT(rps_worker_clock(w), 0);
	}
	EXPECT(rps_worker_barrier(w), 0);
	if (rank == 0) {
		/* as rdmaps-ctl: the launcher gives workers tokens, not the job's
		 * secret, so table.sh passes it as ITEST_SECRET */
		struct rps_ctl_opts o;

		memset(&o, 0, sizeof(o));
		if (getenv("ITEST_SECRET")) {
			snprintf(o.secret, sizeof(o.secret), "%s", getenv("ITEST_SECRET"));
			o.field_mask = RPS_CTL_OPT_SECRET;
		}
		rc = rps_ctl_export(&o, path, stdout);
		if (rc) {
			FAIL("rps_ctl_export: %s", rps_strerror(rc));
		} else {
			for (int t = 1; t <= 2; t++)
				check_table(path, t, nw);
			check_big(path);
			check_dense(path);
		}
	}
	EXPECT(rps_worker_barrier(w), 0);
	rps_worker_destroy(w);
	if (failures) {
		fprintf(stderr, "itest-table-export: worker %d: %d failures\n", rank, failures);
		return 1;
	}
	printf("itest-table-export: worker %d ok\n", rank);
	return 0;
}
