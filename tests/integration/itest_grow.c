/* itest-grow: workers join a running job beyond the initial count (issue 24,
 * RDMAPS_MAX_WORKERS, docs/scheduler.md "Growth"). Public API only. Started
 * by tests/integration/grow.sh: W0 workers through rdmaps-launch, more by
 * hand while they run, all the same program:
 *
 *   itest-grow bsp|ssp
 *
 * Every worker w pushes, at each of its clocks t, 1 into element t of its own
 * key (KEY_OWN + w) and small integer gradients grad(w, t, i) into the shared
 * keys (one small, one split into slices over both servers); SGD lr 1 from
 * zeros, so values are exact whatever order the servers add them in. A pull
 * therefore shows which clocks of which worker were applied: A_w = { t :
 * own_w[t] == -1 }. Worker w joined at clock J_w (0 for the first W0).
 *
 *   bsp: every pull at clock c must see, for every worker, exactly A_w =
 *        [J_w, c) (or nothing, for a worker that has not joined by c), each
 *        element 0 or -1 (never applied twice), the same J_w at every pull of
 *        every worker, and the shared keys exactly -sum over t < c of the
 *        workers in the job at clock t: no clock is summed with part of a
 *        joining worker.
 *   ssp: every element 0 or -1, the first W0 workers' clocks < c - s applied
 *        at every pull (the bound); the final values exact as under BSP.
 *
 * The first W0 workers hold at clock HOLD until the job has ITEST_GROW_TARGET
 * workers (so the joiners started by hand surely take part), then everyone
 * runs to clock ITEST_GROW_CLOCKS (all wait at ITEST_GROW_WAIT_AT for
 * ITEST_GROW_WAIT_FILE, if set). Rank 0 writes its clock to
 * ITEST_GROW_MARK (for the script to start the joiners mid-run). At the end:
 * num_workers == ITEST_GROW_TARGET, rps_worker_num_workers_gen() counts the
 * growths this worker saw, every joiner's J is the one the others saw.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdmaps/rdmaps.h>

#define MAXW	 16
#define KEY_OWN	 100
#define NSHARED	 2
#define MAXCLOCK 200

static const rps_key_t shared_keys[NSHARED] = { 1, 2 };
/* a small tensor, and one of 100000 floats split into slices over the
 * servers (RDMAPS_SLICE_BYTES=256K) */
static const size_t shared_lens[NSHARED] = { 1000, 100000 };

static int rank = -1, failures;

#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "itest-grow %d: FAIL %s:%d: ", rank, __FILE__,     \
				__LINE__);                                                 \
			fprintf(stderr, __VA_ARGS__);                                      \
			fprintf(stderr, "\n");                                             \
			failures++;                                                        \
		}                                                                          \
	} while (0)

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);

	return v && *v ? atoi(v) : dflt;
}

static float grad(int w, int t, size_t i)
{
	return (float)((w + 1) + (int)((size_t)t * 3 + i) % 5);
}

struct job {
	struct rps_worker *w;
	int maxw, w0, clocks, ssp, staleness;
	size_t nkeys, total;
	rps_key_t keys[NSHARED + MAXW];
	size_t lens[NSHARED + MAXW];
	float *v, *g;
	int join[MAXW]; /* J_w as seen so far, -1 unknown */
};

static float *own_of(struct job *j, float *v, int w)
{
	size_t off = 0;

	for (int k = 0; k < NSHARED; k++)
		off += shared_lens[k];
	return v + off + (size_t)w * (size_t)j->clocks;
}

static int wait_ok(int rc, struct rps_req **req, const char *what)
{
	if (!rc)
		rc = rps_req_wait(*req, 60000);
	CHECK(rc == 0, "%s: %s", what, rps_strerror(rc));
	return rc;
}

static int pull(struct job *j)
{
	struct rps_req *req = NULL;

	return wait_ok(rps_worker_pull(j->w, j->keys, j->v, j->lens, j->nkeys, &req), &req,
		       "pull");
}

/* A_w of a pull at clock c: lo..hi-1 applied (hi = lo: none); -1 if not one
 * run of -1s, or an element other than 0 / -1. */
static int applied_run(struct job *j, int w, int c, int *lo_p, int *hi_p)
{
	const float *o = own_of(j, j->v, w);
	int lo = -1, hi = -1, bad = 0;

	for (int t = 0; t < j->clocks; t++) {
		if (o[t] == -1.0f) {
			if (lo < 0)
				lo = t;
			else if (hi >= 0)
				bad = 1; /* a gap */
		} else if (o[t] == 0.0f) {
			if (lo >= 0 && hi < 0)
				hi = t;
		} else {
			CHECK(0, "pull at clock %d: worker %d's element %d is %g (applied twice or "
				 "in part?)",
			      c, w, t, (double)o[t]);
			return -1;
		}
	}
	if (lo < 0)
		lo = hi = 0;
	else if (hi < 0)
		hi = j->clocks;
	*lo_p = lo;
	*hi_p = hi;
	return bad ? -1 : 0;
}

