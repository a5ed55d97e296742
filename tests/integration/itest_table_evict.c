/* itest-table-evict: eviction of idle rows (tests/integration/table.sh BIN
 * evict [rdma]; 1 server of 2 shards, 1 worker, BSP, RDMAPS_TABLE_EVICT_CLOCKS
 * = 2, a checkpoint directory but no periodic checkpoints).
 *
 *   1. clock 0: push integer gradients to rows A (20 ids), pull rows B (10
 *      ids, never pushed). Then empty clocks: B (never updated) is evicted,
 *      A (updates in no checkpoint) is kept: the servers' row count falls to
 *      20 (waited for, as a state). A is exact (initial value - gradient).
 *   2. A checkpoint (rps_worker_checkpoint): A's updates are saved. Push
 *      gradients to rows C (5 ids, after the checkpoint: unsaved); empty
 *      clocks: A is evicted, C kept (row count 5).
 *   3. Pull rows D (20 new ids): they take the evicted slots (over rdma the
 *      worker still caches A's slots). Pull A: every row is its initial value
 *      again (re-created by the server from seed and id, or found evicted in
 *      place); D are their initial values; C exact.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdmaps/table.h>
#include <rdmaps/worker.h>

#include "src/rowinit.h"

#define DIM 8
#define NA  20
#define NB  10
#define NC  5
#define ND  20

static int failures;

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "itest-table-evict: FAIL: " __VA_ARGS__);                          \
		fputc('\n', stderr);                                                               \
		failures++;                                                                        \
	} while (0)

#define EXPECT(call, want)                                                                         \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_ != (want))                                                                 \
			FAIL("%s: %d, expected %d", #call, rc_, (want));                           \
	} while (0)

static uint64_t id_of(char set, int i)
{
	return rps_mix64((uint64_t)set << 32 | (uint64_t)i) | 1ull << 63;
}

static float grad(int i, int e)
{
	return (float)((i * 3 + e) % 7 - 3);
}

static void spec(struct rps_table_spec *s)
{
	rps_table_spec_init(s);
	s->dim = DIM;
	s->init = RPS_TABLE_INIT_UNIFORM;
	s->init_scale = 0.5f;
	s->seed = 0xe71c7ull;
	s->optim.kind = RPS_OPT_SGD;
	s->optim.lr = 1.0f;
	s->capacity_hint = 1000;
	s->field_mask = RPS_TABLE_SPEC_ALL;
}

static void ids_of(char set, int n, uint64_t *ids)
{
	for (int i = 0; i < n; i++)
		ids[i] = id_of(set, i);
}

static void push(struct rps_worker *w, char set, int n)
{
	uint64_t ids[32];
	float g[32 * DIM];

	ids_of(set, n, ids);
	for (int i = 0; i < n; i++)
		for (int e = 0; e < DIM; e++)
			g[i * DIM + e] = grad(i, e);
	EXPECT(rps_worker_push_rows(w, 1, ids, (size_t)n, g), 0);
}

/* Pull set's n rows and compare: trained (initial - gradient) or initial. */
static void check(struct rps_worker *w, char set, int n, int trained, const char *when)
{
	struct rps_table_spec s;
	uint64_t ids[32];
	float out[32 * DIM], want[DIM];
	int bad = 0;

	spec(&s);
	ids_of(set, n, ids);
	EXPECT(rps_worker_pull_rows(w, 1, ids, (size_t)n, out), 0);
	for (int i = 0; i < n; i++) {
		rps_table_initial_row(&s, ids[i], want);
		for (int e = 0; trained && e < DIM; e++)
			want[e] -= grad(i, e);
		if (memcmp(out + i * DIM, want, sizeof(want)) && bad++ < 3)
			FAIL("%s: row %c%d: %.9g..., expected %.9g... (%s)", when, set, i,
			     (double)out[i * DIM], (double)want[0],
			     trained ? "trained" : "initial value");
	}
	if (!bad)
		printf("itest-table-evict: %s: %d rows %c exact (%s)\n", when, n, set,
		       trained ? "trained" : "initial values");
}

/* Empty clocks until the servers hold `rows` rows (at most 200 clocks). */
static void clocks_until(struct rps_worker *w, uint64_t rows, const char *what)
{
	uint64_t have = 0;
	int c;

	for (c = 0; c < 200; c++) {
		EXPECT(rps_worker_clock(w), 0);
		EXPECT(rps_worker_table_rows(w, 1, &have), 0);
		if (have == rows)
			break;
	}
	if (have != rows)
		FAIL("%s: %llu rows after %d clocks, expected %llu", what, (unsigned long long)have,
		     c, (unsigned long long)rows);
	else
		printf("itest-table-evict: %s: %llu rows left after %d empty clocks\n", what,
		       (unsigned long long)rows, c + 1);
}

int main(void)
{
	struct rps_worker *w;
	struct rps_table_spec s;
	uint64_t ids[32];
	float out[32 * DIM];
	int rc;

	rc = rps_worker_create(NULL, &w);
	if (rc) {
		fprintf(stderr, "itest-table-evict: worker: %s\n", rps_strerror(rc));
		return 1;
	}
	spec(&s);
	EXPECT(rps_worker_declare_table(w, 1, &s), 0);
	/* 1 */
	push(w, 'A', NA);
	ids_of('B', NB, ids);
	EXPECT(rps_worker_pull_rows(w, 1, ids, NB, out), 0);
	EXPECT(rps_worker_clock(w), 0);
	check(w, 'A', NA, 1, "after clock 0"); /* over rdma: A's slots cached */
	clocks_until(w, NA, "never-updated rows evicted, unsaved ones kept");
	check(w, 'A', NA, 1, "kept (unsaved updates)");
	/* 2 */
	EXPECT(rps_worker_checkpoint(w, UINT32_MAX, 30000), 0);
	push(w, 'C', NC);
	EXPECT(rps_worker_clock(w), 0);
	clocks_until(w, NC, "saved rows evicted, unsaved ones kept");
	/* 3 */
	ids_of('D', ND, ids);
	EXPECT(rps_worker_pull_rows(w, 1, ids, ND, out), 0);
	check(w, 'A', NA, 0, "evicted, pulled again");
	check(w, 'D', ND, 0, "new rows in freed slots");
	check(w, 'C', NC, 1, "kept (updated after the checkpoint)");
	{
		struct rps_worker_stats st;

		memset(&st, 0, sizeof(st));
		st.field_mask = RPS_WORKER_STAT_ALL;
		if (!rps_worker_stats(w, &st))
			printf("itest-table-evict: one-sided slot READs %llu (%llu torn), index "
			       "READs %llu, ROWS_PULL frames %llu\n",
			       (unsigned long long)st.row_slot_reads,
			       (unsigned long long)st.torn_retries,
			       (unsigned long long)st.row_index_reads,
			       (unsigned long long)st.row_pull_frames);
	}
	rps_worker_destroy(w);
	if (failures) {
		fprintf(stderr, "itest-table-evict: %d failures\n", failures);
		return 1;
	}
	printf("itest-table-evict: ok\n");
	return 0;
}
