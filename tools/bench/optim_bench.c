/* rdmaps-bench-optim: optimizer throughput against a plain cblas_saxpy.
 *
 * Over the same buffers (w, g and the optimizer state, --bytes of gradient
 * each, default 64 MiB), times one pass of cblas_saxpy (w += a g) and one
 * rps_optimizer_step (the servers' optimizer code) per optimizer, round-robin, --iters times, and reports the
 * median as GB/s of gradient consumed. OpenBLAS runs on one thread so that
 * the figures are per core. Exit status 1 when SGD is below 0.8x saxpy.
 */
#include <cblas.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdmaps/optim.h>
#include <rdmaps/rdmaps.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* splitmix64: reproducible pseudo-random buffer contents */
static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

#define SGD_MIN_RATIO 0.8

enum { K_SAXPY = 0, K_SGD, K_MOMENTUM, K_NESTEROV, K_ADAGRAD, K_ADAM, K_COUNT };

static const char *const kernel_names[K_COUNT] = {
    "saxpy", "sgd", "momentum", "nesterov", "adagrad", "adam",
};
/* float streams each pass moves (read + write), for the memory-traffic column */
static const int kernel_streams[K_COUNT] = {
    3, /* saxpy: g, w, w */
    3, /* sgd: one saxpy */
    5, /* momentum: g, v, v, w, w */
    5, /* nesterov: g, v, v, w, w */
    5, /* adagrad: g, s, s, w, w */
    7, /* adam: g, m, m, v, v, w, w */
};

struct bench_args {
	size_t bytes;
	int iters;
	int json;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rdmaps-bench-optim [--bytes N[K|M|G]] [--iters N] [--json]\n"
		"  --bytes  gradient size per pass (default 64M; float32, so N/4 elements)\n"
		"  --iters  timed repetitions of each kernel; the median is reported (default 15)\n"
		"  --json   one JSON object instead of the table\n"
		"Exit status: 0 when sgd >= %.1fx saxpy, 1 when below, 2 on bad usage.\n",
		SGD_MIN_RATIO);
}

static int parse_size(const char *s, size_t *out_p)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		end++;
		break;
	default:
		break;
	}
	if (*end == 'i' || *end == 'B')
		end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
	if (*end || v < sizeof(float))
		return -EINVAL;
	*out_p = (size_t)v;
	return 0;
}

