/* itest-table: sparse tables against real rdmaps-sched and rdmaps-server
 * processes (tests/integration/table.sh, run by rdmaps-launch as every worker).
 *
 *   itest-table bsp   Three tables (sgd, adagrad, adam; dim 8, uniform init)
 *                     declared by every worker. For K clocks each worker pushes
 *                     integer gradients for ids drawn from a pool of 48 large
 *                     feature hashes: overlapping between workers, with
 *                     duplicates inside a batch. Every worker then pulls the
 *                     pool at clock K (with duplicates): each touched row must
 *                     equal, bit for bit, the local math (per clock: the sum
 *                     of every worker's gradients for the row, one step of
 *                     the table's optimizer with the row's own step count,
 *                     from the row's initial value rps_row_init(seed, id)).
 *                     Untouched rows are never created (the servers' row
 *                     count is the number of touched ids); rows first pulled
 *                     by different workers hold the same initial value.
 *                     Bad input (rank 0): unknown table, n = 0, n too large,
 *                     NULL ids / out, dim 0 / 5000, redeclared with another
 *                     spec: refused, and nothing changed (row count, values).
 *   itest-table asp   One sgd table, zero init, lr 1: every value an integer,
 *                     so the result is exact whatever order pushes arrive in;
 *                     after a barrier (and a pull at the last clock) every
 *                     touched row equals -sum of every gradient.
 *
 * Exit 0 on success; every mismatch is printed.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdmaps/optim.h>
#include <rdmaps/table.h>
#include <rdmaps/worker.h>

#include "src/optim.h"
#include "src/rowinit.h"
#include "src/rowprec.h"

#define DIM   8
#define POOL  48
#define BATCH 40
#define K     5
#define NT    3
#define SEED  0x5eedull

static int failures;

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "itest-table: FAIL: " __VA_ARGS__);                                \
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
	return rps_mix64(0xabcdefull + (uint64_t)j) | 1ull << 63; /* large, hash-like */
}

/* The ids worker r pushes at clock c: 40 positions into the pool, with the
 * first 6 repeated at the end (duplicates) and overlap between workers. Only
 * pool entries 0..39 are ever pushed: 40..47 stay untouched. */
static void batch_ids(int r, int c, uint64_t *ids)
{
	for (int j = 0; j < BATCH - 6; j++)
		ids[j] = pool_id((r * 7 + c * 11 + j * 3) % 40);
	for (int j = 0; j < 6; j++)
		ids[BATCH - 6 + j] = ids[j];
}

/* Integer gradient of worker r, clock c, batch position j, element e. */
static float grad(int r, int c, int j, int e)
{
	return (float)(((r + 1) * 3 + c * 5 + j * 7 + e) % 9 - 4);
}

static void make_spec(struct rps_table_spec *s, int kind, int zero_init)
{
	rps_table_spec_init(s);
	s->dim = DIM;
	s->init = zero_init ? RPS_TABLE_INIT_ZERO : RPS_TABLE_INIT_UNIFORM;
	s->init_scale = 0.5f;
	s->seed = SEED;
	s->optim.kind = kind;
	s->optim.lr = kind == RPS_OPT_SGD ? 1.0f : 0.1f;
	s->capacity_hint = 1000;
	s->field_mask = RPS_TABLE_SPEC_ALL;
}

static const int kinds[NT] = {RPS_OPT_SGD, RPS_OPT_ADAGRAD, RPS_OPT_ADAM};
/* ckpt: a 4th table, adam stored as fp16 (docs/tables.md, Storage precision) */
#define T16 (NT + 1)
static int kind_of(int t)
{
	return t == T16 ? RPS_OPT_ADAM : kinds[t - 1];
}
static uint32_t prec_of(int t)
{
	return t == T16 ? RPS_TABLE_FP16 : RPS_TABLE_FP32;
}

/* Local math of table t (kind) for the touched pool rows: exp[POOL][DIM];
 * prec fp16 / bf16: the initial row and every step rounded as stored. */
