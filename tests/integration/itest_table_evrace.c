/* itest-table-evrace: one-sided row READs racing eviction, slot reuse and
 * updates (tests/integration/table.sh BIN evrace [rdma]; 1 server of 2
 * shards, 2 workers, ASP, RDMAPS_TABLE_EVICT_CLOCKS = 2, no checkpoints).
 *
 * One table, dim 16, uniform initial values (so a row's initial value names
 * its id: another id's row never matches), sgd lr 1.
 *
 * Worker 0 (the writer), round r = 0, 1, ...:
 *   1. pushes the NH hot rows H (gradient -c(X, e), c in 1..4: after k pushes
 *      row X is init(X) + k c(X), k float adds of c as the server does them)
 *      and publishes k once the push is acknowledged (applied), k + 1 before;
 *   2. pulls NE new ids E(r) (created by the server; never pushed), checks
 *      them, publishes r, and ends its clock. E(r) is idle from then on: the
 *      server evicts it two clocks later and gives its slots to new ids
 *      (E(r + 3), ...); H is pushed every clock, so never evicted;
 *   3. pushes H again and again until worker 1 finished a pull since the
 *      round began (a state, not a time): every round races at least one
 *      read, and the hot rows are updated under every read.
 * Worker 1 (the reader) pulls, again and again, H and every id of E(r - 3 ..
 * r), one-sided over rdma (cached slots; index lookups for rows it has not
 * seen), while those slots are evicted and reused, and follows the writer's
 * clock. Every row must be exact:
 *   - an E row is exactly its initial value (evicted or not; a slot reused
 *     for another id must never be returned: it holds the other id's value);
 *   - an H row is exactly init(X) + k c(X) for one k with lo <= k <= hi,
 *     lo the pushes acknowledged before the pull began, hi those begun when
 *     it ended, and k never below what this reader saw before: no torn row,
 *     no row of another id, no stale (evicted or older) value.
 * The run ends once the writer did at least MIN_ROUNDS rounds and the reader
 * MIN_PULLS pulls. Then: the servers hold far fewer rows than were created
 * (eviction happened), and over rdma the reader's rows were mostly read
 * one-sided and some went by frame (a cached slot found reused, or an index
 * entry removed by a reuse: both only happen when a slot was reused).
 * The two workers share a few counters through a file (ITEST_SHM).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <rdmaps/table.h>
#include <rdmaps/worker.h>

#include "src/rowinit.h"

#define DIM	   16
#define NH	   32
#define NE	   32
#define WIN	   4 /* rounds of E the reader pulls */
#define MIN_ROUNDS 30
#define MIN_PULLS  60
#define MAX_ROUNDS 5000
#define MAX_HOT	   20000 /* pushes of the hot rows (values stay well inside fp32) */
#define TABLE	   3

static int failures;

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "itest-table-evrace: FAIL: " __VA_ARGS__);                         \
		fputc('\n', stderr);                                                               \
		failures++;                                                                        \
	} while (0)

#define EXPECT(call, want)                                                                         \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_ != (want))                                                                 \
			FAIL("%s: %d, expected %d", #call, rc_, (want));                           \
	} while (0)

struct shm {
	_Atomic int64_t round;	   /* E(round) exists; -1 before the first */
	_Atomic uint64_t hstarted; /* H pushes begun (each row's) */
	_Atomic uint64_t hpushed;  /* H pushes acknowledged */
	_Atomic uint64_t rpulls;   /* the reader's finished pulls */
	_Atomic int done;	   /* the writer is done */
	_Atomic int rfail;	   /* the reader failed (the writer stops) */
};

static uint64_t hid(int i)
{
	return rps_mix64(0x40700000ull + (uint64_t)i) | 1ull << 63;
}

static uint64_t eid(int64_t r, int i)
{
	return rps_mix64(0xe0000000000ull + (uint64_t)r * NE + (uint64_t)i) | 1ull << 62;
}

static float cof(uint64_t id, int e)
{
	return (float)(1 + ((rps_mix64(id) >> (2 * e)) & 3));
}

static void spec(struct rps_table_spec *s)
{
	rps_table_spec_init(s);
	s->dim = DIM;
	s->init = RPS_TABLE_INIT_UNIFORM;
	s->init_scale = 0.5f;
	s->seed = 0xe7ace5ull;
	s->optim.kind = RPS_OPT_SGD;
	s->optim.lr = 1.0f;
	s->capacity_hint = 4096;
	s->field_mask = RPS_TABLE_SPEC_ALL;
}

static struct shm *shm_open_file(int create)
{
	const char *path = getenv("ITEST_SHM");
	struct shm *m;
	int fd;

