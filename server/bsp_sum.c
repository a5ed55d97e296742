/* A BSP clock's sum for one slice, in worker-rank order (bsp_sum.h). */
#include "server/bsp_sum.h"

#include <cblas.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"

static inline bool lane_used(const struct rps_slice_meta *m, uint32_t l)
{
	return (m->lanes_used[l >> 6] >> (l & 63)) & 1;
}

static inline float *lane(const struct rps_slice_meta *m, uint32_t l)
{
	return m->acc + (size_t)l * m->nelems;
}

int rps_bsp_sum_init(struct rps_slice_meta *m, uint32_t nlanes)
{
	size_t bytes;

	if (!nlanes || nlanes > RPS_MAX_WORKERS)
		return -EINVAL;
	if (m->nelems > SIZE_MAX / sizeof(float) / nlanes)
		return -ENOMEM;
	bytes = (size_t)m->nelems * sizeof(float) * nlanes;
	m->acc = rps_aligned_alloc(RPS_CACHELINE, bytes);
	if (!m->acc) {
		RPS_ERR("key %llu slice %u: no memory for the BSP sums (%u lanes of %llu elements, "
			"%zu bytes)%s",
			(unsigned long long)m->key, m->slice, nlanes, (unsigned long long)m->nelems,
			bytes,
			nlanes > 1 ? ": RDMAPS_BSP_SUM=arrival needs one lane, not one per worker"
				   : "");
		return -ENOMEM;
	}
	memset(m->acc, 0, bytes);
	m->nlanes = nlanes;
	memset(m->lanes_used, 0, sizeof(m->lanes_used));
	return 0;
}

void rps_bsp_sum_add(struct rps_slice_meta *m, uint32_t w, uint64_t off, uint64_t n, float scale,
		     const float *g)
{
	uint32_t l = w < m->nlanes ? w : 0;
	float *y = lane(m, l);

	if (!lane_used(m, l)) {
		/* an unused lane holds what the last clock left: a push of the
		 * whole slice is written over it; part of one needs the zeros */
		m->lanes_used[l >> 6] |= 1ull << (l & 63);
		if (off == 0 && n == m->nelems) {
			/* what saxpy into zeros gives, bit for bit: + 0.0f turns a
			 * -0 product into +0, as 0 + scale * g does */
			for (uint64_t i = 0; i < n; i++)
				y[i] = scale * g[i] + 0.0f;
			return;
		}
		memset(y, 0, m->nelems * sizeof(float));
	}
	cblas_saxpy((int)n, scale, g, 1, y + off, 1);
}

/* Elements per block of the rank-order pass: a block of every lane stays in
 * cache while it is added and cleared. */
#define SUM_BLOCK 4096

float *rps_bsp_sum_total(struct rps_slice_meta *m)
{
	uint32_t first = 0;
	float *sum;

	while (first < m->nlanes && !lane_used(m, first))
		first++;
	if (first == m->nlanes)
		return NULL;
	sum = lane(m, first);
	for (uint64_t b = 0; b < m->nelems; b += SUM_BLOCK) {
		uint64_t n = m->nelems - b < SUM_BLOCK ? m->nelems - b : SUM_BLOCK;

		for (uint32_t l = first + 1; l < m->nlanes; l++) {
			if (!lane_used(m, l))
				continue;
			/* alpha 1: sum + lane, rounded once, fused or not */
			cblas_saxpy((int)n, 1.0f, lane(m, l) + b, 1, sum + b, 1);
		}
	}
	/* the other lanes are unused again (their next add starts them over):
	 * only the sum is left */
	memset(m->lanes_used, 0, sizeof(m->lanes_used));
	m->lanes_used[first >> 6] |= 1ull << (first & 63);
	return sum;
}

void rps_bsp_sum_clear(struct rps_slice_meta *m)
{
	/* no pass over the lanes: the next add to an unused lane starts it over
	 * (rps_bsp_sum_add), so the clock's apply is not followed by a memset of
	 * every used lane before its pulls are answered */
	memset(m->lanes_used, 0, sizeof(m->lanes_used));
}