static void expected_prec(int kind, uint32_t prec, int nworkers, int bsp, int nclocks,
			  float exp[POOL][DIM], int touched[POOL])
{
	struct rps_optim_opts o;
	static float m[POOL][DIM], v[POOL][DIM];
	uint32_t steps[POOL] = {0};
	struct rps_table_spec s;

	make_spec(&s, kind, !bsp);
	o = s.optim;
	memset(m, 0, sizeof(m));
	memset(v, 0, sizeof(v));
	memset(touched, 0, POOL * sizeof(int));
	for (int j = 0; j < POOL; j++)
		rps_row_init(s.init, s.init_scale, s.seed, pool_id(j), DIM, exp[j]);
	for (int j = 0; j < POOL; j++)
		rps_row_round(prec, exp[j], DIM);
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
				touched[p] = 1;
				rps_optim_apply(&o, exp[p], sum[p], m[p], v[p], DIM, steps[p]++, 0);
				rps_row_round(prec, exp[p], DIM);
			}
	}
}

static void expected(int kind, int nworkers, int bsp, int nclocks, float exp[POOL][DIM],
		     int touched[POOL])
{
	expected_prec(kind, RPS_TABLE_FP32, nworkers, bsp, nclocks, exp, touched);
}

static int check_rows(const char *what, const float *got, const float exp[POOL][DIM],
		      const int *which, int n)
{
	int bad = 0;

	for (int i = 0; i < n; i++)
		for (int e = 0; e < DIM; e++)
			if (memcmp(&got[i * DIM + e], &exp[which[i]][e], sizeof(float))) {
				if (bad++ < 5)
					FAIL("%s: pool row %d element %d: %.9g, expected %.9g",
					     what, which[i], e, (double)got[i * DIM + e],
					     (double)exp[which[i]][e]);
			}
	return bad;
}

static void push_clocks(struct rps_worker *w, int rank, int ntables, int c0, int c1)
{
	for (int c = c0; c < c1; c++) {
		uint64_t ids[BATCH];
		float g[BATCH * DIM];

		batch_ids(rank, c, ids);
		for (int j = 0; j < BATCH; j++)
			for (int e = 0; e < DIM; e++)
				g[j * DIM + e] = grad(rank, c, j, e);
		for (int t = 1; t <= ntables; t++)
			EXPECT(rps_worker_push_rows(w, (rps_table_t)t, ids, BATCH, g), 0);
		EXPECT(rps_worker_clock(w), 0);
	}
}

static void bad_input(struct rps_worker *w)
{
	struct rps_table_spec s;
	uint64_t ids[4] = {pool_id(0), pool_id(1), pool_id(2), pool_id(3)};
	float out[4 * DIM], before[4 * DIM];
	uint64_t rows0 = 0, rows1 = 0;

	EXPECT(rps_worker_pull_rows(w, 1, ids, 4, before), 0);
	EXPECT(rps_worker_table_rows(w, 1, &rows0), 0);
	EXPECT(rps_worker_pull_rows(w, 99, ids, 4, out), -ENOENT);
	EXPECT(rps_worker_push_rows(w, 99, ids, 4, out), -ENOENT);
	EXPECT(rps_worker_pull_rows(w, 1, ids, 0, out), -EINVAL);
	EXPECT(rps_worker_push_rows(w, 1, ids, 0, out), -EINVAL);
	EXPECT(rps_worker_pull_rows(w, 1, ids, (size_t)RPS_TABLE_MAX_BATCH + 1, out), -EINVAL);
	EXPECT(rps_worker_push_rows(w, 1, ids, SIZE_MAX, out), -EINVAL);
	EXPECT(rps_worker_pull_rows(w, 1, NULL, 4, out), -EINVAL);
	EXPECT(rps_worker_pull_rows(w, 1, ids, 4, NULL), -EINVAL);
	EXPECT(rps_worker_push_rows(w, 1, ids, 4, NULL), -EINVAL);
	EXPECT(rps_worker_push_rows(NULL, 1, ids, 4, out), -EINVAL);
	make_spec(&s, RPS_OPT_SGD, 0);
	s.dim = 0;
	EXPECT(rps_worker_declare_table(w, 7, &s), -EINVAL);
	s.dim = 5000;
	EXPECT(rps_worker_declare_table(w, 7, &s), -EINVAL);
	s.dim = DIM * 2; /* table 1 with another dim */
	EXPECT(rps_worker_declare_table(w, 1, &s), -EEXIST);
	EXPECT(rps_worker_declare_table(w, 1, NULL), -EINVAL);
	EXPECT(rps_worker_pull_rows(w, 7, ids, 4, out), -ENOENT); /* never created */
	EXPECT(rps_worker_table_rows(w, 1, &rows1), 0);
	if (rows1 != rows0)
		FAIL("bad input changed table 1: %llu rows, %llu before", (unsigned long long)rows1,
		     (unsigned long long)rows0);
	EXPECT(rps_worker_pull_rows(w, 1, ids, 4, out), 0);
	if (memcmp(out, before, sizeof(out)))
		FAIL("bad input changed rows of table 1");
}

