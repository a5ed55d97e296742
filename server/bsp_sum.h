/* A BSP clock's sum for one slice (bsp_sum.c).
 *
 * Float addition is not associative, so a sum taken in arrival order changes
 * with timing. By default each worker's pushes of the clock go into a lane of
 * their own (worker rank = lane), and when the clock is applied the lanes are
 * added in rank order: ((lane 0 + lane 1) + lane 2) + ..., the same bits run
 * after run. Within a lane, the frames of one push cover disjoint ranges and
 * are added into zeros, so their order does not matter either. A lane not
 * used this clock is not cleared: its first add writes scale * g over it when
 * it covers the whole slice (the common case: no pass over zeros on the way
 * to the apply), or zeroes it first. The cost is
 * one lane of the slice's size per worker; with RDMAPS_BSP_SUM=arrival (or a
 * single worker) there is one lane and every push is added to it as it comes.
 * Update thread only.
 */
#ifndef RPS_SERVER_BSP_SUM_H
#define RPS_SERVER_BSP_SUM_H

#include <stdint.h>

#include "server/keytab.h"

/* Lanes for m (nelems > 0): none used. -ENOMEM (logged). */
int rps_bsp_sum_init(struct rps_slice_meta *m, uint32_t nlanes);
/* scale * g[0..n) added into elements [off, off + n) of worker w's lane
 * (lane 0 if there is one lane, or w is not a worker rank). */
void rps_bsp_sum_add(struct rps_slice_meta *m, uint32_t w, uint64_t off, uint64_t n, float scale,
		     const float *g);
/* The clock's sum: the used lanes added in rank order into the first of
 * them, which is returned (nelems floats), the others unused; NULL if
 * nothing was added. */
float *rps_bsp_sum_total(struct rps_slice_meta *m);
/* None used (an unused lane's contents are never read). */
void rps_bsp_sum_clear(struct rps_slice_meta *m);

#endif
