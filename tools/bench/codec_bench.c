/* rdmaps-bench-codec: the push codecs' cost on one core against a plain
 * memcpy of the same buffer (docs/compression.md).
 *
 *   rdmaps-bench-codec [--bytes N] [--frame ELEMS] [--rounds R]
 *
 * A float32 gradient of --bytes (default 64 MiB, random normal-ish values) is
 * encoded frame by frame (--frame elements, default 1M = one 4 MiB slice, as
 * a worker encodes its PUSH frames) with each codec (rps_compress_encode,
 * error feedback on for topk, randk and sign), and the result decoded
 * (rps_compress_decode, with the server's exact check); memcpy copies the
 * same bytes. R rounds (default 11), the kernels interleaved in each; every
 * round is printed, then the medians, as GB/s of float32 gradient consumed
 * (encode) or produced (decode), timed in this thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID: on a loaded machine the time the thread ran, not
 * the time it waited for a core; caches are still shared).
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdmaps/rdmaps.h>

static double now_s(void)
{
	struct timespec ts;

	/* this thread's CPU time: one core's work, whatever else the machine runs */
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

#define NC 8
static const char *const specs[NC] = {"memcpy",	    "fp16", "bf16",	  "topk:0.01",
				      "randk:0.01", "sign", "topk:0.001", "sign:256"};

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"bytes", required_argument, NULL, 'b'},
					     {"frame", required_argument, NULL, 'f'},
					     {"rounds", required_argument, NULL, 'r'},
					     {"help", no_argument, NULL, 'h'},
					     {0}};
	size_t bytes = 64u << 20, frame = 1u << 20, n;
	int rounds = 11, c;
	double *enc_gbs, *dec_gbs;
	float *g, *res, *back, *copy;
	unsigned char *out;
	uint64_t s = 0x9e3779b97f4a7c15ull;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'b': bytes = strtoull(optarg, NULL, 0); break;
		case 'f': frame = strtoull(optarg, NULL, 0); break;
		case 'r': rounds = atoi(optarg); break;
		default:
			fprintf(c == 'h' ? stdout : stderr,
				"usage: rdmaps-bench-codec [--bytes N] [--frame ELEMS] [--rounds R]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	n = bytes / 4;
	if (!n || !frame || rounds < 1) {
		fprintf(stderr, "rdmaps-bench-codec: --bytes >= 4, --frame >= 1, --rounds >= 1\n");
		return 2;
	}
	g = malloc(n * 4);
	res = calloc(n, 4);
	back = malloc(n * 4);
	copy = malloc(n * 4);
	out = malloc(n * 8 + 64 * (n / frame + 1));
	enc_gbs = calloc((size_t)rounds * NC, sizeof(double));
	dec_gbs = calloc((size_t)rounds * NC, sizeof(double));
	if (!g || !res || !back || !copy || !out || !enc_gbs || !dec_gbs) {
		fprintf(stderr, "rdmaps-bench-codec: out of memory for %zu bytes\n", bytes);
		return 1;
	}
	for (size_t i = 0; i < n; i++) { /* a sum of uniforms: roughly normal, scale 1e-2 */
		float v = 0;

		for (int k = 0; k < 4; k++) {
			s ^= s << 13, s ^= s >> 7, s ^= s << 17;
			v += (float)(s >> 40) / 16777216.0f - 0.5f;
		}
		g[i] = v * 0.02f;
	}
	printf("rdmaps-bench-codec: %zu MiB of float32, frames of %zu elements, %d rounds, one "
	       "core\n",
	       bytes >> 20, frame, rounds);
	printf("%-6s %-11s %12s %12s %10s\n", "round", "codec", "encode GB/s", "decode GB/s",
	       "ratio");
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < NC; k++) {
			struct rps_compress_opts o;
			size_t total = 0, off = 0;
			double t0, t1, t2;

			if (k == 0) {
				t0 = now_s();
				memcpy(copy, g, n * 4);
				t1 = now_s();
				enc_gbs[r * NC] = (double)bytes / (t1 - t0) / 1e9;
				dec_gbs[r * NC] = enc_gbs[r * NC];
				printf("%-6d %-11s %12.3f %12s %10s\n", r, specs[k], enc_gbs[r * NC], "-",
				       "1.0x");
				continue;
			}
			if (rps_compress_parse(specs[k], &o))
				return 1;
			t0 = now_s();
			for (size_t i = 0; i < n; i += frame) {
				size_t m = n - i < frame ? n - i : frame, len;

				if (rps_compress_encode(&o, g + i, m, o.error_feedback ? res + i : NULL,
							out + total, &len))
					return 1;
				total += (len + 7) & ~(size_t)7;
			}
			t1 = now_s();
			for (size_t i = 0; i < n; i += frame) {
				size_t m = n - i < frame ? n - i : frame;
				size_t len = rps_compress_bytes(&o, m);

				if (rps_compress_decode(o.kind, out + off, len, m, back + i))
					return 1;
				off += (len + 7) & ~(size_t)7;
			}
			t2 = now_s();
			enc_gbs[r * NC + k] = (double)bytes / (t1 - t0) / 1e9;
			dec_gbs[r * NC + k] = (double)bytes / (t2 - t1) / 1e9;
			printf("%-6d %-11s %12.3f %12.3f %9.1fx\n", r, specs[k], enc_gbs[r * NC + k],
			       dec_gbs[r * NC + k], (double)bytes / (double)total);
		}
	}
	printf("medians over %d rounds (GB/s of float32 gradient, one core):\n", rounds);
	printf("%-11s %12s %12s %14s\n", "codec", "encode", "decode", "encode/memcpy");
	{
		double *col = malloc((size_t)rounds * sizeof(double)), mc;

		if (!col)
			return 1;

		for (int r = 0; r < rounds; r++)
			col[r] = enc_gbs[r * NC];
		qsort(col, (size_t)rounds, sizeof(double), cmp_d);
		mc = col[rounds / 2];
		for (int k = 0; k < NC; k++) {
			double e, d;

			for (int r = 0; r < rounds; r++)
				col[r] = enc_gbs[r * NC + k];
			qsort(col, (size_t)rounds, sizeof(double), cmp_d);
			e = col[rounds / 2];
			for (int r = 0; r < rounds; r++)
				col[r] = dec_gbs[r * NC + k];
			qsort(col, (size_t)rounds, sizeof(double), cmp_d);
			d = col[rounds / 2];
			printf("%-11s %12.3f %12.3f %13.2fx\n", specs[k], e, d, e / mc);
		}
		free(col);
	}
	free(g);
	free(res);
	free(back);
	free(copy);
	free(out);
	free(enc_gbs);
	free(dec_gbs);
	return 0;
}
