/* itest-table-prec: tables stored in fp16 / bf16 against real rdmaps-sched
 * and rdmaps-server processes (tests/integration/table.sh BIN prec, BSP,
 * run by rdmaps-launch as every worker).
 *
 * Three tables of dim 12: fp16 + sgd, bf16 + adam, fp16 + adagrad; uniform
 * init of scale 0.5. For K clocks every worker pushes gradients (multiples of
 * 1/8, so their sums are exact in fp32 whatever the order) for ids of a pool
 * of 40 feature hashes, overlapping between workers, with duplicates. At
 * clock K every worker pulls the pool twice (the second pull goes by
 * one-sided READs over rdma) and every row must equal, bit for bit, the
 * local computation: the initial row rounded to 16 bits
 * (rps_table_initial_row), then per clock one fp32 optimizer step on the
 * widened row with the summed gradient, rounded to nearest even. Rows never
 * pushed equal rps_table_initial_row, whichever worker created them.
 * Declaring a table again with another precision is refused (-EEXIST), by
 * the worker that declared it and by the servers for another worker.
 *
 * Exit 0 on success; every mismatch is printed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmaps/optim.h>
#include <rdmaps/table.h>
#include <rdmaps/worker.h>

#include "src/optim.h"
#include "src/rowinit.h"
#include "src/rowprec.h"

#define DIM   12
#define POOL  40
#define BATCH 30
#define K     6
#define NT    3

static int failures;

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "itest-table-prec: FAIL: " __VA_ARGS__);                           \
		fputc('\n', stderr);                                                               \
		failures++;                                                                        \
	} while (0)

#define EXPECT(call, want)                                                                         \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_ != (want))                                                                 \
			FAIL("%s: %d, expected %d", #call, rc_, (want));                           \
	} while (0)

static const int kinds[NT] = {RPS_OPT_SGD, RPS_OPT_ADAM, RPS_OPT_ADAGRAD};
static const uint32_t precs[NT] = {RPS_TABLE_FP16, RPS_TABLE_BF16, RPS_TABLE_FP16};

static uint64_t pool_id(int j)
{
	return rps_mix64(0x16b17ull + (uint64_t)j) | 1ull << 62;
}

/* Worker r's ids at clock c: pool entries 0..31 (32..39 never pushed), the
 * first 5 repeated at the end. */
static void batch_ids(int r, int c, uint64_t *ids)
{
	for (int j = 0; j < BATCH - 5; j++)
		ids[j] = pool_id((r * 5 + c * 9 + j * 3) % 32);
	for (int j = 0; j < 5; j++)
		ids[BATCH - 5 + j] = ids[j];
}

/* A gradient: a multiple of 1/8 in [-1, 1]: every sum of a few is exact. */
static float grad(int r, int c, int j, int e)
{
	return (float)(((r + 2) * 5 + c * 3 + j * 11 + e * 7) % 17 - 8) / 8.0f;
}

static void make_spec(struct rps_table_spec *s, int t)
{
	rps_table_spec_init(s);
	s->dim = DIM;
	s->precision = precs[t];
	s->init = RPS_TABLE_INIT_UNIFORM;
	s->init_scale = 0.5f;
	s->seed = 0x9e37ull + (uint64_t)t;
	s->optim.kind = kinds[t];
	s->optim.lr = kinds[t] == RPS_OPT_SGD ? 0.25f : 0.05f;
	s->capacity_hint = 200;
	s->field_mask = RPS_TABLE_SPEC_ALL;
}

/* Local math of table t after nclocks of nworkers: exp[POOL][DIM]. */
static void expected(int t, int nworkers, int nclocks, float exp[POOL][DIM])
{
	static float m[POOL][DIM], v[POOL][DIM];
	uint32_t steps[POOL] = {0};
	struct rps_table_spec s;

	make_spec(&s, t);
	memset(m, 0, sizeof(m));
	memset(v, 0, sizeof(v));
	for (int j = 0; j < POOL; j++)
		(void)rps_table_initial_row(&s, pool_id(j), exp[j]);
	for (int c = 0; c < nclocks; c++) {
		float sum[POOL][DIM];
		int hit[POOL] = {0};

		memset(sum, 0, sizeof(sum));
		for (int r = 0; r < nworkers; r++) {
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
				rps_optim_apply(&s.optim, exp[p], sum[p], m[p], v[p], DIM,
						steps[p]++, 0);
				rps_row_round(s.precision, exp[p], DIM); /* what is stored */
			}
	}
}

static int check(int rank, int t, const char *when, const float *got, float exp[POOL][DIM])
{
	int bad = 0;

	for (int p = 0; p < POOL; p++)
		for (int e = 0; e < DIM; e++) {
			float r = got[p * DIM + e];

			rps_row_round(precs[t], &r, 1);
			if (memcmp(&r, &got[p * DIM + e], 4) && bad++ < 5)
				FAIL("worker %d table %d %s: row %d element %d: %.9g is not a %s "
				     "value",
				     rank, t + 1, when, p, e, (double)got[p * DIM + e],
				     rps_row_prec_name(precs[t]));
			if (memcmp(&got[p * DIM + e], &exp[p][e], 4) && bad++ < 5)
				FAIL("worker %d table %d %s: row %d element %d: %.9g, expected %.9g",
				     rank, t + 1, when, p, e, (double)got[p * DIM + e],
				     (double)exp[p][e]);
		}
	return bad;
}