static int parse_args(int argc, char **argv, struct bench_args *a)
{
	static const struct option opts[] = {
	    {"bytes", required_argument, NULL, 'b'},
	    {"iters", required_argument, NULL, 'i'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	a->bytes = 64u << 20;
	a->iters = 15;
	a->json = 0;
	while ((c = getopt_long(argc, argv, "b:i:jh", opts, NULL)) != -1) {
		switch (c) {
		case 'b':
			if (parse_size(optarg, &a->bytes)) {
				fprintf(stderr, "rdmaps-bench-optim: bad --bytes '%s'\n", optarg);
				return -EINVAL;
			}
			break;
		case 'i':
			a->iters = atoi(optarg);
			if (a->iters < 1) {
				fprintf(stderr, "rdmaps-bench-optim: --iters must be >= 1\n");
				return -EINVAL;
			}
			break;
		case 'j':
			a->json = 1;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return -EINVAL;
	}
	return 0;
}

/* v rounded to `places` decimals, as "%.*f" prints it */
static double dec(double v, int places)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "%.*f", places, v);
	return strtod(buf, NULL);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

struct bufs {
	float *w, *g;
	size_t n;
	/* the servers' optimizer code through the public API, each with its own
	 * state (the per-call bookkeeping is a step counter: noise next to n) */
	struct rps_optimizer *opt[K_COUNT];
};

/* One pass of kernel k; returns seconds. */
static double run_once(struct bufs *b, int k)
{
	uint64_t t0 = now_ns();

	if (k == K_SAXPY)
		cblas_saxpy((int)b->n, -1e-6f, b->g, 1, b->w, 1);
	else
		rps_optimizer_step(b->opt[k], b->w, b->g);
	return (double)(now_ns() - t0) * 1e-9;
}

int main(int argc, char **argv)
{
	static const enum rps_optim_kind kinds[K_COUNT] = {
	    [K_SGD] = RPS_OPT_SGD,	     [K_MOMENTUM] = RPS_OPT_MOMENTUM,
	    [K_NESTEROV] = RPS_OPT_NESTEROV, [K_ADAGRAD] = RPS_OPT_ADAGRAD,
	    [K_ADAM] = RPS_OPT_ADAM,
	};
	struct bench_args a;
	struct bufs b;
	double *t[K_COUNT] = {NULL};
	double med[K_COUNT], best[K_COUNT], gbps[K_COUNT];
	size_t bytes;
	int pass, rc = 2;

	if (parse_args(argc, argv, &a))
		return 2;
	b.n = a.bytes / sizeof(float);
	if (b.n > (size_t)1 << 30) {
		fprintf(stderr, "rdmaps-bench-optim: --bytes at most 4G (BLAS int lengths)\n");
		return 2;
	}
	bytes = b.n * sizeof(float);

	/* per-core figures: OpenBLAS would otherwise spread saxpy over threads */
	openblas_set_num_threads(1);

	b.w = aligned_alloc(64, (bytes + 63) / 64 * 64);
	b.g = aligned_alloc(64, (bytes + 63) / 64 * 64);
	memset(b.opt, 0, sizeof(b.opt));
	pass = b.w && b.g;
	for (int k = 0; k < K_COUNT; k++) {
		t[k] = calloc((size_t)a.iters, sizeof(double));
		pass = pass && t[k];
	}
	if (!pass) {
		fprintf(stderr, "rdmaps-bench-optim: cannot allocate 4 x %zu bytes\n", bytes);
		goto out_free;
	}
	for (size_t i = 0; i < b.n; i++) {
		uint64_t h = mix64(i);

		b.w[i] = (float)(h & 0xffff) / 65536.0f - 0.5f;
		b.g[i] = (float)((h >> 16) & 0xffff) / 65536.0f - 0.5f;
	}
	for (int k = K_SGD; k < K_COUNT; k++) {
		struct rps_optim_opts o = {
		    .kind = kinds[k],
		    .lr = 1e-6f, /* keep w bounded over the passes */
		    .momentum = 0.9f,
		    .beta1 = 0.9f,
		    .beta2 = 0.999f,
		    .eps = 1e-8f,
		    .schedule = RPS_LR_CONSTANT,
		};

		if (rps_optimizer_create(&o, b.n, &b.opt[k])) {
			fprintf(stderr, "rdmaps-bench-optim: cannot create optimizer state for %zu "
					"elements\n", b.n);
			goto out_free;
		}
	}

	/* warm-up: page in every buffer, wake up the BLAS kernels */
	for (int k = 0; k < K_COUNT; k++)
		run_once(&b, k);
	/* round-robin, so that noise from other load hits every kernel alike */
	for (int it = 0; it < a.iters; it++)
		for (int k = 0; k < K_COUNT; k++)
			t[k][it] = run_once(&b, k);
	for (int k = 0; k < K_COUNT; k++) {
		qsort(t[k], (size_t)a.iters, sizeof(double), cmp_double);
		med[k] = a.iters % 2 ? t[k][a.iters / 2]
				     : (t[k][a.iters / 2 - 1] + t[k][a.iters / 2]) / 2;
		best[k] = t[k][0];
		gbps[k] = (double)bytes / med[k] / 1e9;
	}
	pass = gbps[K_SGD] >= SGD_MIN_RATIO * gbps[K_SAXPY];

	if (a.json) {
		/* fixed decimals as the table has them: rounded here, printed with
		 * up to 15 significant digits (the same text for these values) */
		json_t *doc = json_pack("{s:I, s:I, s:i, s:i, s:s}", "bytes", (json_int_t)bytes,
					"elements", (json_int_t)b.n, "iters", a.iters,
					"openblas_threads", 1, "openblas_config",
					openblas_get_config());
		json_t *kern = json_object();

		for (int k = 0; doc && kern && k < K_COUNT; k++)
			json_object_set_new(
			    kern, kernel_names[k],
			    json_pack("{s:f, s:f, s:f, s:f, s:f}", "median_ms", dec(med[k] * 1e3, 4),
				      "min_ms", dec(best[k] * 1e3, 4), "grad_gbps", dec(gbps[k], 3),
				      "traffic_gbps", dec(gbps[k] * kernel_streams[k], 3),
				      "ratio_vs_saxpy", dec(gbps[k] / gbps[K_SAXPY], 4)));
		if (!doc || !kern) {
			fprintf(stderr, "rdmaps-bench-optim: out of memory for the JSON\n");
			json_decref(doc);
			json_decref(kern);
			rc = 1;
			goto out_free;
		}
		json_object_set_new(doc, "kernels", kern);
		json_object_set_new(doc, "sgd_vs_saxpy", json_real(dec(gbps[K_SGD] / gbps[K_SAXPY], 4)));
		json_object_set_new(doc, "adam_vs_saxpy",
				    json_real(dec(gbps[K_ADAM] / gbps[K_SAXPY], 4)));
		json_object_set_new(doc, "sgd_min_ratio", json_real(dec(SGD_MIN_RATIO, 2)));
		json_object_set_new(doc, "pass", json_boolean(pass));
		if (json_dumpf(doc, stdout, JSON_REAL_PRECISION(15)) || printf("\n") < 0) {
			fprintf(stderr, "rdmaps-bench-optim: writing the JSON failed\n");
			json_decref(doc);
			rc = 1;
			goto out_free;
		}
		json_decref(doc);
	} else {
		printf("# rdmaps-bench-optim: %zu bytes of gradient (%zu floats) per pass, median "
		       "of %d\n",
		       bytes, b.n, a.iters);
		printf(
		    "# OpenBLAS on 1 thread (openblas_set_num_threads(1)): per-core figures; %s\n",
		    openblas_get_config());
		printf(
		    "# grad = gradient bytes consumed per second; traffic = all float streams read "
		    "and written\n");
		printf("%-10s %14s %12s %12s %15s %16s\n", "kernel", "t_median[ms]", "t_min[ms]",
		       "grad[GB/s]", "traffic[GB/s]", "ratio[x saxpy]");
		for (int k = 0; k < K_COUNT; k++)
			printf("%-10s %14.3f %12.3f %12.3f %15.3f %16.3f\n", kernel_names[k],
			       med[k] * 1e3, best[k] * 1e3, gbps[k], gbps[k] * kernel_streams[k],
			       gbps[k] / gbps[K_SAXPY]);
		printf("ratios: sgd/saxpy %.3f, adam/saxpy %.3f\n", gbps[K_SGD] / gbps[K_SAXPY],
		       gbps[K_ADAM] / gbps[K_SAXPY]);
		printf("%s: sgd >= %.1fx saxpy (%.3f)\n", pass ? "PASS" : "FAIL", SGD_MIN_RATIO,
		       gbps[K_SGD] / gbps[K_SAXPY]);
	}
	rc = pass ? 0 : 1;

out_free:
	for (int k = 0; k < K_COUNT; k++)
		free(t[k]);
	free(b.w);
	free(b.g);
	for (int k = 0; k < K_COUNT; k++)
		rps_optimizer_destroy(b.opt[k]);
	return rc;
}