/* Pull the whole pool of table t and compare with nclocks of local math. */
static int check_table(struct rps_worker *w, int t, int nclocks, const char *when)
{
	static float exp[POOL][DIM];
	static float out[POOL * DIM];
	int touched[POOL], which[POOL], n = 0;
	uint64_t ids[POOL];
	char what[96];

	expected_prec(kind_of(t), prec_of(t), 1, 1, nclocks, exp, touched);
	for (int p = 0; p < POOL; p++)
		if (touched[p]) {
			ids[n] = pool_id(p);
			which[n++] = p;
		}
	EXPECT(rps_worker_pull_rows(w, (rps_table_t)t, ids, (size_t)n, out), 0);
	snprintf(what, sizeof(what), "table %d %s", t, when);
	if (check_rows(what, out, exp, which, n))
		return -1;
	printf("itest-table: table %d %s: %d rows exact after %d clocks\n", t, when, n, nclocks);
	return n;
}

static void wait_file(const char *path)
{
	struct timespec ts = {0, 20000000};

	for (int i = 0; i < 3000 && access(path, F_OK); i++)
		nanosleep(&ts, NULL);
	if (access(path, F_OK))
		FAIL("%s never appeared", path);
}

/* 1 worker, BSP, checkpoints every KC clocks: KC clocks, the server is
 * killed and restored (table.sh ckpt), KC more clocks: every row equals 2 KC
 * clocks of local math, rows (and Adam's per-row steps and moments) came
 * back from the file; table 4 (adam, rows stored as fp16) too, every step
 * rounded to fp16. */
#define KC 4
static void run_ckpt(struct rps_worker *w)
{
	const char *ready = getenv("ITEST_READY"), *go = getenv("ITEST_GO");
	struct rps_table_spec s;
	uint64_t rows = 0;
	int n = 0;
	FILE *f;

	if (!ready || !go) {
		FAIL("ITEST_READY and ITEST_GO must be set");
		return;
	}
	for (int t = 1; t <= T16; t++) {
		make_spec(&s, kind_of(t), 0);
		s.precision = prec_of(t);
		EXPECT(rps_worker_declare_table(w, (rps_table_t)t, &s), 0);
	}
	push_clocks(w, 0, T16, 0, KC);
	for (int t = 1; t <= T16; t++)
		n = check_table(w, t, KC, "before the restart");
	f = fopen(ready, "w");
	if (f)
		fclose(f);
	wait_file(go);
	push_clocks(w, 0, T16, KC, 2 * KC);
	for (int t = 1; t <= T16; t++)
		check_table(w, t, 2 * KC, "after the restore");
	EXPECT(rps_worker_table_rows(w, 3, &rows), 0);
	if (n > 0 && rows != (uint64_t)n)
		FAIL("table 3 holds %llu rows after the restore, %d touched",
		     (unsigned long long)rows, n);
}

