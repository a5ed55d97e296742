/* itest-table-index: one-sided row lookups in the servers' row index
 * (docs/tables.md, Over RDMA), run by rdmaps-launch as 2 workers against 1
 * server of 2 shards, ASP (tests/integration/table.sh BIN index [rdma]).
 *
 *   1. exact: worker 0 pushes integer gradients to NA + NB rows (zero init,
 *      sgd lr 1: every value an integer), growing the table (and rehashing
 *      its index) from nothing; worker 1, which never touched the table,
 *      pulls the NA rows: every value exact, and over RDMA the counters show
 *      index and slot READs and NO ROWS_PULL frame; pulled again: slot READs
 *      only (cached); then rows that do not exist: frames, initial values.
 *   2. growth: worker 0 creates rows continuously (the index rehashes
 *      several times) while worker 1 looks the NB rows up for the first
 *      time, a few per pull: every value exact (buckets found "moved" by a
 *      rehash are counted and retried).
 *   3. torn: worker 0 pushes a step to NC rows continuously (every element
 *      of a row always equals its update count) while worker 1 drops its
 *      cached slots before every pull (so each pull is index lookups): no
 *      row is ever returned torn or older than one seen before.
 * Exit 0 on success; every mismatch is printed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdmaps/table.h>
#include <rdmaps/worker.h>

#include "src/rowinit.h"
#include "worker/table.h"

#define TBL   11
#define DIM   16
#define NA    2000
#define NB    1000
#define NMISS 100
#define NC    64
#define CDIM  128
#define GROW_S 4.0
#define TORN_S 3.0

static int failures;

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		if (failures++ < 10) {                                                             \
			fprintf(stderr, "itest-table-index: FAIL: " __VA_ARGS__);                  \
			fputc('\n', stderr);                                                       \
		}                                                                                  \
	} while (0)
#define EXPECT(call, want)                                                                         \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_ != (want))                                                                 \
			FAIL("%s: %d, expected %d", #call, rc_, (want));                           \
	} while (0)

static uint64_t row_id(int j)
{
	return rps_mix64(0x1d3e5ull + (uint64_t)j) | 1ull << 62;
}

/* Row j after two pushes of gradient -(j % 13 + e). */
static float want(int j, int e)
{
	return 2.0f * (float)(j % 13 + e);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void spec_of(struct rps_table_spec *s, uint32_t dim)
{
	rps_table_spec_init(s);
	s->dim = dim;
	s->init = RPS_TABLE_INIT_ZERO;
	s->optim.kind = RPS_OPT_SGD;
	s->optim.lr = 1.0f;
	s->capacity_hint = 0; /* grow from small: the index rehashes */
	s->field_mask = RPS_TABLE_SPEC_ALL;
}

static void stats(struct rps_worker *w, struct rps_worker_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->field_mask = RPS_WORKER_STAT_ALL;
	EXPECT(rps_worker_stats(w, st), 0);
}

static int check(const char *what, const float *out, const int *js, int n)
{
	int bad = 0;

	for (int i = 0; i < n; i++)
		for (int e = 0; e < DIM; e++)
			if (out[i * DIM + e] != want(js[i], e) && bad++ < 5)
				FAIL("%s: row %d element %d: %g, expected %g", what, js[i], e,
				     (double)out[i * DIM + e], (double)want(js[i], e));
	return bad;
}

static void phase_exact(struct rps_worker *w, int rank, int rdma)
{
	static uint64_t ids[NA + NB];
	static float g[1000 * DIM], out[1000 * DIM];
	static int js[1000];

	if (rank == 0) {
		for (int rep = 0; rep < 2; rep++)
			for (int j0 = 0; j0 < NA + NB; j0 += 1000) {
				for (int i = 0; i < 1000; i++) {
					ids[i] = row_id(j0 + i);
					for (int e = 0; e < DIM; e++)
						g[i * DIM + e] = -(float)((j0 + i) % 13 + e);
				}
				EXPECT(rps_worker_push_rows(w, TBL, ids, 1000, g), 0);
			}
		EXPECT(rps_worker_clock(w), 0);
	}
	EXPECT(rps_worker_barrier(w), 0);
	if (rank == 1) {
		struct rps_worker_stats s0, s1, s2, s3;
		int bad = 0;

		stats(w, &s0);
		for (int j0 = 0; j0 < NA; j0 += 500) {
			int n = 0;

			for (int i = 0; i < 500; i++) {
				js[n] = j0 + i;
				ids[n++] = row_id(j0 + i);
			}
			for (int i = 0; i < 500; i += 7) { /* duplicates */
				js[n] = j0 + i;
				ids[n++] = row_id(j0 + i);
			}
			EXPECT(rps_worker_pull_rows(w, TBL, ids, (size_t)n, out), 0);
			bad += check("first pull", out, js, n);
		}
		stats(w, &s1);
		printf("itest-table-index: %d existing rows pulled by a fresh worker: %s; %llu "
		       "index READs, %llu slot READs, %llu ROWS_PULL frames, %llu moved\n",
		       NA, bad ? "WRONG" : "exact",
		       (unsigned long long)(s1.row_index_reads - s0.row_index_reads),
		       (unsigned long long)(s1.row_slot_reads - s0.row_slot_reads),
		       (unsigned long long)(s1.row_pull_frames - s0.row_pull_frames),
		       (unsigned long long)(s1.row_index_moved - s0.row_index_moved));
		if (rdma && (s1.row_pull_frames != s0.row_pull_frames ||
			     s1.row_index_reads - s0.row_index_reads < NA ||
			     s1.row_slot_reads - s0.row_slot_reads < NA))
			FAIL("rdma: existing rows were not all looked up one-sided");
		for (int j0 = 0; j0 < NA; j0 += 1000) {
			for (int i = 0; i < 1000; i++) {
				js[i] = j0 + i;
				ids[i] = row_id(j0 + i);
			}
			EXPECT(rps_worker_pull_rows(w, TBL, ids, 1000, out), 0);
			check("second pull", out, js, 1000);
		}
		stats(w, &s2);
		printf("itest-table-index: pulled again: %llu index READs, %llu slot READs, %llu "
		       "frames\n",
		       (unsigned long long)(s2.row_index_reads - s1.row_index_reads),
		       (unsigned long long)(s2.row_slot_reads - s1.row_slot_reads),
		       (unsigned long long)(s2.row_pull_frames - s1.row_pull_frames));
		if (rdma && (s2.row_index_reads != s1.row_index_reads ||
			     s2.row_slot_reads - s1.row_slot_reads != NA ||
			     s2.row_pull_frames != s1.row_pull_frames))
			FAIL("rdma: cached rows did not take one READ each");
		/* a mixed batch: missing rows, then 500 cached ones */
		for (int i = 0; i < NMISS; i++)
			ids[i] = row_id(100000 + i);
		for (int i = 0; i < 500; i++) {
			js[i] = 2 * i;
			ids[NMISS + i] = row_id(2 * i);
		}
		EXPECT(rps_worker_pull_rows(w, TBL, ids, NMISS + 500, out), 0);
		for (int i = 0; i < NMISS * DIM; i++)
			if (out[i] != 0.0f && bad++ < 5)
				FAIL("missing row %d: %g, not its initial 0", i / DIM, (double)out[i]);
		check("mixed pull", out + NMISS * DIM, js, 500);
		stats(w, &s3);
		printf("itest-table-index: %d missing rows with 500 cached ones: %llu index READs, "
		       "%llu slot READs, %llu frames\n",
		       NMISS, (unsigned long long)(s3.row_index_reads - s2.row_index_reads),
		       (unsigned long long)(s3.row_slot_reads - s2.row_slot_reads),
		       (unsigned long long)(s3.row_pull_frames - s2.row_pull_frames));
		if (s3.row_pull_frames == s2.row_pull_frames)
			FAIL("missing rows were not asked of the server");
		/* a missing row costs one READ: its bucket pair ends (an empty
		 * entry) before any entry with its tag; a slot READ only on a tag
		 * collision (bits of the hash: rare at this size) */
		if (rdma && (s3.row_index_reads - s2.row_index_reads != NMISS ||
			     s3.row_slot_reads - s2.row_slot_reads > 500 + NMISS / 10))
			FAIL("rdma: %d missing rows took %llu index READs and %llu slot READs "
			     "beside the 500 cached rows' (expected %d and at most %d)",
			     NMISS, (unsigned long long)(s3.row_index_reads - s2.row_index_reads),
			     (unsigned long long)(s3.row_slot_reads - s2.row_slot_reads - 500),
			     NMISS, NMISS / 10);
	}
	EXPECT(rps_worker_barrier(w), 0);
	if (rank == 0) {
		uint64_t rows = 0;

		EXPECT(rps_worker_table_rows(w, TBL, &rows), 0);
		if (rows != NA + NB + NMISS)
			FAIL("the table holds %llu rows, expected %d", (unsigned long long)rows,
			     NA + NB + NMISS);
	}
}

static void phase_grow(struct rps_worker *w, int rank)
{
	static uint64_t ids[256];
	static float out[256 * DIM];
	int js[20];
	double t0;

	EXPECT(rps_worker_barrier(w), 0);
	t0 = now_s();
	if (rank == 0) {
		long made = 0;

		while (now_s() - t0 < GROW_S && made < 60000) {
			for (int i = 0; i < 256; i++)
				ids[i] = row_id(200000 + (int)made + i);
			EXPECT(rps_worker_pull_rows(w, TBL, ids, 256, out), 0);
			made += 256;
		}
		printf("itest-table-index: worker 0 created %ld rows meanwhile\n", made);
	} else if (rank == 1) {
		struct rps_worker_stats s0, s1;
		int j = NA, pulls = 0, bad = 0;
		double step = GROW_S * 0.8 / (NB / 20);

		stats(w, &s0);
		while (j < NA + NB) {
			struct timespec ts = {0, (long)(step * 1e9)};

			for (int i = 0; i < 20; i++) {
				js[i] = j + i;
				ids[i] = row_id(j + i);
			}
			EXPECT(rps_worker_pull_rows(w, TBL, ids, 20, out), 0);
			bad += check("pull during growth", out, js, 20);
			j += 20;
			pulls++;
			nanosleep(&ts, NULL);
		}
		stats(w, &s1);
		printf("itest-table-index: %d rows looked up during growth (%d pulls): %s; %llu "
		       "index READs, %llu buckets found moved, %llu frames\n",
		       NB, pulls, bad ? "WRONG" : "exact",
		       (unsigned long long)(s1.row_index_reads - s0.row_index_reads),
		       (unsigned long long)(s1.row_index_moved - s0.row_index_moved),
		       (unsigned long long)(s1.row_pull_frames - s0.row_pull_frames));
	}
	EXPECT(rps_worker_barrier(w), 0);
}

static void phase_torn(struct rps_worker *w, int rank, int nservers)
{
	static uint64_t ids[NC];
	static float rows[NC * CDIM], g[NC * CDIM];
	float last[NC] = {0};
	struct rps_table_spec s;
	double t0;

	spec_of(&s, CDIM);
	EXPECT(rps_worker_declare_table(w, TBL + 1, &s), 0);
	for (int i = 0; i < NC; i++)
		ids[i] = row_id(500000 + i);
	for (int i = 0; i < NC * CDIM; i++)
		g[i] = -1.0f;
	if (rank == 0)
		EXPECT(rps_worker_pull_rows(w, TBL + 1, ids, NC, rows), 0); /* create them */
	EXPECT(rps_worker_barrier(w), 0);
	t0 = now_s();
	if (rank == 0) {
		long steps = 0;

		while (now_s() - t0 < TORN_S) {
			EXPECT(rps_worker_push_rows(w, TBL + 1, ids, NC, g), 0);
			EXPECT(rps_worker_clock(w), 0);
			steps++;
		}
		printf("itest-table-index: torn: worker 0 pushed %ld steps of %d rows\n", steps,
		       NC);
	} else if (rank == 1) {
		struct rps_worker_stats s0, s1;
		long pulls = 0, torn = 0;

		stats(w, &s0);
		while (now_s() - t0 < TORN_S) {
			for (int sv = 0; sv < nservers; sv++)
				rps_wtable_forget(w, (uint32_t)sv); /* look them up again */
			EXPECT(rps_worker_pull_rows(w, TBL + 1, ids, NC, rows), 0);
			pulls++;
			for (int i = 0; i < NC; i++) {
				const float *r = rows + i * CDIM;
				int bad = 0;

				for (int e = 1; e < CDIM; e++)
					bad |= r[e] != r[0];
				if (bad || r[0] < last[i]) {
					if (torn++ < 5)
						FAIL("torn: pull %ld: row %d torn or older (%g .. %g, "
						     "saw %g)",
						     pulls, i, (double)r[0], (double)r[CDIM - 1],
						     (double)last[i]);
				}
				last[i] = r[0];
			}
		}
		stats(w, &s1);
		printf("itest-table-index: torn: %ld pulls of %d rows by index lookups under "
		       "updates, %ld torn rows returned, %llu torn re-reads, %llu index READs, "
		       "%llu frames\n",
		       pulls, NC, torn,
		       (unsigned long long)(s1.torn_retries - s0.torn_retries),
		       (unsigned long long)(s1.row_index_reads - s0.row_index_reads),
		       (unsigned long long)(s1.row_pull_frames - s0.row_pull_frames));
	}
	EXPECT(rps_worker_barrier(w), 0);
}

int main(void)
{
	struct rps_worker *w;
	struct rps_table_spec s;
	int rc, rank, rdma;

	rc = rps_worker_create(NULL, &w);
	if (rc) {
		fprintf(stderr, "itest-table-index: worker: %s\n", rps_strerror(rc));
		return 1;
	}
	rank = rps_worker_rank(w);
	rdma = !strcmp(rps_worker_transport(w), "rdma");
	spec_of(&s, DIM);
	EXPECT(rps_worker_declare_table(w, TBL, &s), 0);
	EXPECT(rps_worker_barrier(w), 0);
	phase_exact(w, rank, rdma);
	phase_grow(w, rank);
	phase_torn(w, rank, rps_worker_num_servers(w));
	rps_worker_destroy(w);
	if (failures) {
		fprintf(stderr, "itest-table-index: worker %d: %d failures\n", rank, failures);
		return 1;
	}
	printf("itest-table-index: worker %d ok (%s)\n", rank, rdma ? "rdma" : "tcp");
	return 0;
}
