/* Top-k selection: the k-th largest magnitude by quickselect (expected
 * O(n)), then one pass in index order. */
#include <math.h>
#include <string.h>

#include "src/codec_int.h"

static void swapf(float *a, float *b)
{
	float t = *a;

	*a = *b;
	*b = t;
}

/* The value that would be at position k (0-based, descending order) of
 * a[0..n) sorted; a is permuted. */
static float kth_largest(float *a, uint64_t n, uint64_t k)
{
	uint64_t lo = 0, hi = n - 1;

	while (hi > lo) {
		uint64_t mid = lo + (hi - lo) / 2;
		uint64_t i, j;
		float p;

		/* median of three into a[mid] */
		if (a[lo] < a[mid])
			swapf(&a[lo], &a[mid]);
		if (a[mid] < a[hi])
			swapf(&a[mid], &a[hi]);
		if (a[lo] < a[mid])
			swapf(&a[lo], &a[mid]);
		p = a[mid];
		/* Hoare partition, descending */
		i = lo;
		j = hi;
		for (;;) {
			while (a[i] > p)
				i++;
			while (a[j] < p)
				j--;
			if (i >= j)
				break;
			swapf(&a[i], &a[j]);
			i++;
			j--;
		}
		if (k <= j)
			hi = j;
		else
			lo = j + 1;
	}
	return a[k];
}

/* NaN counts as the largest magnitude: it is sent, as an uncompressed push
 * would send it, and the selection stays total. */
static inline float mag(float x)
{
	return isnan(x) ? INFINITY : fabsf(x);
}

/* Elements of v with magnitude >= t, their magnitudes into out (at most
 * cap; returns the count, which may exceed cap: then out is incomplete). */
static uint64_t gather(const float *v, uint64_t n, float t, float *out, uint64_t cap)
{
	uint64_t c = 0;

	for (uint64_t i = 0; i < n; i++) {
		float m = mag(v[i]);

		if (m >= t) {
			if (c < cap)
				out[c] = m;
			c++;
		}
	}
	return c;
}

#define SAMPLE 2048

uint64_t rps_codec_topk_select(const float *v, uint64_t n, uint64_t k, float *scratch,
			       uint32_t *idx)
{
	uint64_t above = 0, got = 0, ties;
	float t = 0;
	int have = 0;

	/* Fast path: a threshold from an evenly spaced sample that about 2k
	 * elements pass, then the exact k-th largest among those candidates
	 * only. It is the k-th largest of all when at least k pass. */
	if (n >= 8 * SAMPLE && k <= n / 16) {
		uint64_t step = n / SAMPLE, q = (2 * k * SAMPLE) / n, c;

		for (uint64_t j = 0; j < SAMPLE; j++)
			scratch[j] = mag(v[j * step]);
		t = kth_largest(scratch, SAMPLE, q < SAMPLE - 1 ? q : SAMPLE - 1);
		c = gather(v, n, t, scratch, n / 4);
		if (c >= k && c <= n / 4) {
			t = kth_largest(scratch, c, k - 1);
			have = 1;
		}
	}
	if (!have) { /* quickselect over every magnitude */
		for (uint64_t i = 0; i < n; i++)
			scratch[i] = mag(v[i]);
		t = kth_largest(scratch, n, k - 1);
	}
	for (uint64_t i = 0; i < n; i++)
		above += mag(v[i]) > t;
	ties = k - above; /* elements equal to t that make up k, lowest indices first */
	for (uint64_t i = 0; i < n && got < k; i++) {
		float m = mag(v[i]);

		if (m > t || (m == t && ties && ties--))
			idx[got++] = (uint32_t)i;
	}
	return got;
}
