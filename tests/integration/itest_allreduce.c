/* itest-allreduce: rps_worker_allreduce on a real cluster (allreduce.sh,
 * started by rdmaps-launch: 1 server, W workers). Public API only.
 *
 *   itest-allreduce exact|mismatch|dead
 *
 * exact: ROUNDS calls over keys of uneven lengths (not divisible by W, one
 *   of several 1 MiB pieces, one of 1 element), then a call of one key of 1
 *   element (fewer elements than workers) and one of a 2-element key: every
 *   value is an integer, so each sum is exact and compared bit for bit with
 *   the formula.
 * mismatch: rank 1 passes one element more: every rank must fail with
 *   -EINVAL within 10 s (the message names the ranks and lengths).
 * dead: the last rank kills itself (SIGKILL) before round 2: every other
 *   rank must fail with -EHOSTDOWN, within RDMAPS_TIMEOUT_MS.
 * Exit 0 when everything held; each failure is printed.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdmaps/rdmaps.h>

#define NKEYS  4
#define ROUNDS 3

static const rps_key_t keys[NKEYS] = { 5, 7, 11, 13 };
static const size_t lens[NKEYS] = { 1000003, 7, 1, 300001 };

static int rank, nworkers, failures;

#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "itest-allreduce %d: FAIL %s:%d: ", rank, __FILE__, \
				__LINE__);                                                 \
			fprintf(stderr, __VA_ARGS__);                                      \
			fprintf(stderr, "\n");                                             \
			failures++;                                                        \
		}                                                                          \
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Rank r's value of element i (flattened) in round t: an integer below 2^17,
 * so a sum over up to 64 workers is exact in float32. */
static float val(int r, size_t i, int t)
{
	return (float)((long)((i * 7 + (size_t)t * 13) % 1021) * (r + 1) - 3 * r + t);
}

static float want(size_t i, int t)
{
	double s = 0;

	for (int r = 0; r < nworkers; r++)
		s += val(r, i, t);
	return (float)s;
}

static size_t total(const size_t *l, int n)
{
	size_t s = 0;

	for (int k = 0; k < n; k++)
		s += l[k];
	return s;
}

static void one_call(struct rps_worker *w, const rps_key_t *k, const size_t *l, int n, int t)
{
	size_t N = total(l, n), bad = 0, first = 0;
	float *v = malloc(N * sizeof(float));
	int rc;

	for (size_t i = 0; i < N; i++)
		v[i] = val(rank, i, t);
	rc = rps_worker_allreduce(w, k, v, l, (size_t)n);
	CHECK(rc == 0, "round %d: allreduce of %zu elements: %d (%s)", t, N, rc, rps_strerror(rc));
	for (size_t i = 0; !rc && i < N; i++)
		if (v[i] != want(i, t) && !bad++)
			first = i;
	CHECK(bad == 0, "round %d: %zu of %zu elements wrong, first [%zu] = %g, want %g", t, bad,
	      N, first, v[first], want(first, t));
	if (!rc && !bad)
		printf("itest-allreduce %d: round %d: %zu elements in %d keys exact\n", rank, t, N,
		       n);
	free(v);
}

static void exact(struct rps_worker *w)
{
	static const rps_key_t k1[1] = { 99 };
	static const size_t l1[1] = { 1 }, l2[1] = { 2 };

	for (int t = 0; t < ROUNDS; t++)
		one_call(w, keys, lens, NKEYS, t);
	one_call(w, k1, l1, 1, ROUNDS);
	one_call(w, k1, l2, 1, ROUNDS + 1);
}

static void mismatch(struct rps_worker *w)
{
	size_t l[NKEYS];
	size_t N;
	float *v;
	double t0;
	int rc;

	memcpy(l, lens, sizeof(l));
	if (rank == 1)
		l[2] += 1;
	N = total(l, NKEYS);
	v = calloc(N, sizeof(float));
	t0 = now_s();
	rc = rps_worker_allreduce(w, keys, v, l, NKEYS);
	CHECK(rc == -EINVAL, "mismatched lengths: %d (%s), want -EINVAL", rc, rps_strerror(rc));
	CHECK(now_s() - t0 < 10, "mismatch reported after %.1f s", now_s() - t0);
	rc = rps_worker_allreduce(w, keys, v, l, NKEYS);
	CHECK(rc == -EINVAL, "a call after a failure: %d, want the same error", rc);
	printf("itest-allreduce %d: mismatch refused in %.2f s\n", rank, now_s() - t0);
	free(v);
}

static void dead(struct rps_worker *w)
{
	const char *to = getenv("RDMAPS_TIMEOUT_MS");
	double limit = (to ? atof(to) : 30000) / 1000.0 + 2;
	size_t N = total(lens, NKEYS);
	float *v = calloc(N, sizeof(float));
	double t0;
	int rc = 0, t;

	for (t = 0; t < 2; t++)
		one_call(w, keys, lens, NKEYS, t);
	if (rank == nworkers - 1) {
		fprintf(stderr, "itest-allreduce %d: killing myself before round %d\n", rank, t);
		fflush(stderr);
		raise(SIGKILL);
	}
	t0 = now_s();
	for (; t < 10 && !rc; t++) /* the ring must fail; at most 10 more calls */
		rc = rps_worker_allreduce(w, keys, v, lens, NKEYS);
	CHECK(rc == -EHOSTDOWN, "after rank %d died: %d (%s), want -EHOSTDOWN", nworkers - 1, rc,
	      rps_strerror(rc));
	CHECK(now_s() - t0 < limit, "the death was reported after %.1f s (limit %.1f s)",
	      now_s() - t0, limit);
	printf("itest-allreduce %d: dead worker reported in %.2f s: %s\n", rank, now_s() - t0,
	       rps_strerror(rc));
	free(v);
}

int main(int argc, char **argv)
{
	struct rps_worker *w;
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: itest-allreduce exact|mismatch|dead\n");
		return 2;
	}
	rc = rps_worker_create(NULL, &w);
	if (rc) {
		fprintf(stderr, "itest-allreduce: create: %s\n", rps_strerror(rc));
		return 1;
	}
	rank = rps_worker_rank(w);
	nworkers = rps_worker_num_workers(w);
	if (!strcmp(argv[1], "exact"))
		exact(w);
	else if (!strcmp(argv[1], "mismatch"))
		mismatch(w);
	else if (!strcmp(argv[1], "dead"))
		dead(w);
	else
		CHECK(0, "unknown mode %s", argv[1]);
	/* no barrier: after "dead" one worker is gone */
	rps_worker_destroy(w);
	if (failures)
		fprintf(stderr, "itest-allreduce %d: %d failure(s)\n", rank, failures);
	return failures ? 1 : 0;
}
