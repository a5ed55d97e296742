/* Gradient codecs: what a compressed PUSH carries (docs/protocol.md
 * "Compressed pushes", docs/compression.md).
 *
 * A PUSH frame's hdr.flags & RPS_CODEC_MASK names the codec of its data; the
 * struct rps_push's count stays the number of elements of the range
 * [offset, offset + count). Every codec works on one frame's range on its own
 * (the worker cuts a key into frames first), so a receiver decodes a frame
 * without any other.
 *
 *   id 0 none   float32[count]                                  4 * count bytes
 *   id 1 fp16   IEEE binary16[count], round to nearest even     2 * count
 *   id 2 bf16   bfloat16[count] (top half of binary32), RNE     2 * count
 *   id 3 topk   uint32 k, uint32 idx[k], float32 val[k]          4 + 8 * k
 *   id 4 randk  the same layout as topk                          4 + 8 * k
 *   id 5 sign   float32 scale, bits[ceil(count / 8)]             4 + ceil(count / 8)
 *   id 6 signb  uint32 B, float32 scale[ceil(count / B)],        4 + 4 * ceil(count / B)
 *               bits[ceil(count / 8)]                              + ceil(count / 8)
 *
 * Sparse (topk, randk): 0 <= k <= count, idx strictly increasing, each
 * < count (relative to offset); the elements not listed are 0. Sign: bit i
 * (byte i / 8, bit i % 8, LSB first) set: +scale, clear: -scale; padding bits
 * 0. Signb: the same bits; element i's scale is scale[i / B], B >= 1. Little-endian, no alignment: a receiver reads with memcpy. The sizes are
 * exact: a frame of any other length is refused.
 */
#ifndef RPS_CODEC_H
#define RPS_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include <rdmaps/compress.h>

#define RPS_CODEC_MASK 0x000fu /* PUSH hdr.flags bits of the codec id */

/* Bytes of one frame's data for count elements (k for the sparse codecs:
 * rps_codec_sparse_k; signb: rps_codec_bytes_blk with its block, here 256). */
size_t rps_codec_bytes(enum rps_codec c, uint64_t count, float ratio);
/* The same with signb's block (elements per scale, >= 1). */
size_t rps_codec_bytes_blk(enum rps_codec c, uint64_t count, float ratio, uint32_t block);
/* Elements a sparse frame of count elements carries at ratio: ceil(ratio *
 * count), at least 1 when count > 0, at most count. */
uint64_t rps_codec_sparse_k(uint64_t count, float ratio);
/* The ratio of a sparse key's push number push (0 first) under its warm-up:
 * o->ratio, or during the first o->warmup_steps pushes o->warmup_ratio *
 * (o->ratio / o->warmup_ratio)^(push / warmup_steps). */
float rps_codec_step_ratio(const struct rps_compress_opts *o, uint64_t push);
/* "fp16"; "?" for an unknown id. */
const char *rps_codec_name(unsigned id);

/* One frame's encoder state: residual (NULL: no error feedback) holds what
 * earlier steps did not send for these same elements; it is added to g before
 * encoding and replaced by what this encoding left out. scratch: at least
 * 4 * count bytes for topk (NULL otherwise is fine). rng: randk's state.
 * block: signb's elements per scale. velocity (with a residual only; NULL:
 * none): momentum correction, velocity = momentum * velocity + g is what
 * the residual accumulates; topk and randk clear a sent element's velocity. */
struct rps_codec_enc {
	enum rps_codec kind;
	float ratio;
	float *residual;
	void *scratch;
	uint64_t *rng;
	uint32_t block;
	float momentum;
	float *velocity;
};

/* Encode g[0..count) into out (rps_codec_bytes bytes). Returns the bytes
 * written. */
size_t rps_codec_encode(const struct rps_codec_enc *e, const float *g, uint64_t count, void *out);

/* Check data (len bytes, codec id, count elements) exactly as a receiver
 * must: 0, or -EPROTO with a reason in why[wlen] (names the codec, the sizes). */
int rps_codec_check(unsigned id, const void *data, size_t len, uint64_t count, char *why,
		    size_t wlen);
/* Decode checked data into out[0..count) as float32. */
void rps_codec_decode(unsigned id, const void *data, size_t len, uint64_t count, float *out);

/* The raw conversions (runtime-dispatched to F16C / AVX2 where the CPU has them). */
void rps_codec_f32_to_f16(const float *in, uint16_t *out, size_t n);
void rps_codec_f16_to_f32(const uint16_t *in, float *out, size_t n);
void rps_codec_f32_to_bf16(const float *in, uint16_t *out, size_t n);
void rps_codec_bf16_to_f32(const uint16_t *in, float *out, size_t n);
/* Portable versions (tests compare both). */
uint16_t rps_codec_f16_one(float f);
float rps_codec_f16_widen(uint16_t h);
uint16_t rps_codec_bf16_one(float f);
/* 1 if the accelerated paths are in use. */
int rps_codec_simd(void);

#endif