/* The shared keys must be exactly -(sum over w, t in [J_w, end_w) of grad). */
static void check_shared(struct job *j, int c, const int *lo, const int *hi)
{
	size_t off = 0;
	long bad = 0;

	for (int k = 0; k < NSHARED; k++) {
		for (size_t i = 0; i < shared_lens[k]; i++) {
			double s = 0;

			for (int w = 0; w < j->maxw; w++)
				for (int t = lo[w]; t < hi[w]; t++)
					s += grad(w, t, i);
			if (j->v[off + i] != (float)-s && bad++ < 3)
				CHECK(0, "pull at clock %d: shared key %llu[%zu] = %g, expected %g",
				      c, (unsigned long long)shared_keys[k], i, (double)j->v[off + i],
				      -s);
		}
		off += shared_lens[k];
	}
	if (bad > 3)
		CHECK(0, "pull at clock %d: %ld wrong shared values in all", c, bad);
}

/* One pull at clock c checked (final: after everyone's last clock). */
static void check_pull(struct job *j, int c, int final)
{
	int lo[MAXW], hi[MAXW];

	for (int w = 0; w < j->maxw; w++) {
		if (applied_run(j, w, c, &lo[w], &hi[w])) {
			CHECK(j->ssp && !final, "pull at clock %d: worker %d's clocks are not one run",
			      c, w);
			return;
		}
		if (!j->ssp || final) {
			int joined = hi[w] > lo[w];

			/* BSP: exactly the clocks < c of those in the job */
			CHECK(!joined || hi[w] == c,
			      "pull at clock %d: worker %d's clocks [%d, %d) applied, expected up "
			      "to %d",
			      c, w, lo[w], hi[w], c);
			if (w < j->w0)
				CHECK(joined || c == 0,
				      "pull at clock %d: worker %d (one of the first) absent", c, w);
			if (w < j->w0 && joined)
				CHECK(lo[w] == 0, "pull at clock %d: worker %d from clock %d, not 0", c,
				      w, lo[w]);
			if (joined && j->join[w] >= 0)
				CHECK(j->join[w] == lo[w],
				      "pull at clock %d: worker %d joined at %d, earlier at %d", c, w,
				      lo[w], j->join[w]);
			if (joined)
				j->join[w] = lo[w];
			else if (j->join[w] >= 0 && j->join[w] < c)
				CHECK(0, "pull at clock %d: worker %d (joined at %d) absent", c, w,
				      j->join[w]);
		} else if (w < j->w0) {
			/* SSP: every clock < c - s of the first workers is applied */
			CHECK(c - j->staleness <= 0 || (lo[w] == 0 && hi[w] >= c - j->staleness),
			      "ssp pull at clock %d: worker %d's clocks [%d, %d), bound %d", c, w,
			      lo[w], hi[w], j->staleness);
		}
	}
	if (!j->ssp || final)
		check_shared(j, c, lo, hi);
}

