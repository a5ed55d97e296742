/* Inside the codecs (src/codec*.c). */
#ifndef RPS_CODEC_INT_H
#define RPS_CODEC_INT_H

#include <stdint.h>

/* The k elements of v[0..n) of largest magnitude (ties: the lower indices),
 * their indices into idx[0..k) in increasing order; scratch: n floats.
 * Returns k. 0 < k < n. */
uint64_t rps_codec_topk_select(const float *v, uint64_t n, uint64_t k, float *scratch,
			       uint32_t *idx);

#endif
