/* float32 <-> binary16 / bfloat16, round to nearest even: portable code, and
 * F16C / AVX2 paths chosen at run time (the build has no -march flags, so
 * they are compiled per function with target attributes). */
#include <stdatomic.h>
#include <string.h>

#include "src/codec.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define RPS_CODEC_X86 1
#endif

uint16_t rps_codec_f16_one(float f)
{
	uint32_t x, ax, sign;

	memcpy(&x, &f, 4);
	sign = (x >> 16) & 0x8000u;
	ax = x & 0x7fffffffu;
	if (ax >= 0x47800000u) { /* >= 65536, inf or NaN */
		if (ax > 0x7f800000u) /* NaN: quiet, payload's top bits (as F16C) */
			return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
		return (uint16_t)(sign | 0x7c00u);
	}
	if (ax < 0x38800000u) { /* below 2^-14: a subnormal half or 0 */
		float a;
		uint32_t r;

		memcpy(&a, &ax, 4);
		a += 0.5f; /* the FPU rounds (to nearest even) at 2^-24 */
		memcpy(&r, &a, 4);
		return (uint16_t)(sign | (r - 0x3f000000u));
	}
	/* normal: rebias, round to nearest even at bit 13; a carry may make it inf */
	ax += 0xc8000fffu + ((ax >> 13) & 1u); /* (15 - 127) << 23, + 0xfff */
	return (uint16_t)(sign | (ax >> 13));
}

float rps_codec_f16_widen(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
	float f;

	if (e == 0) {
		f = (float)m * 0x1p-24f; /* exact */
		memcpy(&x, &f, 4);
		x |= sign;
	} else if (e == 31) { /* inf; a NaN comes out quiet (as F16C makes it) */
		x = sign | 0x7f800000u | (m ? 0x400000u : 0) | (m << 13);
	} else {
		x = sign | ((e + 112u) << 23) | (m << 13);
	}
	memcpy(&f, &x, 4);
	return f;
}

uint16_t rps_codec_bf16_one(float f)
{
	uint32_t x;

	memcpy(&x, &f, 4);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40u); /* NaN stays a (quiet) NaN */
	x += 0x7fffu + ((x >> 16) & 1u);
	return (uint16_t)(x >> 16);
}

static inline float bf16_widen(uint16_t b)
{
	uint32_t x = (uint32_t)b << 16;
	float f;

	memcpy(&f, &x, 4);
	return f;
}

#ifdef RPS_CODEC_X86
__attribute__((target("avx,f16c"))) static void f2h_f16c(const float *in, uint16_t *out,
							   size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);

		_mm_storeu_si128((__m128i *)(void *)(out + i), h);
	}
	for (; i < n; i++)
		out[i] = rps_codec_f16_one(in[i]);
}

__attribute__((target("avx,f16c"))) static void h2f_f16c(const uint16_t *in, float *out,
							   size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(out + i,
				 _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(in + i))));
	for (; i < n; i++)
		out[i] = rps_codec_f16_widen(in[i]);
}

__attribute__((target("avx2"))) static inline __m256i bf16_round8(const float *in)
{
	__m256 v = _mm256_loadu_ps(in);
	__m256i x = _mm256_castps_si256(v);
	__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
	__m256i r = _mm256_srli_epi32(
	    _mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
	__m256i q = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
	__m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));

	return _mm256_blendv_epi8(r, q, nan);
}

__attribute__((target("avx2"))) static void f2bf_avx2(const float *in, uint16_t *out, size_t n)
{
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m256i p = _mm256_packus_epi32(bf16_round8(in + i), bf16_round8(in + i + 8));

		_mm256_storeu_si256((__m256i *)(void *)(out + i), _mm256_permute4x64_epi64(p, 0xd8));
	}
	for (; i < n; i++)
		out[i] = rps_codec_bf16_one(in[i]);
}

__attribute__((target("avx2"))) static void bf2f_avx2(const uint16_t *in, float *out, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256i x = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(in + i)));

		_mm256_storeu_si256((__m256i *)(void *)(out + i), _mm256_slli_epi32(x, 16));
	}
	for (; i < n; i++)
		out[i] = bf16_widen(in[i]);
}
#endif

static _Atomic int simd_state = -1; /* -1: not probed yet */

int rps_codec_simd(void)
{
	int s = atomic_load_explicit(&simd_state, memory_order_relaxed);

	if (s < 0) {
#ifdef RPS_CODEC_X86
		unsigned int a, b, c, d;

		/* F16C from CPUID leaf 1 (ecx bit 29): clang's
		 * __builtin_cpu_supports does not know "f16c" */
		__builtin_cpu_init();
		s = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) &&
		    __builtin_cpu_supports("avx2");
#else
		s = 0;
#endif
		atomic_store_explicit(&simd_state, s, memory_order_relaxed);
	}
	return s;
}

void rps_codec_f32_to_f16(const float *in, uint16_t *out, size_t n)
{
#ifdef RPS_CODEC_X86
	if (rps_codec_simd()) {
		f2h_f16c(in, out, n);
		return;
	}
#endif
	for (size_t i = 0; i < n; i++)
		out[i] = rps_codec_f16_one(in[i]);
}

void rps_codec_f16_to_f32(const uint16_t *in, float *out, size_t n)
{
#ifdef RPS_CODEC_X86
	if (rps_codec_simd()) {
		h2f_f16c(in, out, n);
		return;
	}
#endif
	for (size_t i = 0; i < n; i++)
		out[i] = rps_codec_f16_widen(in[i]);
}

void rps_codec_f32_to_bf16(const float *in, uint16_t *out, size_t n)
{
#ifdef RPS_CODEC_X86
	if (rps_codec_simd()) {
		f2bf_avx2(in, out, n);
		return;
	}
#endif
	for (size_t i = 0; i < n; i++)
		out[i] = rps_codec_bf16_one(in[i]);
}

void rps_codec_bf16_to_f32(const uint16_t *in, float *out, size_t n)
{
#ifdef RPS_CODEC_X86
	if (rps_codec_simd()) {
		bf2f_avx2(in, out, n);
		return;
	}
#endif
	for (size_t i = 0; i < n; i++)
		out[i] = bf16_widen(in[i]);
}
