/* CRC-32C of 64 MiB: rdmaps' slice-by-8 (rps_crc32c, src/ckpt_format.c)
 * against ISA-L's crc32_iscsi (libisal). Interleaved rounds, every round
 * listed, then the medians. Not a test: run it by hand (HACKING.md).
 *   bench_crc32c [ROUNDS]     (default 11) */
#include <isa-l/crc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/ckpt.h"
#include "src/util.h"

#define BYTES (64u << 20)

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static uint32_t isal_crc32c(uint32_t crc, const unsigned char *p, size_t len)
{
	/* ISA-L neither inverts in nor out */
	crc = ~crc;
	while (len) {
		int n = len > (1u << 30) ? 1 << 30 : (int)len;

		crc = crc32_iscsi((unsigned char *)p, n, crc);
		p += n;
		len -= (size_t)n;
	}
	return ~crc;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 11;
	unsigned char *buf = malloc(BYTES);
	double *t[2];
	uint32_t c[2] = {0, 0};

	if (rounds < 1 || !buf)
		return 2;
	t[0] = calloc((size_t)rounds, sizeof(double));
	t[1] = calloc((size_t)rounds, sizeof(double));
	if (!t[0] || !t[1])
		return 2;
	for (size_t i = 0; i < BYTES; i++)
		buf[i] = (unsigned char)(i * 2654435761u >> 13);
	/* warm-up (tables, page faults), and the two must agree */
	c[0] = rps_crc32c(0, buf, BYTES);
	c[1] = isal_crc32c(0, buf, BYTES);
	if (c[0] != c[1] || isal_crc32c(0, (const unsigned char *)"123456789", 9) != 0xe3069283u) {
		fprintf(stderr, "results differ: slice-by-8 %08x, isa-l %08x\n", c[0], c[1]);
		return 1;
	}
	printf("CRC-32C of %u MiB (crc %08x), %d interleaved rounds, GB/s (10^9 bytes/s)\n",
	       BYTES >> 20, c[0], rounds);
	printf("%5s %14s %14s\n", "round", "slice-by-8", "isa-l");
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < 2; k++) {
			int which = (r & 1) ? 1 - k : k; /* alternate who goes first */
			uint64_t t0 = rps_now_ns();

			c[which] = which ? isal_crc32c(0, buf, BYTES) : rps_crc32c(0, buf, BYTES);
			t[which][r] = (double)BYTES / (double)(rps_now_ns() - t0);
		}
		if (c[0] != c[1])
			return 1;
		printf("%5d %14.3f %14.3f\n", r, t[0][r], t[1][r]);
	}
	qsort(t[0], (size_t)rounds, sizeof(double), cmp_double);
	qsort(t[1], (size_t)rounds, sizeof(double), cmp_double);
	printf("median %13.3f %14.3f\n", t[0][rounds / 2], t[1][rounds / 2]);
	free(t[0]);
	free(t[1]);
	free(buf);
	return 0;
}
