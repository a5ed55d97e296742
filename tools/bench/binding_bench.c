/* rdmaps-bench-binding: the C half of tools/bench/binding_bench.py, which
 * compares the same operations through the Python binding and through the C
 * API in one run.
 *
 * Both are workers of one cluster (ASP, so no clock holds anything back) and
 * take turns, separated by barriers: in round r the C worker measures in the
 * first slot when r is even and in the second when r is odd, the Python
 * worker in the other slot. A measurement is --pulls pulls of one 4 KiB
 * tensor (key 100, 1,024 floats) and --pushes pushes of one 1 MiB tensor
 * (key 101, 262,144 floats), each issued and waited for before the next, as
 * a caller that needs the result does, each timed on its own. One line per
 * round goes to --out (microseconds per operation: medians, then means):
 *   c ROUND PULL_MEDIAN PUSH_MEDIAN PULL_MEAN PUSH_MEAN
 *
 *   rdmaps-bench-binding --rounds R --pulls N --pushes M --out FILE
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdmaps/rdmaps.h>

#define KEY_SMALL 100
#define KEY_LARGE 101
#define SMALL_LEN 1024u	  /* 4 KiB */
#define LARGE_LEN 262144u /* 1 MiB */

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int pull_once(struct rps_worker *w, float *buf)
{
	rps_key_t k = KEY_SMALL;
	size_t len = SMALL_LEN;
	struct rps_req *req;
	int rc = rps_worker_pull(w, &k, buf, &len, 1, &req);

	return rc ? rc : rps_req_wait(req, -1);
}

static int push_once(struct rps_worker *w, const float *g)
{
	rps_key_t k = KEY_LARGE;
	size_t len = LARGE_LEN;
	struct rps_req *req;
	int rc = rps_worker_push(w, &k, g, &len, 1, &req);

	return rc ? rc : rps_req_wait(req, -1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One measurement: the median microseconds of a pull and of a push (each
 * operation timed on its own, so a preemption spoils one sample, not the
 * figure) and the means (total time / count). t: scratch of max(pulls,
 * pushes) doubles. */
static int measure(struct rps_worker *w, float *small, float *large, int pulls, int pushes,
		   double *t, double res[4])
{
	double t0, start;
	int rc;

	for (int i = 0; i < 10; i++) /* warm the path up */
		if ((rc = pull_once(w, small)))
			return rc;
	start = now_us();
	for (int i = 0; i < pulls; i++) {
		t0 = now_us();
		if ((rc = pull_once(w, small)))
			return rc;
		t[i] = now_us() - t0;
	}
	res[2] = (now_us() - start) / pulls;
	res[0] = median(t, pulls);
	start = now_us();
	for (int i = 0; i < pushes; i++) {
		t0 = now_us();
		if ((rc = push_once(w, large)))
			return rc;
		t[i] = now_us() - t0;
	}
	res[3] = (now_us() - start) / pushes;
	res[1] = median(t, pushes);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rounds", required_argument, NULL, 'r' }, { "pulls", required_argument, NULL, 'n' },
		{ "pushes", required_argument, NULL, 'm' }, { "out", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	int rounds = 11, pulls = 2000, pushes = 200, c, rc;
	const char *out = NULL;
	rps_key_t keys[2] = { KEY_SMALL, KEY_LARGE };
	size_t lens[2] = { SMALL_LEN, LARGE_LEN };
	struct rps_init zeros = { .kind = RPS_INIT_ZEROS };
	struct rps_worker *w;
	float *small, *large;
	double *t;
	FILE *f;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r': rounds = atoi(optarg); break;
		case 'n': pulls = atoi(optarg); break;
		case 'm': pushes = atoi(optarg); break;
		case 'o': out = optarg; break;
		default:
			fprintf(stderr, "usage: rdmaps-bench-binding --rounds R --pulls N "
					"--pushes M --out FILE\n");
			return 2;
		}
	}
	if (!out || rounds < 1 || pulls < 1 || pushes < 1) {
		fprintf(stderr, "rdmaps-bench-binding: --out FILE is needed; --rounds, --pulls "
				"and --pushes must be >= 1\n");
		return 2;
	}
	f = fopen(out, "w");
	if (!f) {
		fprintf(stderr, "rdmaps-bench-binding: cannot write %s: %s\n", out, strerror(errno));
		return 1;
	}
	small = calloc(SMALL_LEN, sizeof(float));
	large = malloc(LARGE_LEN * sizeof(float));
	t = malloc((size_t)(pulls > pushes ? pulls : pushes) * sizeof(double));
	if (!small || !large || !t)
		return 1;
	for (size_t i = 0; i < LARGE_LEN; i++)
		large[i] = 1e-6f;
	if ((rc = rps_worker_create(NULL, &w))) {
		fprintf(stderr, "rdmaps-bench-binding: cannot join the cluster: %s\n",
			rps_strerror(rc));
		return 1;
	}
	if ((rc = rps_worker_declare(w, keys, lens, 2, &zeros)) || (rc = rps_worker_barrier(w)))
		goto fail;
	for (int r = 0; r < rounds; r++) {
		for (int slot = 0; slot < 2; slot++) {
			if ((rc = rps_worker_barrier(w)))
				goto fail;
			if (slot == (r & 1)) {
				double res[4];

				if ((rc = measure(w, small, large, pulls, pushes, t, res)))
					goto fail;
				fprintf(f, "c %d %.3f %.3f %.3f %.3f\n", r, res[0], res[1], res[2],
					res[3]);
				fflush(f);
			}
		}
	}
	rc = rps_worker_barrier(w);
fail:
	if (rc)
		fprintf(stderr, "rdmaps-bench-binding: %s\n", rps_strerror(rc));
	rps_worker_destroy(w);
	fclose(f);
	free(small);
	free(large);
	free(t);
	return rc ? 1 : 0;
}