static void mark(int c)
{
	const char *path = getenv("ITEST_GROW_MARK");
	char tmp[4200];
	FILE *f;

	if (!path || !*path)
		return;
	snprintf(tmp, sizeof(tmp), "%.4000s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return;
	fprintf(f, "%d\n", c);
	fclose(f);
	rename(tmp, path);
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* The first workers hold at this clock until the job has `target` workers. */
static void hold(struct job *j, int target)
{
	int waited = 0;

	while (rps_worker_num_workers(j->w) < target && waited < 60000) {
		sleep_ms(20);
		waited += 20;
	}
	CHECK(rps_worker_num_workers(j->w) >= target,
	      "the job did not grow to %d workers within 60 s (%d)", target,
	      rps_worker_num_workers(j->w));
}

/* Every worker waits at clock ITEST_GROW_WAIT_AT until ITEST_GROW_WAIT_FILE
 * exists (the script's checks while the job runs are done). */
static void wait_file(int c)
{
	const char *path = getenv("ITEST_GROW_WAIT_FILE");
	int waited = 0;

	if (!path || !*path || c != env_int("ITEST_GROW_WAIT_AT", -1))
		return;
	while (access(path, F_OK) && waited < 60000) {
		sleep_ms(20);
		waited += 20;
	}
	CHECK(!access(path, F_OK), "%s did not appear within 60 s", path);
}

static int run(struct job *j, int target, int hold_at, int sleep_each)
{
	struct rps_init zeros = { .kind = RPS_INIT_ZEROS };
	int start = (int)rps_worker_clock_value(j->w), gen0 = rps_worker_num_workers(j->w);
	int rc;

	rc = rps_worker_declare(j->w, j->keys, j->lens, j->nkeys, &zeros);
	CHECK(rc == 0, "declare: %s", rps_strerror(rc));
	if (rc)
		return rc;
	/* a joiner's start-up barrier is long past for the others: it returns */
	CHECK(rps_worker_barrier(j->w) == 0, "start-up barrier");
	if (rank >= j->w0)
		fprintf(stderr, "itest-grow %d: joined the running job at clock %d, %d workers\n",
			rank, start, gen0);
	for (int c = start; c < j->clocks && !failures; c++) {
		struct rps_req *req = NULL;

		if (c == hold_at && rank < j->w0)
			hold(j, target);
		wait_file(c);
		if (pull(j))
			break;
		if (c == start && rank >= j->w0 && !j->ssp) {
			int lo, hi;

			/* its first pull: the job's state at J, nothing of its own */
			if (!applied_run(j, rank, c, &lo, &hi))
				CHECK(lo == hi, "joiner's first pull shows its own clocks [%d, %d)",
				      lo, hi);
		}
		check_pull(j, c, 0);
		if (rank == 0)
			mark(c);
		if (sleep_each)
			sleep_ms(sleep_each);
		memset(j->g, 0, j->total * sizeof(float));
		{
			size_t off = 0;

			for (int k = 0; k < NSHARED; k++) {
				for (size_t i = 0; i < shared_lens[k]; i++)
					j->g[off + i] = grad(rank, c, i);
				off += shared_lens[k];
			}
			own_of(j, j->g, rank)[c] = 1.0f;
		}
		if (wait_ok(rps_worker_push(j->w, j->keys, j->g, j->lens, j->nkeys, &req), &req,
			    "push"))
			break;
		rc = rps_worker_clock(j->w);
		CHECK(rc == 0, "clock %d: %s", c, rps_strerror(rc));
	}
	CHECK(rps_worker_barrier(j->w) == 0, "final barrier");
	if (!failures && !pull(j)) {
		check_pull(j, j->clocks, 1);
		if (rank >= j->w0)
			CHECK(j->join[rank] == start,
			      "joined at clock %d, the values say %d", start, j->join[rank]);
		for (int w = 0; w < target; w++)
			CHECK(j->join[w] >= 0, "worker %d never took part", w);
		fprintf(stderr, "itest-grow %d: final values exact; joined at:", rank);
		for (int w = 0; w < j->maxw; w++)
			fprintf(stderr, " %d", j->join[w]);
		fprintf(stderr, "\n");
	}
	CHECK(rps_worker_num_workers(j->w) == target, "num_workers %d at the end, expected %d",
	      rps_worker_num_workers(j->w), target);
	CHECK(rps_worker_num_workers_gen(j->w) == target - gen0,
	      "num_workers_gen %d: the job grew from %d to %d while this worker ran",
	      rps_worker_num_workers_gen(j->w), gen0, target);
	/* nobody leaves before everyone checked (leaving is fine, but keep the
	 * final pulls of all at the same state) */
	CHECK(rps_worker_barrier(j->w) == 0, "last barrier");
	return failures ? -1 : 0;
}

int main(int argc, char **argv)
{
	struct job j;
	int target, rc;

	memset(&j, 0, sizeof(j));
	if (argc != 2 || (strcmp(argv[1], "bsp") && strcmp(argv[1], "ssp"))) {
		fprintf(stderr, "usage: itest-grow bsp|ssp\n");
		return 2;
	}
	j.ssp = !strcmp(argv[1], "ssp");
	j.staleness = env_int("RDMAPS_STALENESS", 0);
	j.maxw = env_int("RDMAPS_MAX_WORKERS", 0);
	j.w0 = env_int("ITEST_GROW_W0", 2);
	j.clocks = env_int("ITEST_GROW_CLOCKS", 30);
	target = env_int("ITEST_GROW_TARGET", j.maxw);
	if (j.maxw < 1 || j.maxw > MAXW || j.w0 < 1 || j.w0 > j.maxw || target > j.maxw ||
	    j.clocks < 4 || j.clocks > MAXCLOCK) {
		fprintf(stderr, "itest-grow: needs RDMAPS_MAX_WORKERS 1..%d, ITEST_GROW_W0 and "
				"ITEST_GROW_TARGET <= it, ITEST_GROW_CLOCKS 4..%d\n",
			MAXW, MAXCLOCK);
		return 2;
	}
	for (int w = 0; w < MAXW; w++)
		j.join[w] = -1;
	for (int k = 0; k < NSHARED; k++) {
		j.keys[j.nkeys] = shared_keys[k];
		j.lens[j.nkeys++] = shared_lens[k];
		j.total += shared_lens[k];
	}
	for (int w = 0; w < j.maxw; w++) {
		j.keys[j.nkeys] = KEY_OWN + (rps_key_t)w;
		j.lens[j.nkeys++] = (size_t)j.clocks;
		j.total += (size_t)j.clocks;
	}
	j.v = calloc(j.total, sizeof(float));
	j.g = calloc(j.total, sizeof(float));
	if (!j.v || !j.g)
		return 1;
	rc = rps_worker_create(NULL, &j.w);
	if (rc) {
		fprintf(stderr, "itest-grow: cannot join: %s\n", rps_strerror(rc));
		return 1;
	}
	rank = rps_worker_rank(j.w);
	run(&j, target, env_int("ITEST_GROW_HOLD", j.clocks / 2), env_int("ITEST_GROW_SLEEP_MS", 60));
	rps_worker_destroy(j.w);
	free(j.v);
	free(j.g);
	if (failures) {
		fprintf(stderr, "itest-grow %d: %s: %d failure(s)\n", rank, argv[1], failures);
		return 1;
	}
	printf("itest-grow %d: %s: ok\n", rank, argv[1]);
	return 0;
}
