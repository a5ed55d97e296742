/* CRC-32C of 64 MiB: the slice-by-8 rdmaps had (kept here, as it was in
 * src/ckpt_format.c) against rps_crc32c, now ISA-L's crc32_iscsi (libisal).
 * Interleaved rounds, every round listed, then the medians. Not a test: run
 * it by hand (HACKING.md).
 *   bench_crc32c [ROUNDS]     (default 11) */
#include <pthread.h>
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

#define CRC32C_POLY 0x82f63b78u

static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_tab_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		crc_tab[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int k = 1; k < 8; k++)
			crc_tab[k][i] =
			    (crc_tab[k - 1][i] >> 8) ^ crc_tab[0][crc_tab[k - 1][i] & 0xff];
}

static uint32_t slice8_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pthread_once(&crc_once, crc_tab_init);
	crc = ~crc;
	while (len && ((uintptr_t)p & 7)) {
		crc = crc_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
		len--;
	}
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		v ^= crc;
		crc = crc_tab[7][v & 0xff] ^ crc_tab[6][(v >> 8) & 0xff] ^
		      crc_tab[5][(v >> 16) & 0xff] ^ crc_tab[4][(v >> 24) & 0xff] ^
		      crc_tab[3][(v >> 32) & 0xff] ^ crc_tab[2][(v >> 40) & 0xff] ^
		      crc_tab[1][(v >> 48) & 0xff] ^ crc_tab[0][v >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = crc_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
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
	c[0] = slice8_crc32c(0, buf, BYTES);
	c[1] = rps_crc32c(0, buf, BYTES);
	if (c[0] != c[1] || rps_crc32c(0, (const unsigned char *)"123456789", 9) != 0xe3069283u) {
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

			c[which] = which ? rps_crc32c(0, buf, BYTES) : slice8_crc32c(0, buf, BYTES);
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