/* CPU seconds (user + system) of every rdmaps-server process here. */
static double servers_cpu(void)
{
	double sum = 0;
	long hz = sysconf(_SC_CLK_TCK);
	DIR *d = opendir("/proc");
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char path[300], comm[64], buf[1024];
		unsigned long ut = 0, st = 0;
		FILE *f;
		char *p;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/comm", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		comm[0] = 0;
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = 0;
		fclose(f);
		if (strncmp(comm, "rdmaps-server", 13))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) &&
		    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
			   &st) == 2)
			sum += (double)(ut + st) / (double)hz;
		fclose(f);
	}
	if (d)
		closedir(d);
	return sum;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* 2 workers, ASP: worker 0 pushes 64 rows of 256 floats for TORN_S seconds
 * (sgd lr 1 on gradient -1 everywhere: every element of a row always equals
 * its update count); worker 1 pulls them meanwhile and checks that each row
 * it gets is whole (all elements equal, never below what it saw before).
 * Meanwhile both create new rows (64 a step, up to TORN_GROW): the table
 * grows new arena chunks and its index rehashes under the readers; worker 1
 * reads the new rows again (one-sided once seen) and checks them whole too.
 * Then a pull-only phase: the servers' CPU time is measured around it. */
#define TORN_GROW 60000
#define TORN_S	  8.0
#define TORN_DIM  256
#define TORN_N	  64
static void run_torn(struct rps_worker *w, int rank)
{
	struct rps_table_spec s;
	static float rows[TORN_N * TORN_DIM], g[TORN_N * TORN_DIM];
	uint64_t ids[TORN_N];
	float last[TORN_N] = {0};
	long pulls = 0, torn = 0;
	double t0;

	make_spec(&s, RPS_OPT_SGD, 1);
	s.dim = TORN_DIM;
	EXPECT(rps_worker_declare_table(w, 9, &s), 0);
	for (int i = 0; i < TORN_N; i++)
		ids[i] = pool_id(i);
	for (int i = 0; i < TORN_N * TORN_DIM; i++)
		g[i] = -1.0f;
	EXPECT(rps_worker_pull_rows(w, 9, ids, TORN_N, rows), 0); /* create them */
	EXPECT(rps_worker_barrier(w), 0);
	t0 = now_s();
	if (rank == 0) {
		long steps = 0;

		while (now_s() - t0 < TORN_S) {
			uint64_t nid[TORN_N];

			EXPECT(rps_worker_push_rows(w, 9, ids, TORN_N, g), 0);
			for (int i = 0; i < TORN_N; i++)
				nid[i] = pool_id(1000 + (int)((steps * TORN_N + i) % TORN_GROW));
			EXPECT(rps_worker_pull_rows(w, 9, nid, TORN_N, rows), 0); /* grow */
			EXPECT(rps_worker_clock(w), 0);
			steps++;
		}
		printf("itest-table torn: worker 0 pushed %ld steps of %d rows\n", steps, TORN_N);
	} else if (rank == 1) {
		while (now_s() - t0 < TORN_S) {
			uint64_t nid[TORN_N];
			static float nrows[TORN_N * TORN_DIM];

			/* new rows (created by either worker), then again: read
			 * one-sided from the chunks the table grew */
			for (int i = 0; i < TORN_N; i++)
				nid[i] =
				    pool_id(1000 + (int)(((pulls / 2) * TORN_N + i) % TORN_GROW));
			EXPECT(rps_worker_pull_rows(w, 9, nid, TORN_N, nrows), 0);
			for (int i = 0; i < TORN_N * TORN_DIM; i++)
				if (nrows[i] != 0.0f && torn++ < 5)
					FAIL("new row %d element %d: %g, not its initial 0",
					     i / TORN_DIM, i % TORN_DIM, (double)nrows[i]);
			EXPECT(rps_worker_pull_rows(w, 9, ids, TORN_N, rows), 0);
			pulls++;
			for (int i = 0; i < TORN_N; i++) {
				const float *r = rows + i * TORN_DIM;
				int bad = 0;

				for (int e = 1; e < TORN_DIM; e++)
					bad |= r[e] != r[0];
				if (bad || r[0] < last[i]) {
					if (torn++ < 5)
						FAIL("pull %ld: row %d torn or older (%g .. %g, "
						     "saw %g)",
						     pulls, i, (double)r[0],
						     (double)r[TORN_DIM - 1], (double)last[i]);
				}
				last[i] = r[0];
			}
		}
	}
	EXPECT(rps_worker_barrier(w), 0);
	if (rank == 1) {
		struct rps_worker_stats st = {.field_mask = RPS_WORKER_STAT_ALL};
		double c0, c1, t1;
		long n = 0;

		EXPECT(rps_worker_stats(w, &st), 0);
		printf("itest-table torn: %ld pulls of %d rows under updates, %ld torn rows "
		       "returned, %llu torn re-reads, %llu pull messages/reads (%s)\n",
		       pulls, TORN_N, torn, (unsigned long long)st.torn_retries,
		       (unsigned long long)st.pulls, rps_worker_transport(w));
		{
			uint64_t nrows_srv = 0;

			EXPECT(rps_worker_table_rows(w, 9, &nrows_srv), 0);
			printf("itest-table torn: the table grew to %llu rows meanwhile\n",
			       (unsigned long long)nrows_srv);
		}
		if (!strcmp(rps_worker_transport(w), "rdma") &&
		    st.pulls < (uint64_t)pulls * TORN_N / 2)
			FAIL("rdma: %llu reads for %ld pulls of %d rows: rows were not read "
			     "one-sided",
			     (unsigned long long)st.pulls, pulls, TORN_N);
		/* pull only: what does it cost the servers? */
		c0 = servers_cpu();
		t0 = now_s();
		while ((t1 = now_s()) - t0 < 3.0) {
			EXPECT(rps_worker_pull_rows(w, 9, ids, TORN_N, rows), 0);
			n++;
		}
		c1 = servers_cpu();
		printf("itest-table torn: pull-only %ld pulls of %d rows in %.1f s: servers' CPU "
		       "%.3f s (%.1f%% of a core)\n",
		       n, TORN_N, t1 - t0, c1 - c0, 100.0 * (c1 - c0) / (t1 - t0));
	}
	EXPECT(rps_worker_barrier(w), 0);
}