int main(void)
{
	static float exp[POOL][DIM], out[POOL * DIM];
	struct rps_worker *w;
	struct rps_table_spec s;
	uint64_t ids[POOL];
	struct rps_worker_stats s0, s1;
	int rank, nw, rc, rdma;

	rc = rps_worker_create(NULL, &w);
	if (rc) {
		fprintf(stderr, "itest-table-prec: worker: %s\n", rps_strerror(rc));
		return 1;
	}
	rank = rps_worker_rank(w);
	nw = rps_worker_num_workers(w);
	rdma = !strcmp(rps_worker_transport(w), "rdma");
	for (int t = 0; t < NT; t++) {
		make_spec(&s, t);
		EXPECT(rps_worker_declare_table(w, (rps_table_t)(t + 1), &s), 0);
	}
	if (rank == 0) { /* table 4: fp16, declared by worker 0 only */
		make_spec(&s, 0);
		EXPECT(rps_worker_declare_table(w, 4, &s), 0);
	}
	EXPECT(rps_worker_barrier(w), 0);
	if (rank == 1) { /* the servers refuse table 4 as bf16 (their check) */
		make_spec(&s, 0);
		s.precision = RPS_TABLE_BF16;
		EXPECT(rps_worker_declare_table(w, 4, &s), -EEXIST);
	}
	if (rank == 0) { /* another precision: refused, the table unchanged */
		make_spec(&s, 0);
		s.precision = RPS_TABLE_BF16;
		EXPECT(rps_worker_declare_table(w, 1, &s), -EEXIST);
		s.precision = RPS_TABLE_FP32;
		EXPECT(rps_worker_declare_table(w, 1, &s), -EEXIST);
	}
	for (int c = 0; c < K; c++) {
		uint64_t bids[BATCH];
		float g[BATCH * DIM];

		batch_ids(rank, c, bids);
		for (int j = 0; j < BATCH; j++)
			for (int e = 0; e < DIM; e++)
				g[j * DIM + e] = grad(rank, c, j, e);
		for (int t = 0; t < NT; t++)
			EXPECT(rps_worker_push_rows(w, (rps_table_t)(t + 1), bids, BATCH, g), 0);
		EXPECT(rps_worker_clock(w), 0);
	}
	for (int p = 0; p < POOL; p++)
		ids[p] = pool_id(p);
	for (int t = 0; t < NT; t++) {
		int bad;

		expected(t, nw, K, exp);
		/* BSP: a pull at clock K sees every worker's clocks < K */
		EXPECT(rps_worker_pull_rows(w, (rps_table_t)(t + 1), ids, POOL, out), 0);
		bad = check(rank, t, "first pull", out, exp);
		memset(out, 0, sizeof(out));
		memset(&s0, 0, sizeof(s0));
		s0.field_mask = RPS_WORKER_STAT_ALL;
		EXPECT(rps_worker_stats(w, &s0), 0);
		EXPECT(rps_worker_pull_rows(w, (rps_table_t)(t + 1), ids, POOL, out), 0);
		bad += check(rank, t, "second pull", out, exp);
		memset(&s1, 0, sizeof(s1));
		s1.field_mask = RPS_WORKER_STAT_ALL;
		EXPECT(rps_worker_stats(w, &s1), 0);
		if (rdma && s1.row_slot_reads - s0.row_slot_reads < POOL)
			FAIL("worker %d table %d: second pull over rdma took %llu slot READs, "
			     "expected %d (rows seen before are read one-sided)",
			     rank, t + 1,
			     (unsigned long long)(s1.row_slot_reads - s0.row_slot_reads), POOL);
		if (rdma && !bad)
			printf("itest-table-prec: worker %d table %d: second pull: %llu one-sided "
			       "slot READs of %u bytes, %llu frames\n",
			       rank, t + 1,
			       (unsigned long long)(s1.row_slot_reads - s0.row_slot_reads),
			       (unsigned)(16 + DIM * 2 + 7) / 8 * 8,
			       (unsigned long long)(s1.row_pull_frames - s0.row_pull_frames));
		if (!bad)
			printf("itest-table-prec: worker %d table %d (%s, %s): %d rows exact after "
			       "%d clocks of %d workers (fp32 step, rounded)\n",
			       rank, t + 1, rps_row_prec_name(precs[t]),
			       kinds[t] == RPS_OPT_SGD	  ? "sgd"
			       : kinds[t] == RPS_OPT_ADAM ? "adam"
							  : "adagrad",
			       POOL, K, nw);
	}
	EXPECT(rps_worker_barrier(w), 0);
	rps_worker_destroy(w);
	if (failures) {
		fprintf(stderr, "itest-table-prec: worker %d: %d failures\n", rank, failures);
		return 1;
	}
	printf("itest-table-prec: worker %d ok\n", rank);
	return 0;
}
