/* Gradient codecs (src/codec.h): sizes, encoders with error feedback, the
 * receiver's exact check and the decoders. The float conversions are in
 * codec_half.c, the element selection of top-k in codec_select.c. */
#include "src/codec.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "src/codec_int.h"

#define BLOCK 256 /* elements converted at a time through the stack */

const char *rps_codec_name(unsigned id)
{
	static const char *const names[RPS_CODEC_COUNT] = {"none", "fp16", "bf16",
							   "topk", "randk", "sign",
							   "signb"};

	return id < RPS_CODEC_COUNT ? names[id] : "?";
}

uint64_t rps_codec_sparse_k(uint64_t count, float ratio)
{
	double k;

	if (!count)
		return 0;
	k = ceil((double)ratio * (double)count);
	if (k < 1)
		return 1;
	return k >= (double)count ? count : (uint64_t)k;
}

float rps_codec_step_ratio(const struct rps_compress_opts *o, uint64_t push)
{
	double f;

	if (!o->warmup_steps || push >= o->warmup_steps || !(o->warmup_ratio > o->ratio))
		return o->ratio;
	f = (double)push / (double)o->warmup_steps;
	return (float)((double)o->warmup_ratio *
		       pow((double)o->ratio / (double)o->warmup_ratio, f));
}

size_t rps_codec_bytes(enum rps_codec c, uint64_t count, float ratio)
{
	return rps_codec_bytes_blk(c, count, ratio, 256);
}

size_t rps_codec_bytes_blk(enum rps_codec c, uint64_t count, float ratio, uint32_t block)
{
	switch (c) {
	case RPS_CODEC_FP16:
	case RPS_CODEC_BF16:
		return (size_t)count * 2;
	case RPS_CODEC_TOPK:
	case RPS_CODEC_RANDK:
		return 4 + (size_t)rps_codec_sparse_k(count, ratio) * 8;
	case RPS_CODEC_SIGN:
		return 4 + (size_t)((count + 7) / 8);
	case RPS_CODEC_SIGNB:
		block = block ? block : 1;
		return 4 + 4 * (size_t)((count + block - 1) / block) + (size_t)((count + 7) / 8);
	default:
		return (size_t)count * 4;
	}
}

/* xorshift64*: randk's draws */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* The vector to encode: g, or g + residual kept in the residual itself
 * (momentum correction: the velocity, updated with g, instead of g). */
static const float *ef_add(const struct rps_codec_enc *e, const float *g, uint64_t n)
{
	if (!e->residual)
		return g;
	if (e->velocity) {
		float m = e->momentum;

		for (uint64_t i = 0; i < n; i++) {
			e->velocity[i] = m * e->velocity[i] + g[i];
			e->residual[i] += e->velocity[i];
		}
		return e->residual;
	}
	for (uint64_t i = 0; i < n; i++)
		e->residual[i] += g[i];
	return e->residual;
}

static size_t enc_half(const struct rps_codec_enc *e, const float *g, uint64_t n, uint16_t *out)
{
	int bf = e->kind == RPS_CODEC_BF16;
	const float *v = ef_add(e, g, n);

	if (bf)
		rps_codec_f32_to_bf16(v, out, n);
	else
		rps_codec_f32_to_f16(v, out, n);
	if (e->residual) {
		float back[BLOCK];

		for (uint64_t i = 0; i < n; i += BLOCK) {
			size_t m = (size_t)(n - i < BLOCK ? n - i : BLOCK);

			if (bf)
				rps_codec_bf16_to_f32(out + i, back, m);
			else
				rps_codec_f16_to_f32(out + i, back, m);
			for (size_t j = 0; j < m; j++)
				e->residual[i + j] -= back[j];
		}
	}
	return (size_t)n * 2;
}

/* Sparse output: k, idx[k], val[k]; out is 4-byte aligned. */
static size_t enc_sparse(const struct rps_codec_enc *e, const float *g, uint64_t n, void *out)
{
	uint64_t k = rps_codec_sparse_k(n, e->ratio);
	uint32_t *hdr = out;
	uint32_t *idx = hdr + 1;
	float *val = (float *)(idx + k);
	const float *v = ef_add(e, g, n);
	uint64_t got = 0;

	hdr[0] = (uint32_t)k;
	if (k == n) {
		for (uint64_t i = 0; i < n; i++) {
			idx[i] = (uint32_t)i;
			val[i] = v[i];
		}
		got = n;
	} else if (e->kind == RPS_CODEC_TOPK) {
		got = rps_codec_topk_select(v, n, k, (float *)e->scratch, idx);
		for (uint64_t j = 0; j < got; j++)
			val[j] = v[idx[j]];
	} else {
		/* selection sampling (Knuth's algorithm S): k of n, in order */
		for (uint64_t i = 0; i < n && got < k; i++) {
			uint64_t left = n - i, need = k - got;
			/* take i with probability need / left */
			if ((rng_next(e->rng) >> 11) % left < need) {
				idx[got] = (uint32_t)i;
				val[got] = v[i];
				got++;
			}
		}
	}
	if (e->residual)
		for (uint64_t j = 0; j < got; j++)
			e->residual[idx[j]] = 0.0f; /* sent: nothing of it is left */
	if (e->residual && e->velocity)
		for (uint64_t j = 0; j < got; j++)
			e->velocity[idx[j]] = 0.0f; /* factor masking */
	return 4 + (size_t)k * 8;
}