int main(int argc, char **argv)
{
	int bsp = argc > 1 && !strcmp(argv[1], "bsp");
	int ntables = bsp ? NT : 1;
	struct rps_worker *w;
	struct rps_table_spec s;
	int rank, nw, rc;
	static float exp[POOL][DIM];
	int touched[POOL];
	uint64_t ids[2 * POOL];
	int which[2 * POOL], n = 0, ntouched = 0;
	float out[2 * POOL * DIM];

	if (argc < 2 || (!bsp && strcmp(argv[1], "asp") && strcmp(argv[1], "ckpt") &&
			 strcmp(argv[1], "torn"))) {
		fprintf(stderr, "usage: itest-table bsp|asp|ckpt|torn\n");
		return 2;
	}
	rc = rps_worker_create(NULL, &w);
	if (rc) {
		fprintf(stderr, "itest-table: worker: %s\n", rps_strerror(rc));
		return 1;
	}
	if (!strcmp(argv[1], "torn")) {
		run_torn(w, rps_worker_rank(w));
		rps_worker_destroy(w);
		if (failures)
			fprintf(stderr, "itest-table torn: %d failures\n", failures);
		else
			printf("itest-table torn: ok\n");
		return failures ? 1 : 0;
	}
	if (!strcmp(argv[1], "ckpt")) {
		run_ckpt(w);
		rps_worker_destroy(w);
		if (failures)
			fprintf(stderr, "itest-table ckpt: %d failures\n", failures);
		else
			printf("itest-table ckpt: ok\n");
		return failures ? 1 : 0;
	}
	rank = rps_worker_rank(w);
	nw = rps_worker_num_workers(w);
	for (int t = 1; t <= ntables; t++) {
		make_spec(&s, bsp ? kinds[t - 1] : RPS_OPT_SGD, !bsp);
		EXPECT(rps_worker_declare_table(w, (rps_table_t)t, &s), 0);
		EXPECT(rps_worker_declare_table(w, (rps_table_t)t, &s), 0); /* idempotent */
	}
	EXPECT(rps_worker_barrier(w), 0);
	push_clocks(w, rank, ntables, 0, K);
	if (!bsp)
		EXPECT(rps_worker_barrier(w), 0); /* ASP: every worker's pushes are in */
	for (int t = 1; t <= ntables; t++) {
		char what[64];

		expected(bsp ? kinds[t - 1] : RPS_OPT_SGD, nw, bsp, K, exp, touched);
		n = 0;
		ntouched = 0;
		for (int p = 0; p < POOL; p++)
			if (touched[p]) {
				ids[n] = pool_id(p);
				which[n++] = p;
				ntouched++;
			}
		for (int p = 0; p < POOL && n < 2 * POOL; p += 5) /* duplicates */
			if (touched[p]) {
				ids[n] = pool_id(p);
				which[n++] = p;
			}
		if (!bsp) {
			/* ASP: other workers' pushes are applied some time after the
			 * barrier: poll (up to 10 s) until every row is in */
			for (int tries = 0; tries < 500; tries++) {
				struct timespec ts = {0, 20000000};
				int same = 1;

				EXPECT(rps_worker_pull_rows(w, (rps_table_t)t, ids, (size_t)n, out),
				       0);
				for (int i = 0; i < n && same; i++)
					same = !memcmp(out + i * DIM, exp[which[i]],
						       sizeof(float) * DIM);
				if (same)
					break;
				nanosleep(&ts, NULL);
			}
		}
		EXPECT(rps_worker_pull_rows(w, (rps_table_t)t, ids, (size_t)n, out), 0);
		snprintf(what, sizeof(what), "worker %d table %d", rank, t);
		if (!check_rows(what, out, exp, which, n))
			printf("itest-table: worker %d table %d: %d rows (%d pulls) exact\n", rank,
			       t, ntouched, n);
	}
	EXPECT(rps_worker_barrier(w), 0);
	if (rank == 0) {
		uint64_t rows = 0;

		EXPECT(rps_worker_table_rows(w, 1, &rows), 0);
		if (rows != (uint64_t)ntouched)
			FAIL("table 1 holds %llu rows, %d were touched", (unsigned long long)rows,
			     ntouched);
		else
			printf("itest-table: untouched rows never created (%llu rows)\n",
			       (unsigned long long)rows);
	}
	EXPECT(rps_worker_barrier(w), 0);
	/* lazy init: untouched pool rows 40..47, each first pulled by one worker */
	{
		float init[DIM], row[DIM];
		uint64_t id = pool_id(40 + rank % 8);

		EXPECT(rps_worker_pull_rows(w, 1, &id, 1, row), 0);
		EXPECT(rps_worker_barrier(w), 0);
		for (int p = 40; p < 48; p++) {
			id = pool_id(p);
			EXPECT(rps_worker_pull_rows(w, 1, &id, 1, row), 0);
			make_spec(&s, bsp ? kinds[0] : RPS_OPT_SGD, !bsp);
			rps_row_init(s.init, s.init_scale, s.seed, id, DIM, init);
			if (memcmp(row, init, sizeof(row)))
				FAIL("worker %d: new row of pool %d is not its initial value", rank,
				     p);
		}
	}
	EXPECT(rps_worker_barrier(w), 0);
	if (rank == 0)
		bad_input(w);
	EXPECT(rps_worker_barrier(w), 0);
	rps_worker_destroy(w);
	if (failures) {
		fprintf(stderr, "itest-table: %d failures\n", failures);
		return 1;
	}
	printf("itest-table: worker %d ok\n", rank);
	return 0;
}