	if (!path || !path[0]) {
		fprintf(stderr, "itest-table-evrace: set ITEST_SHM to a file both workers can "
				"map (table.sh does)\n");
		return NULL;
	}
	fd = open(path, create ? O_RDWR | O_CREAT | O_TRUNC : O_RDWR, 0600);
	if (fd < 0 || (create && ftruncate(fd, sizeof(*m)))) {
		fprintf(stderr, "itest-table-evrace: %.200s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	m = mmap(NULL, sizeof(*m), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return NULL;
	if (create) {
		atomic_store(&m->round, -1);
		atomic_store(&m->hstarted, 0);
		atomic_store(&m->hpushed, 0);
		atomic_store(&m->rpulls, 0);
		atomic_store(&m->done, 0);
		atomic_store(&m->rfail, 0);
	}
	return m;
}

static void pause_short(void)
{
	struct timespec ts = {0, 200000};

	nanosleep(&ts, NULL);
}

/* Rows ids[0..n) pulled into out must be their initial values. */
static int check_initial(const struct rps_table_spec *s, const uint64_t *ids, int n,
			 const float *out, const char *what)
{
	float want[DIM];
	int bad = 0;

	for (int i = 0; i < n; i++) {
		rps_table_initial_row(s, ids[i], want);
		if (memcmp(out + (size_t)i * DIM, want, sizeof(want)) && bad++ < 3)
			FAIL("%s: row %016llx: %.9g %.9g ..., expected its initial value %.9g "
			     "%.9g ... (torn, or another id's row)",
			     what, (unsigned long long)ids[i], (double)out[i * DIM],
			     (double)out[i * DIM + 1], (double)want[0], (double)want[1]);
	}
	return bad;
}

/* One push of every hot row: k (their update count) + 1 once acknowledged. */
static void push_hot(struct rps_worker *w, struct shm *m, const float *g, uint64_t *k_p)
{
	uint64_t ids[NH];

	for (int i = 0; i < NH; i++)
		ids[i] = hid(i);
	atomic_store(&m->hstarted, *k_p + 1);
	EXPECT(rps_worker_push_rows(w, TABLE, ids, NH, g), 0);
	atomic_store(&m->hpushed, ++*k_p);
}

static void writer(struct rps_worker *w, struct shm *m)
{
	struct rps_table_spec s;
	uint64_t ids[NE], rows_left = 0, k = 0;
	static float g[NH * DIM], out[NE * DIM];
	int64_t r;

	spec(&s);
	for (int i = 0; i < NH; i++) {
		ids[i] = hid(i);
		for (int e = 0; e < DIM; e++)
			g[i * DIM + e] = -cof(hid(i), e);
	}
	for (r = 0; r < MAX_ROUNDS && !atomic_load(&m->rfail); r++) {
		uint64_t p0 = atomic_load(&m->rpulls);

		push_hot(w, m, g, &k);
		for (int i = 0; i < NE; i++)
			ids[i] = eid(r, i);
		EXPECT(rps_worker_pull_rows(w, TABLE, ids, NE, out), 0);
		check_initial(&s, ids, NE, out, "writer: new row");
		atomic_store(&m->round, r);
		EXPECT(rps_worker_clock(w), 0);
		if (r + 1 >= MIN_ROUNDS && atomic_load(&m->rpulls) >= MIN_PULLS)
			break;
		/* until the reader finished a pull: update H under its reads */
		while (atomic_load(&m->rpulls) == p0 && !atomic_load(&m->rfail)) {
			if (k < MAX_HOT)
				push_hot(w, m, g, &k);
			else
				pause_short();
		}
	}
	atomic_store(&m->done, 1);
	EXPECT(rps_worker_barrier(w), 0);
	EXPECT(rps_worker_table_rows(w, TABLE, &rows_left), 0);
	printf("itest-table-evrace: writer: %lld rounds, %lld rows created (%d hot, pushed %llu "
	       "times each), %llu rows left on the servers\n",
	       (long long)r + 1, (long long)(r + 1) * NE + NH, NH, (unsigned long long)k,
	       (unsigned long long)rows_left);
	if (!atomic_load(&m->rfail) && rows_left * 2 > (uint64_t)(r + 1) * NE + NH)
		FAIL("%llu rows left of %lld created: idle rows were not evicted",
		     (unsigned long long)rows_left, (long long)(r + 1) * NE + NH);
}

static void reader(struct rps_worker *w, struct shm *m)
{
	struct rps_table_spec s;
	static uint64_t ids[NH + WIN * NE];
	static float out[(NH + WIN * NE) * DIM], val[NH][DIM], tmp[DIM];
	uint64_t kseen[NH] = {0}, pulls = 0, hreads = 0, ereads = 0, frames0;
	struct rps_worker_stats st0 = {.field_mask = RPS_WORKER_STAT_ALL}, st;
	int64_t myclock = 0;
	int rdma = !strcmp(rps_worker_transport(w), "rdma");

	spec(&s);
	for (int i = 0; i < NH; i++)
		rps_table_initial_row(&s, hid(i), val[i]);
	EXPECT(rps_worker_stats(w, &st0), 0);
	frames0 = st0.row_pull_frames;
	while (!atomic_load(&m->done)) {
		int64_t r = atomic_load(&m->round);
		uint64_t lo, hi;
		int n = 0, bad = 0;

		if (r < 0) {
			pause_short();
			continue;
		}
		for (; myclock < r; myclock++) /* follow the writer: the shards' clock moves */
			EXPECT(rps_worker_clock(w), 0);
		for (int i = 0; i < NH; i++)
			ids[n++] = hid(i);
		for (int64_t q = r - WIN + 1; q <= r; q++)
			for (int i = 0; q >= 0 && i < NE; i++)
				ids[n++] = eid(q, i);
		lo = atomic_load(&m->hpushed);
		EXPECT(rps_worker_pull_rows(w, TABLE, ids, (size_t)n, out), 0);
		hi = atomic_load(&m->hstarted);
		pulls++;
		hreads += NH;
		ereads += (uint64_t)(n - NH);
		for (int i = 0; i < NH; i++) {
			const float *v = out + (size_t)i * DIM;
			uint64_t k = kseen[i];

			memcpy(tmp, val[i], sizeof(tmp));
			while (memcmp(tmp, v, sizeof(tmp)) && k < hi) {
				for (int e = 0; e < DIM; e++)
					tmp[e] += cof(hid(i), e);
				k++;
			}
			if (memcmp(tmp, v, sizeof(tmp))) {
				if (bad++ < 3)
					FAIL("pull %llu: hot row %d: %.9g %.9g ... is no value it "
					     "may have (init + k c for %llu <= k <= %llu): torn, "
					     "another id's row, or older than seen",
					     (unsigned long long)pulls, i, (double)v[0],
					     (double)v[1], (unsigned long long)kseen[i],
					     (unsigned long long)hi);
				continue;
			}
			if (k < lo && bad++ < 3)
				FAIL("pull %llu: hot row %d has %llu updates, %llu were "
				     "acknowledged before the pull: stale",
				     (unsigned long long)pulls, i, (unsigned long long)k,
				     (unsigned long long)lo);
			kseen[i] = k;
			memcpy(val[i], tmp, sizeof(tmp));
		}
		bad += check_initial(&s, ids + NH, n - NH, out + (size_t)NH * DIM, "reader: E row");
		atomic_fetch_add(&m->rpulls, 1);
		if (bad) {
			atomic_store(&m->rfail, 1);
			break;
		}
	}
	EXPECT(rps_worker_barrier(w), 0);
	st.field_mask = RPS_WORKER_STAT_ALL;
	EXPECT(rps_worker_stats(w, &st), 0);
	printf("itest-table-evrace: reader: %llu pulls (%llu hot rows, %llu idle/evicted/reused "
	       "rows)%s; hot rows at %llu updates; %llu slot READs, %llu index READs, %llu "
	       "torn re-reads, %llu ROWS_PULL frames (%s)\n",
	       (unsigned long long)pulls, (unsigned long long)hreads, (unsigned long long)ereads,
	       failures ? "" : " exact", (unsigned long long)kseen[0], (unsigned long long)(st.row_slot_reads - st0.row_slot_reads),
	       (unsigned long long)(st.row_index_reads - st0.row_index_reads),
	       (unsigned long long)(st.torn_retries - st0.torn_retries),
	       (unsigned long long)(st.row_pull_frames - frames0), rps_worker_transport(w));
	if (pulls < MIN_PULLS && !failures)
		FAIL("only %llu pulls", (unsigned long long)pulls);
	if (rdma) {
		uint64_t slot = st.row_slot_reads - st0.row_slot_reads;

		if (slot < (hreads + ereads) / 2)
			FAIL("rdma: %llu slot READs for %llu rows: rows were not read one-sided",
			     (unsigned long long)slot, (unsigned long long)(hreads + ereads));
		if (st.row_pull_frames == frames0)
			FAIL("rdma: no row went by frame: no READ met a reused slot or a removed "
			     "index entry (did eviction reuse slots?)");
	}
}

int main(void)
{
	struct rps_worker *w;
	struct rps_table_spec s;
	struct shm *m = NULL;
	uint64_t ids[NH];
	static float out[NH * DIM];
	int rc, rank;

	rc = rps_worker_create(NULL, &w);
	if (rc) {
		fprintf(stderr, "itest-table-evrace: worker: %s\n", rps_strerror(rc));
		return 1;
	}
	rank = rps_worker_rank(w);
	if (rps_worker_num_workers(w) != 2) {
		fprintf(stderr, "itest-table-evrace: run with 2 workers (table.sh evrace)\n");
		rps_worker_destroy(w);
		return 2;
	}
	spec(&s);
	EXPECT(rps_worker_declare_table(w, TABLE, &s), 0);
	if (rank == 0) {
		m = shm_open_file(1);
		for (int i = 0; i < NH; i++)
			ids[i] = hid(i);
		EXPECT(rps_worker_pull_rows(w, TABLE, ids, NH, out), 0); /* create H */
		check_initial(&s, ids, NH, out, "writer: hot row");
	}
	EXPECT(rps_worker_barrier(w), 0);
	if (rank == 1)
		m = shm_open_file(0);
	if (!m) {
		rps_worker_destroy(w);
		return 1;
	}
	if (rank == 0)
		writer(w, m);
	else
		reader(w, m);
	rps_worker_destroy(w);
	munmap(m, sizeof(*m));
	if (failures) {
		fprintf(stderr, "itest-table-evrace: %d failures\n", failures);
		return 1;
	}
	printf("itest-table-evrace: ok\n");
	return 0;
}
