/* itest-table-evict-time: time-based eviction of idle rows
 * (tests/integration/table.sh BIN evict_time [rdma]; 1 server of 2 shards, 1
 * worker, ASP, RDMAPS_TABLE_EVICT_SECONDS = S (2), a checkpoint directory but
 * no periodic checkpoints).
 *
 *   1. Push integer gradients to rows A (20 ids), pull rows B (10 ids, never
 *      pushed). The servers' row count falls to 20 (waited for, as a state):
 *      B (never updated) evicted, never sooner than S seconds after it was
 *      pulled; A (updates in no checkpoint) kept, exact.
 *   2. Rows K (8 ids) pulled by frame every 100 ms (a frame pull touches
 *      them) and rows D (8 ids) pulled once: D goes, K stays: the row count
 *      reaches 28 and stays there for 1.5 S more while K is pulled (unless
 *      the machine stalled S seconds between two pulls of K: then said, not
 *      checked).
 *   3. A checkpoint (rps_worker_checkpoint): A's updates are saved; push rows
 *      C (5 ids) after it (unsaved). A (saved) and K (no longer pulled) are
 *      evicted, C kept: the row count falls to 5.
 *   4. Pull A again: their initial values; C exact.
 * Waits are for states (the row count), bounded by 60 s.
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
#define NK  8
#define ND  8

static int failures;
static double secs = 2.0; /* RDMAPS_TABLE_EVICT_SECONDS */

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "itest-table-evict-time: FAIL: " __VA_ARGS__);                     \
		fputc('\n', stderr);                                                               \
		failures++;                                                                        \
	} while (0)

#define EXPECT(call, want)                                                                         \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_ != (want))                                                                 \
			FAIL("%s: %d, expected %d", #call, rc_, (want));                           \
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

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
	s->seed = 0x71e5ull;
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

static void pull(struct rps_worker *w, char set, int n)
{
	uint64_t ids[32];
	float out[32 * DIM];

	ids_of(set, n, ids);
	EXPECT(rps_worker_pull_rows(w, 1, ids, (size_t)n, out), 0);
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
		printf("itest-table-evict-time: %s: %d rows %c exact (%s)\n", when, n, set,
		       trained ? "trained" : "initial values");
}

static uint64_t rows(struct rps_worker *w)
{
	uint64_t n = 0;

	EXPECT(rps_worker_table_rows(w, 1, &n), 0);
	return n;
}

/* Wait until the servers hold `want` rows (at most 60 s); the seconds it
 * took from t0. While waiting, `keep` (if any) is pulled by frame every
 * 100 ms; *gap_p: the longest time between two of those pulls. */
static double wait_rows(struct rps_worker *w, uint64_t want, double t0, char keep, double *gap_p,
			const char *what)
{
	double last = now_s(), gap = 0, t;
	uint64_t have;

	while ((have = rows(w)) != want && now_s() - t0 < 60.0) {
		nap_ms(100);
		if (keep) {
			pull(w, keep, NK);
			t = now_s();
			if (t - last > gap)
				gap = t - last;
			last = t;
		}
	}
	t = now_s() - t0;
	if (gap_p)
		*gap_p = gap;
	if (have != want)
		FAIL("%s: %llu rows after %.1f s, expected %llu", what, (unsigned long long)have, t,
		     (unsigned long long)want);
	else
		printf("itest-table-evict-time: %s: %llu rows left after %.2f s\n", what,
		       (unsigned long long)want, t);
	return t;
}

int main(void)
{
	struct rps_worker *w;
	struct rps_table_spec s;
	const char *env = getenv("RDMAPS_TABLE_EVICT_SECONDS");
	double t0, t, gap = 0;
	int rc;

	if (env && atof(env) > 0)
		secs = atof(env);
	rc = rps_worker_create(NULL, &w);
	if (rc) {
		fprintf(stderr, "itest-table-evict-time: worker: %s\n", rps_strerror(rc));
		return 1;
	}
	spec(&s);
	EXPECT(rps_worker_declare_table(w, 1, &s), 0);
	/* 1 */
	push(w, 'A', NA);
	t0 = now_s();
	pull(w, 'B', NB);
	check(w, 'A', NA, 1, "pushed");
	t = wait_rows(w, NA, t0, 0, NULL, "never-updated rows evicted, unsaved ones kept");
	if (t < secs)
		FAIL("rows B evicted %.2f s after they were pulled, before %.1f s", t, secs);
	check(w, 'A', NA, 1, "kept (unsaved updates)");
	/* 2 */
	pull(w, 'K', NK);
	t0 = now_s();
	pull(w, 'D', ND);
	t = wait_rows(w, NA + NK, t0, 'K', &gap, "rows pulled once evicted, rows pulled often kept");
	if (t < secs)
		FAIL("rows D evicted %.2f s after they were pulled, before %.1f s", t, secs);
	t0 = now_s();
	while (now_s() - t0 < 1.5 * secs) {
		uint64_t have;

		t = now_s();
		pull(w, 'K', NK);
		have = rows(w);
		if (now_s() - t > gap)
			gap = now_s() - t;
		if (have != NA + NK && gap < secs) {
			FAIL("rows pulled every 100 ms were evicted: %llu rows, expected %d",
			     (unsigned long long)have, NA + NK);
			break;
		}
		nap_ms(100);
	}
	if (gap >= secs)
		printf("itest-table-evict-time: the machine stalled %.1f s between two pulls of "
		       "K: not checked\n",
		       gap);
	/* 3 */
	EXPECT(rps_worker_checkpoint(w, UINT32_MAX, 30000), 0);
	push(w, 'C', NC);
	wait_rows(w, NC, now_s(), 0, NULL, "saved rows evicted, unsaved ones kept");
	/* 4 */
	check(w, 'A', NA, 0, "evicted, pulled again");
	check(w, 'C', NC, 1, "kept (updated after the checkpoint)");
	rps_worker_destroy(w);
	if (failures) {
		fprintf(stderr, "itest-table-evict-time: %d failures\n", failures);
		return 1;
	}
	printf("itest-table-evict-time: ok\n");
	return 0;
}