/* The mean |v[0..n)|: float partial sums of 8 lanes per block, a double total */
static float mean_abs(const float *v, uint64_t n)
{
	double l1 = 0;
	uint64_t i = 0;

	while (i < n) {
		uint64_t end = n - i < BLOCK ? n : i + BLOCK;
		float p[8] = {0};

		for (; i + 8 <= end; i += 8)
			for (int j = 0; j < 8; j++)
				p[j] += fabsf(v[i + j]);
		for (; i < end; i++)
			p[0] += fabsf(v[i]);
		l1 += ((double)p[0] + p[1] + p[2] + p[3]) + ((double)p[4] + p[5] + p[6] + p[7]);
	}
	return n ? (float)(l1 / (double)n) : 0.0f;
}

/* The sign bits of v[0..n) into bits[ceil(n / 8)] */
static void sign_bits(const float *v, uint64_t n, uint8_t *bits)
{
	size_t nb = (size_t)((n + 7) / 8);

	for (size_t b = 0; b < nb; b++) {
		uint64_t base = (uint64_t)b * 8;
		unsigned m = n - base < 8 ? (unsigned)(n - base) : 8;
		unsigned x = 0;

		for (unsigned j = 0; j < m; j++)
			x |= (unsigned)(v[base + j] >= 0.0f) << j;
		bits[b] = (uint8_t)x;
	}
}

static size_t enc_sign(const struct rps_codec_enc *e, const float *g, uint64_t n, uint8_t *out)
{
	const float *v = ef_add(e, g, n);
	size_t nb = (size_t)((n + 7) / 8);
	float scale = mean_abs(v, n);

	memcpy(out, &scale, 4);
	sign_bits(v, n, out + 4);
	if (e->residual)
		for (uint64_t i = 0; i < n; i++)
			e->residual[i] -= v[i] >= 0.0f ? scale : -scale;
	return 4 + nb;
}

/* signb: uint32 B, a scale per block of B elements, the sign bits */
static size_t enc_signb(const struct rps_codec_enc *e, const float *g, uint64_t n, uint8_t *out)
{
	const float *v = ef_add(e, g, n);
	uint32_t bl = e->block ? e->block : 1;
	uint64_t nblk = (n + bl - 1) / bl;
	uint8_t *scales = out + 4;

	memcpy(out, &bl, 4);
	sign_bits(v, n, scales + 4 * nblk); /* before the residual (v) changes */
	for (uint64_t b = 0; b < nblk; b++) {
		uint64_t lo = b * bl, m = n - lo < bl ? n - lo : bl;
		float scale = mean_abs(v + lo, m);

		memcpy(scales + b * 4, &scale, 4);
		if (e->residual)
			for (uint64_t i = lo; i < lo + m; i++)
				e->residual[i] -= v[i] >= 0.0f ? scale : -scale;
	}
	return 4 + 4 * (size_t)nblk + (size_t)((n + 7) / 8);
}

size_t rps_codec_encode(const struct rps_codec_enc *e, const float *g, uint64_t count, void *out)
{
	switch (e->kind) {
	case RPS_CODEC_FP16:
	case RPS_CODEC_BF16:
		return enc_half(e, g, count, out);
	case RPS_CODEC_TOPK:
	case RPS_CODEC_RANDK:
		return enc_sparse(e, g, count, out);
	case RPS_CODEC_SIGN:
		return enc_sign(e, g, count, out);
	case RPS_CODEC_SIGNB:
		return enc_signb(e, g, count, out);
	default:
		memcpy(out, g, (size_t)count * 4);
		return (size_t)count * 4;
	}
}

