/* itest-model: rps_worker_save_model / rps_worker_load_model on a real
 * cluster (tests/integration/model.sh: 2 servers of 2 shards, 2 workers, BSP
 * or ASP, momentum 0.5, lr 0.5, keys cut into slices and frames). Public API
 * only.
 *
 *   itest-model DIR
 *
 * DIR holds what model.sh made with NumPy: b.npz (key k, element i =
 * k / 2 + i / 4, one key 2-D, compressed) and the refused files bad-*.npz.
 *  1. both workers declare, run CLOCKS BSP clocks (momentum state builds up);
 *  2. worker 0 saves a.npz: it must hold exactly what a pull at that clock
 *     returns;
 *  3. worker 0 tries every refused file: each load fails with its error and
 *     a pull before and one after are bit-identical (no key changed);
 *     undeclared keys, wrong lengths and NULLs are refused too;
 *  4. worker 0 loads b.npz; after a barrier both workers pull exactly B;
 *     worker 0 saves c.npz (model.sh compares it with b.npz bit for bit);
 *  5. one more clock, both workers pushing 1s: the values must be exactly
 *     B - 1 (BSP: one step of the sum) or B - 1.25 (ASP: two steps), momentum
 *     restarted from 0 by the assignment, the assignment counted in no clock.
 * Exit 0 on success; each mismatch is printed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmaps/rdmaps.h>

#define NKEYS  4
#define CLOCKS 3

/* one small key, one of a few frames, one single-element key, one cut into
 * slices over both servers (model.sh: RDMAPS_SLICE_BYTES=16K, MAX_MSG=8K) */
static const rps_key_t keys[NKEYS] = {3, 10, 11, 1000};
static const size_t lens[NKEYS] = {5000, 7, 1, 20000};

static int rank, failures;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "itest-model %d: FAIL %s:%d: ", rank, __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                                              \
			fprintf(stderr, "\n");                                                     \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

static size_t total_len(void)
{
	size_t n = 0;

	for (int k = 0; k < NKEYS; k++)
		n += lens[k];
	return n;
}

/* The values of b.npz (model.sh writes the same with NumPy; exact). */
static void fill_b(float *v)
{
	size_t off = 0;

	for (int k = 0; k < NKEYS; k++)
		for (size_t i = 0; i < lens[k]; i++)
			v[off++] = (float)keys[k] * 0.5f + (float)i * 0.25f;
}

static int pull_all(struct rps_worker *w, float *v)
{
	struct rps_req *req;
	int rc = rps_worker_pull(w, keys, v, lens, NKEYS, &req);

	if (!rc)
		rc = rps_req_wait(req, -1);
	CHECK(rc == 0, "pull: %s", rps_strerror(rc));
	return rc;
}

static int push_all(struct rps_worker *w, const float *g)
{
	struct rps_req *req;
	int rc = rps_worker_push(w, keys, g, lens, NKEYS, &req);

	if (!rc)
		rc = rps_req_wait(req, -1);
	CHECK(rc == 0, "push: %s", rps_strerror(rc));
	return rc;
}

/* The first element where a and b differ bit for bit, or -1. */
static long first_diff(const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], sizeof(float)))
			return (long)i;
	return -1;
}

struct refused {
	const char *name;
	int rc;
};

/* model.sh makes these; "bad-nofile.npz" does not exist */
static const struct refused refused[] = {
    {"bad-trunc.npz", -EINVAL},	  {"bad-text.npz", -EINVAL}, {"bad-f64.npz", -EINVAL},
    {"bad-missing.npz", -EINVAL}, {"bad-size.npz", -EINVAL}, {"bad-shape.npz", -EINVAL},
    {"bad-extra.npz", -EINVAL},	  {"bad-name.npz", -EINVAL}, {"bad-nofile.npz", -ENOENT},
    {"bad-f64only.npz", -EINVAL},
};

/* Step 3 (worker 0): nothing a refused load does reaches a server. */
static void try_refused(struct rps_worker *w, const char *dir, float *before, float *after)
{
	size_t n = total_len();
	char path[1024];

	for (size_t f = 0; f < sizeof(refused) / sizeof(refused[0]); f++) {
		long d;
		int rc;

		snprintf(path, sizeof(path), "%s/%s", dir, refused[f].name);
		if (pull_all(w, before))
			return;
		rc = rps_worker_load_model(w, keys, lens, NKEYS, path);
		CHECK(rc == refused[f].rc, "load %s: %s, expected %s", refused[f].name,
		      rps_strerror(rc), rps_strerror(refused[f].rc));
		if (pull_all(w, after))
			return;
		d = first_diff(before, after, n);
		CHECK(d < 0, "load %s changed element %ld: %g -> %g", refused[f].name, d,
		      d < 0 ? 0.0 : before[d], d < 0 ? 0.0 : after[d]);
		printf("itest-model: %s refused (%s), no value changed\n", refused[f].name,
		       rps_strerror(rc));
	}
	/* the call's own checks, nothing sent either */
	snprintf(path, sizeof(path), "%s/b.npz", dir);
	{
		const rps_key_t undeclared[NKEYS] = {3, 10, 11, 1001};
		size_t wrong[NKEYS] = {5000, 7, 1, 20000};

		CHECK(rps_worker_load_model(w, undeclared, lens, NKEYS, path) == -ENOENT,
		      "undeclared key loaded");
		CHECK(rps_worker_save_model(w, undeclared, lens, NKEYS, path) == -ENOENT,
		      "undeclared key saved");
		wrong[1] = 8;
		CHECK(rps_worker_load_model(w, keys, wrong, NKEYS, path) == -EINVAL,
		      "wrong length loaded");
		CHECK(rps_worker_load_model(w, keys, lens, 0, path) == -EINVAL, "no keys loaded");
		CHECK(rps_worker_load_model(w, keys, lens, NKEYS, NULL) == -EINVAL, "NULL path");
		CHECK(rps_worker_load_model(NULL, keys, lens, NKEYS, path) == -EINVAL,
		      "NULL worker");
	}
	if (!pull_all(w, after))
		CHECK(first_diff(before, after, n) < 0, "a refused call changed a value");
}

