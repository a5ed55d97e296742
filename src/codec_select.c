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

uint64_t rps_codec_topk_select(const float *v, uint64_t n, uint64_t k, float *scratch,
			       uint32_t *idx)
{
	uint64_t above = 0, got = 0, ties;
	float t;

	for (uint64_t i = 0; i < n; i++)
		scratch[i] = mag(v[i]);
	t = kth_largest(scratch, n, k - 1);
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