int rps_codec_check(unsigned id, const void *data, size_t len, uint64_t count, char *why,
		    size_t wlen)
{
	const uint8_t *b = data;
	uint32_t k, prev = 0;
	size_t want;

	switch (id) {
	case RPS_CODEC_NONE:
	case RPS_CODEC_FP16:
	case RPS_CODEC_BF16:
	case RPS_CODEC_SIGN:
		want = rps_codec_bytes((enum rps_codec)id, count, 0);
		if (len != want)
			goto size;
		return 0;
	case RPS_CODEC_TOPK:
	case RPS_CODEC_RANDK:
		if (len < 4) {
			want = 4;
			goto size;
		}
		memcpy(&k, b, 4);
		if (k > count) {
			snprintf(why, wlen, "%s push: %u elements listed of a range of %llu",
				 rps_codec_name(id), k, (unsigned long long)count);
			return -EPROTO;
		}
		want = 4 + (size_t)k * 8;
		if (len != want)
			goto size;
		for (uint32_t j = 0; j < k; j++) {
			uint32_t i;

			memcpy(&i, b + 4 + (size_t)j * 4, 4);
			if (i >= count || (j && i <= prev)) {
				snprintf(why, wlen,
					 "%s push: index %u (entry %u) %s (range of %llu elements; "
					 "indices must increase)",
					 rps_codec_name(id), i, j,
					 i >= count ? "out of range" : "not above the one before",
					 (unsigned long long)count);
				return -EPROTO;
			}
			prev = i;
		}
		return 0;
	case RPS_CODEC_SIGNB: {
		uint32_t bl;

		if (len < 4) {
			want = 4;
			goto size;
		}
		memcpy(&bl, b, 4);
		if (!bl) {
			snprintf(why, wlen, "signb push of %llu elements: block of 0 elements",
				 (unsigned long long)count);
			return -EPROTO;
		}
		want = rps_codec_bytes_blk(RPS_CODEC_SIGNB, count, 0, bl);
		if (len != want) {
			snprintf(why, wlen,
				 "signb push of %llu elements in blocks of %u: %zu data bytes, the "
				 "codec needs exactly %zu",
				 (unsigned long long)count, bl, len, want);
			return -EPROTO;
		}
		return 0;
	}
	default:
		snprintf(why, wlen, "push with unknown codec %u (this server knows 0..%d)", id,
			 RPS_CODEC_COUNT - 1);
		return -EPROTO;
	}
size:
	snprintf(why, wlen, "%s push of %llu elements: %zu data bytes, the codec needs exactly %zu",
		 rps_codec_name(id), (unsigned long long)count, len, want);
	return -EPROTO;
}

void rps_codec_decode(unsigned id, const void *data, size_t len, uint64_t count, float *out)
{
	const uint8_t *b = data;

	(void)len;
	switch (id) {
	case RPS_CODEC_FP16:
	case RPS_CODEC_BF16: {
		uint16_t tmp[BLOCK];

		for (uint64_t i = 0; i < count; i += BLOCK) {
			size_t m = (size_t)(count - i < BLOCK ? count - i : BLOCK);

			memcpy(tmp, b + i * 2, m * 2); /* the data may be unaligned */
			if (id == RPS_CODEC_BF16)
				rps_codec_bf16_to_f32(tmp, out + i, m);
			else
				rps_codec_f16_to_f32(tmp, out + i, m);
		}
		break;
	}
	case RPS_CODEC_TOPK:
	case RPS_CODEC_RANDK: {
		uint32_t k;

		memset(out, 0, (size_t)count * 4);
		memcpy(&k, b, 4);
		for (uint32_t j = 0; j < k; j++) {
			uint32_t i;
			float v;

			memcpy(&i, b + 4 + (size_t)j * 4, 4);
			memcpy(&v, b + 4 + (size_t)k * 4 + (size_t)j * 4, 4);
			out[i] = v;
		}
		break;
	}
	case RPS_CODEC_SIGN: {
		float s;

		uint32_t sb;

		memcpy(&s, b, 4);
		memcpy(&sb, &s, 4);
		/* +s or -s: the sign bit flipped where the bit is clear */
		for (uint64_t i = 0; i < count; i += 8) {
			uint32_t nbits = ~(uint32_t)b[4 + i / 8];
			unsigned m = count - i < 8 ? (unsigned)(count - i) : 8;

			for (unsigned j = 0; j < m; j++) {
				uint32_t x = sb ^ (((nbits >> j) & 1u) << 31);

				memcpy(out + i + j, &x, 4);
			}
		}
		break;
	}
	case RPS_CODEC_SIGNB: {
		uint32_t bl;
		const uint8_t *bits;

		memcpy(&bl, b, 4);
		bits = b + 4 + 4 * (size_t)((count + bl - 1) / bl);
		for (uint64_t lo = 0; lo < count; lo += bl) {
			uint64_t hi = count - lo < bl ? count : lo + bl;
			float s;
			uint32_t sb;

			memcpy(&s, b + 4 + (lo / bl) * 4, 4);
			memcpy(&sb, &s, 4);
			/* +s or -s: the sign bit flipped where the bit is clear */
			for (uint64_t i = lo; i < hi; i++) {
				uint32_t x = sb ^ ((~(uint32_t)bits[i / 8] >> (i % 8) & 1u) << 31);

				memcpy(out + i, &x, 4);
			}
		}
		break;
	}
	default:
		memcpy(out, data, (size_t)count * 4);
		break;
	}
}