int main(int argc, char **argv)
{
	struct rps_worker *w = NULL;
	size_t n = total_len();
	float *v, *x, *b, *g;
	char path[1024];
	const char *cons = getenv("RDMAPS_CONSISTENCY");
	int asp = cons && !strcmp(cons, "asp");
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: itest-model DIR\n");
		return 2;
	}
	v = calloc(n, sizeof(float));
	x = calloc(n, sizeof(float));
	b = calloc(n, sizeof(float));
	g = calloc(n, sizeof(float));
	if (!v || !x || !b || !g)
		return 1;
	fill_b(b);
	rc = rps_worker_create(NULL, &w);
	if (rc) {
		fprintf(stderr, "itest-model: create: %s\n", rps_strerror(rc));
		return 1;
	}
	rank = rps_worker_rank(w);
	if (rps_worker_num_workers(w) != 2 || rps_worker_num_servers(w) != 2) {
		fprintf(stderr, "itest-model: wants 2 workers and 2 servers\n");
		return 1;
	}

	/* 1. declare (values from the initialiser), CLOCKS clocks of pushes */
	{
		struct rps_init init = {.kind = RPS_INIT_NORMAL, .a = 0.0f, .b = 1.0f, .seed = 5};

		rc = rps_worker_declare(w, keys, lens, NKEYS, &init);
		CHECK(rc == 0, "declare: %s", rps_strerror(rc));
	}
	CHECK(rps_worker_barrier(w) == 0, "barrier");
	for (int c = 0; c < CLOCKS; c++) {
		for (size_t i = 0; i < n; i++)
			g[i] = (float)((int)(i % 7) - 3 + rank + c);
		push_all(w, g);
		CHECK(rps_worker_clock(w) == 0, "clock");
	}
	/* every push acknowledged: under ASP too, nothing moves while worker 0
	 * compares pulls */
	CHECK(rps_worker_barrier(w) == 0, "barrier");

	if (rank == 0) {
		long d;

		/* 2. the file holds the pull of this clock */
		snprintf(path, sizeof(path), "%s/a.npz", argv[1]);
		rc = rps_worker_save_model(w, keys, lens, NKEYS, path);
		CHECK(rc == 0, "save a.npz: %s", rps_strerror(rc));
		pull_all(w, v);
		rc = rps_model_load(path, keys, lens, NKEYS, x);
		CHECK(rc == 0, "read a.npz: %s", rps_strerror(rc));
		d = first_diff(v, x, n);
		CHECK(d < 0, "a.npz element %ld: %g, a pull gives %g", d, d < 0 ? 0.0 : x[d],
		      d < 0 ? 0.0 : v[d]);
		/* 3. refused files change nothing */
		try_refused(w, argv[1], v, x);
		/* 4. a good file */
		snprintf(path, sizeof(path), "%s/b.npz", argv[1]);
		rc = rps_worker_load_model(w, keys, lens, NKEYS, path);
		CHECK(rc == 0, "load b.npz: %s", rps_strerror(rc));
	}
	CHECK(rps_worker_barrier(w) == 0, "barrier");
	if (!pull_all(w, v)) {
		long d = first_diff(v, b, n);

		CHECK(d < 0, "after loading b.npz element %ld is %g, the file says %g", d,
		      d < 0 ? 0.0 : v[d], d < 0 ? 0.0 : b[d]);
	}
	if (rank == 0) {
		snprintf(path, sizeof(path), "%s/c.npz", argv[1]);
		rc = rps_worker_save_model(w, keys, lens, NKEYS, path);
		CHECK(rc == 0, "save c.npz: %s", rps_strerror(rc));
	}
	CHECK(rps_worker_barrier(w) == 0, "barrier");

	/* 5. one clock of 1s from each worker, both acknowledged before the
	 * barrier. BSP: one step of their sum, v = 0.5 * 0 + 2, w -= 0.5 * v.
	 * ASP: two steps, v = 1 then 0.5 * 1 + 1, w -= 0.5 * (1 + 1.5). Either
	 * way from momentum 0: the assignment reset it. */
	for (size_t i = 0; i < n; i++)
		g[i] = 1.0f;
	push_all(w, g);
	CHECK(rps_worker_clock(w) == 0, "clock");
	CHECK(rps_worker_barrier(w) == 0, "barrier");
	if (!pull_all(w, v)) {
		float step = asp ? 1.25f : 1.0f;
		long d;

		for (size_t i = 0; i < n; i++)
			x[i] = b[i] - step;
		d = first_diff(v, x, n);
		CHECK(d < 0, "after a clock element %ld is %g, expected %g", d, d < 0 ? 0.0 : v[d],
		      d < 0 ? 0.0 : x[d]);
	}
	CHECK(rps_worker_barrier(w) == 0, "final barrier");
	rps_worker_destroy(w);
	free(v);
	free(x);
	free(b);
	free(g);
	if (failures)
		fprintf(stderr, "itest-model %d: %d failure(s)\n", rank, failures);
	else
		printf("itest-model %d: ok\n", rank);
	return failures ? 1 : 0;
}
