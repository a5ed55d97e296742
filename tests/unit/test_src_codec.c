/* Gradient codecs (src/codec.h): exact round trips where they must be, round
 * to nearest even, the portable and the F16C/AVX2 paths agreeing, top-k of a
 * known vector, error feedback conserving the sum of the gradients, and the
 * receiver's exact checks. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "src/codec.h"
#include "src/proto.h"

static float fbits(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static uint32_t bitsf(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

/* Every binary16 value that is not a NaN widens and narrows back to itself,
 * on both paths. */
static void test_fp16_representable_exact(void **state)
{
	static uint16_t h[65536], back[65536];
	static float f[65536];

	(void)state;
	for (uint32_t i = 0; i < 65536; i++)
		h[i] = (uint16_t)i;
	rps_codec_f16_to_f32(h, f, 65536);
	rps_codec_f32_to_f16(f, back, 65536);
	for (uint32_t i = 0; i < 65536; i++) {
		int nan = (i & 0x7c00) == 0x7c00 && (i & 0x3ff);

		assert_int_equal(bitsf(f[i]), bitsf(rps_codec_f16_widen((uint16_t)i)));
		if (nan) {
			assert_true(isnan(f[i]));
			continue;
		}
		assert_int_equal(back[i], i);
		assert_int_equal(rps_codec_f16_one(f[i]), i);
	}
}

static void test_fp16_round_nearest_even(void **state)
{
	static const struct {
		float in;
		uint16_t out;
	} c[] = {
	    {1.0f, 0x3c00},
	    {1.0f + 0x1p-11f, 0x3c00},	       /* tie: down to even */
	    {1.0f + 3 * 0x1p-11f, 0x3c02},     /* tie: up to even */
	    {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01}, /* above the tie */
	    {65504.0f, 0x7bff},
	    {65519.0f, 0x7bff},
	    {65520.0f, 0x7c00}, /* rounds to infinity */
	    {-65520.0f, 0xfc00},
	    {0x1p-24f, 0x0001}, /* smallest subnormal */
	    {0x1p-25f, 0x0000}, /* tie to even: 0 */
	    {3 * 0x1p-25f, 0x0002},
	    {-0.0f, 0x8000},
	    {INFINITY, 0x7c00},
	};
	uint16_t simd[sizeof(c) / sizeof(c[0])];
	float in[sizeof(c) / sizeof(c[0])];
	size_t n = sizeof(c) / sizeof(c[0]);

	(void)state;
	for (size_t i = 0; i < n; i++) {
		in[i] = c[i].in;
		assert_int_equal(rps_codec_f16_one(c[i].in), c[i].out);
	}
	rps_codec_f32_to_f16(in, simd, n);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(simd[i], c[i].out);
}

static void test_bf16_exact_and_rne(void **state)
{
	static uint16_t back[65536];
	static float f[65536];
	float ties[4] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f,
			 fbits(0x7f7fffff)};
	uint16_t want[4] = {0x3f80, 0x3f82, 0x3f81, 0x7f80}, got[4];

	(void)state;
	for (uint32_t i = 0; i < 65536; i++)
		f[i] = fbits(i << 16);
	rps_codec_f32_to_bf16(f, back, 65536);
	for (uint32_t i = 0; i < 65536; i++) {
		if (isnan(f[i])) {
			assert_true((back[i] & 0x7f80) == 0x7f80 && (back[i] & 0x7f));
			continue;
		}
		assert_int_equal(back[i], i);
		assert_int_equal(rps_codec_bf16_one(f[i]), i);
	}
	rps_codec_bf16_to_f32(back, f, 65536);
	for (uint32_t i = 0; i < 65536; i++)
		if (!isnan(f[i]))
			assert_int_equal(bitsf(f[i]), i << 16);
	rps_codec_f32_to_bf16(ties, got, 4);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(got[i], want[i]);
		assert_int_equal(rps_codec_bf16_one(ties[i]), want[i]);
	}
}

/* The accelerated paths give exactly what the portable code gives. */
static void test_simd_matches_portable(void **state)
{
	enum { N = 100003 };
	float *in = malloc(N * 4);
	uint16_t *a = malloc(N * 2), *b = malloc(N * 2);
	uint64_t s = 88172645463325252ull;

	(void)state;
	assert_non_null(in);
	for (int i = 0; i < N; i++) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		in[i] = fbits((uint32_t)s);
		if (isnan(in[i]))
			in[i] = 1.5f;
	}
	rps_codec_f32_to_f16(in, a, N);
	for (int i = 0; i < N; i++)
		b[i] = rps_codec_f16_one(in[i]);
	assert_memory_equal(a, b, (size_t)N * 2);
	rps_codec_f32_to_bf16(in, a, N);
	for (int i = 0; i < N; i++)
		b[i] = rps_codec_bf16_one(in[i]);
	assert_memory_equal(a, b, (size_t)N * 2);
	print_message("codec: accelerated paths %s\n", rps_codec_simd() ? "in use" : "not available");
	free(in);
	free(a);
	free(b);
}

static size_t enc(enum rps_codec k, float ratio, float *res, const float *g, uint64_t n, void *out)
{
	static uint64_t rng = 7;
	float *scratch = malloc((size_t)(n ? n : 1) * 4);
	struct rps_codec_enc e = {
	    .kind = k, .ratio = ratio, .residual = res, .scratch = scratch, .rng = &rng};
	size_t len = rps_codec_encode(&e, g, n, out);

	free(scratch);
	assert_int_equal(len, rps_codec_bytes(k, n, ratio));
	return len;
}

static void test_topk_known(void **state)
{
	const float g[8] = {0.1f, -5.0f, 3.0f, 0.0f, -0.2f, 4.0f, 1.0f, -3.0f};
	const float want[8] = {0, -5.0f, 3.0f, 0, 0, 4.0f, 0, 0};
	uint8_t buf[4 + 8 * 8]; /* ratio 1: k = 8 indices and values */
	float out[8], res[8] = {0};
	uint32_t k, idx[3];
	char why[128];
	size_t len;

	(void)state;
	len = enc(RPS_CODEC_TOPK, 0.375f, NULL, g, 8, buf);
	assert_int_equal(len, 4 + 3 * 8);
	memcpy(&k, buf, 4);
	memcpy(idx, buf + 4, 12);
	assert_int_equal(k, 3);
	/* |-3| ties |3|: the lower index goes */
	assert_int_equal(idx[0], 1);
	assert_int_equal(idx[1], 2);
	assert_int_equal(idx[2], 5);
	assert_int_equal(rps_codec_check(RPS_CODEC_TOPK, buf, len, 8, why, sizeof(why)), 0);
	rps_codec_decode(RPS_CODEC_TOPK, buf, len, 8, out);
	assert_memory_equal(out, want, sizeof(want));
	/* with error feedback the rest is kept: sent + residual == g */
	len = enc(RPS_CODEC_TOPK, 0.375f, res, g, 8, buf);
	rps_codec_decode(RPS_CODEC_TOPK, buf, len, 8, out);
	for (int i = 0; i < 8; i++)
		assert_true(out[i] + res[i] == g[i]);
	/* ratio 1: everything, exactly */
	len = enc(RPS_CODEC_TOPK, 1.0f, NULL, g, 8, buf);
	rps_codec_decode(RPS_CODEC_TOPK, buf, len, 8, out);
	assert_memory_equal(out, g, sizeof(g));
}

struct mi {
	float m;
	uint32_t i;
};

static int mi_cmp(const void *a, const void *b)
{
	const struct mi *x = a, *y = b;

	if (x->m != y->m)
		return x->m > y->m ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Top-k on large frames (the sampled threshold's fast path, and many ties)
 * picks exactly what sorting picks: largest magnitudes, lower index first. */
static void test_topk_matches_sort(void **state)
{
	enum { N = 100000 };
	static float g[N];
	static struct mi ref[N];
	static uint32_t want[N];
	static uint8_t buf[N * 8 + 8];
	const float ratios[3] = {0.01f, 0.001f, 0.05f};
	uint64_t s = 99;

	(void)state;
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < N; i++) {
			s ^= s << 13, s ^= s >> 7, s ^= s << 17;
			/* pass 1: 16 distinct magnitudes, ties everywhere */
			g[i] = pass ? (float)((int)(s % 33) - 16) : (float)((double)(s >> 11) / 9e15 - 0.5);
		}
		for (int r = 0; r < 3; r++) {
			uint64_t k = rps_codec_sparse_k(N, ratios[r]);
			uint32_t got_k;

			for (int i = 0; i < N; i++) {
				ref[i].m = fabsf(g[i]);
				ref[i].i = (uint32_t)i;
			}
			qsort(ref, N, sizeof(ref[0]), mi_cmp);
			for (uint64_t j = 0; j < k; j++)
				want[j] = ref[j].i;
			qsort(want, k, sizeof(want[0]), u32_cmp);
			enc(RPS_CODEC_TOPK, ratios[r], NULL, g, N, buf);
			memcpy(&got_k, buf, 4);
			assert_int_equal(got_k, k);
			assert_memory_equal(buf + 4, want, k * 4);
		}
	}
}

static void test_sign_known(void **state)
{
	const float g[4] = {1.0f, -2.0f, 3.0f, -4.0f};
	const float want[4] = {2.5f, -2.5f, 2.5f, -2.5f};
	uint8_t buf[8];
	float out[4];

	(void)state;
	assert_int_equal(enc(RPS_CODEC_SIGN, 0, NULL, g, 4, buf), 5);
	assert_int_equal(buf[4], 0x05);
	rps_codec_decode(RPS_CODEC_SIGN, buf, 5, 4, out);
	assert_memory_equal(out, want, sizeof(want));
}

/* Error feedback: over T steps, what was sent plus what is left equals what
 * was given (up to float rounding of the additions). */
static void test_error_feedback_conserves_sum(void **state)
{
	enum { N = 1000, T = 50 };
	static const struct {
		enum rps_codec k;
		float ratio;
	} c[] = {{RPS_CODEC_FP16, 0},	 {RPS_CODEC_BF16, 0}, {RPS_CODEC_TOPK, 0.01f},
		 {RPS_CODEC_RANDK, 0.05f}, {RPS_CODEC_SIGN, 0}};
	uint64_t s = 12345;

	(void)state;
	for (size_t ci = 0; ci < sizeof(c) / sizeof(c[0]); ci++) {
		static float g[N], res[N], out[N];
		static double given[N], sent[N];
		static uint8_t buf[N * 4 + 16];

		memset(res, 0, sizeof(res));
		memset(given, 0, sizeof(given));
		memset(sent, 0, sizeof(sent));
		for (int t = 0; t < T; t++) {
			size_t len;

			for (int i = 0; i < N; i++) {
				s = s * 6364136223846793005ull + 1442695040888963407ull;
				g[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5) *
				       (i % 7 ? 0.01f : 1.0f);
				given[i] += g[i];
			}
			len = enc(c[ci].k, c[ci].ratio, res, g, N, buf);
			rps_codec_decode(c[ci].k, buf, len, N, out);
			for (int i = 0; i < N; i++)
				sent[i] += out[i];
		}
		for (int i = 0; i < N; i++) {
			double err = fabs(sent[i] + res[i] - given[i]);

			if (err > 1e-4 * (1 + fabs(given[i])))
				fail_msg("%s: element %d: sent %g + residual %g != given %g",
					 rps_codec_name(c[ci].k), i, sent[i], (double)res[i],
					 given[i]);
		}
	}
}

static void test_randk_draws_k_distinct(void **state)
{
	enum { N = 997 };
	static float g[N];
	static uint8_t buf[N * 8 + 8];
	char why[128];
	size_t len;
	uint32_t k;

	(void)state;
	for (int i = 0; i < N; i++)
		g[i] = (float)i;
	len = enc(RPS_CODEC_RANDK, 0.1f, NULL, g, N, buf);
	memcpy(&k, buf, 4);
	assert_int_equal(k, 100);
	/* the check requires increasing indices: distinct, in range */
	assert_int_equal(rps_codec_check(RPS_CODEC_RANDK, buf, len, N, why, sizeof(why)), 0);
	for (uint32_t j = 0; j < k; j++) {
		uint32_t i;
		float v;

		memcpy(&i, buf + 4 + j * 4, 4);
		memcpy(&v, buf + 4 + k * 4 + j * 4, 4);
		assert_true(v == (float)i);
	}
}

static void test_check_refuses(void **state)
{
	uint8_t buf[256] = {0};
	uint32_t v;
	char why[200];

	(void)state;
	/* exact sizes */
	assert_int_equal(rps_codec_check(RPS_CODEC_FP16, buf, 20, 10, why, sizeof(why)), 0);
	assert_int_equal(rps_codec_check(RPS_CODEC_FP16, buf, 22, 10, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "fp16"));
	assert_non_null(strstr(why, "exactly 20"));
	assert_int_equal(rps_codec_check(RPS_CODEC_BF16, buf, 18, 10, why, sizeof(why)), -EPROTO);
	assert_int_equal(rps_codec_check(RPS_CODEC_SIGN, buf, 4 + 2, 10, why, sizeof(why)), 0);
	assert_int_equal(rps_codec_check(RPS_CODEC_SIGN, buf, 4 + 3, 10, why, sizeof(why)),
			 -EPROTO);
	assert_int_equal(rps_codec_check(RPS_CODEC_TOPK, buf, 3, 10, why, sizeof(why)), -EPROTO);
	/* k = 2, indices 3 and 5 */
	v = 2;
	memcpy(buf, &v, 4);
	v = 3;
	memcpy(buf + 4, &v, 4);
	v = 5;
	memcpy(buf + 8, &v, 4);
	assert_int_equal(rps_codec_check(RPS_CODEC_TOPK, buf, 4 + 16, 10, why, sizeof(why)), 0);
	assert_int_equal(rps_codec_check(RPS_CODEC_TOPK, buf, 4 + 12, 10, why, sizeof(why)),
			 -EPROTO);
	assert_int_equal(rps_codec_check(RPS_CODEC_TOPK, buf, 4 + 16, 5, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "out of range"));
	v = 3; /* a repeated index */
	memcpy(buf + 8, &v, 4);
	assert_int_equal(rps_codec_check(RPS_CODEC_RANDK, buf, 4 + 16, 10, why, sizeof(why)),
			 -EPROTO);
	assert_non_null(strstr(why, "increase"));
	v = 11; /* k > count */
	memcpy(buf, &v, 4);
	assert_int_equal(rps_codec_check(RPS_CODEC_TOPK, buf, 4 + 88, 10, why, sizeof(why)),
			 -EPROTO);
	assert_int_equal(rps_codec_check(9, buf, 40, 10, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "unknown codec"));
}

static void test_sizes(void **state)
{
	(void)state;
	assert_int_equal(rps_codec_sparse_k(0, 0.01f), 0);
	assert_int_equal(rps_codec_sparse_k(10, 0.01f), 1);
	assert_int_equal(rps_codec_sparse_k(1000, 0.01f), 10);
	assert_int_equal(rps_codec_sparse_k(1001, 0.01f), 11);
	assert_int_equal(rps_codec_sparse_k(10, 1.0f), 10);
	assert_int_equal(rps_codec_bytes(RPS_CODEC_NONE, 10, 0), 40);
	assert_int_equal(rps_codec_bytes(RPS_CODEC_FP16, 10, 0), 20);
	assert_int_equal(rps_codec_bytes(RPS_CODEC_SIGN, 9, 0), 6);
	assert_int_equal(rps_codec_bytes(RPS_CODEC_TOPK, 1000, 0.01f), 84);
}

static void test_parse_and_validate(void **state)
{
	struct rps_compress_opts o;

	(void)state;
	assert_int_equal(rps_compress_parse("topk:0.01", &o), 0);
	assert_int_equal(o.kind, RPS_CODEC_TOPK);
	assert_true(fabsf(o.ratio - 0.01f) < 1e-9f);
	assert_int_equal(o.error_feedback, 1);
	assert_int_equal(rps_compress_parse("fp16", &o), 0);
	assert_int_equal(o.kind, RPS_CODEC_FP16);
	assert_int_equal(o.error_feedback, 0);
	assert_int_equal(rps_compress_parse("sign", &o), 0);
	assert_int_equal(o.error_feedback, 1);
	assert_int_equal(rps_compress_parse("none", &o), 0);
	assert_int_equal(o.kind, RPS_CODEC_NONE);
	assert_int_equal(rps_compress_parse("topk", &o), -EINVAL);
	assert_int_equal(rps_compress_parse("topk:0", &o), -EINVAL);
	assert_int_equal(rps_compress_parse("randk:1.5", &o), -EINVAL);
	assert_int_equal(rps_compress_parse("randk:0.1x", &o), -EINVAL);
	assert_int_equal(rps_compress_parse("fp16:0.5", &o), -EINVAL);
	assert_int_equal(rps_compress_parse("zip", &o), -EINVAL);
	rps_compress_opts_init(&o);
	assert_int_equal(rps_compress_opts_validate(&o), 0);
	o.kind = RPS_CODEC_TOPK;
	o.ratio = 0;
	assert_int_equal(rps_compress_opts_validate(&o), -EINVAL);
	o.ratio = 0.5f;
	o.error_feedback = 2;
	assert_int_equal(rps_compress_opts_validate(&o), -EINVAL);
	o.error_feedback = 0;
	o.kind = (enum rps_codec)42;
	assert_int_equal(rps_compress_opts_validate(&o), -EINVAL);
	assert_int_equal(rps_compress_opts_validate(NULL), -EINVAL);
}

/* The frame check lets a compressed PUSH's length differ from 4 * count (the
 * receiver checks it exactly with the data), never an ASSIGN's. */
static void test_proto_push_flags(void **state)
{
	struct rps_frame_hdr h;
	struct rps_push p = {.count = 10};
	const char *why = NULL;

	(void)state;
	rps_proto_hdr_init(&h, RPS_OP_PUSH, sizeof(p) + 20, 1);
	assert_int_equal(rps_proto_payload_check(&h, &p, &why), -EPROTO);
	h.flags = RPS_CODEC_FP16;
	assert_int_equal(rps_proto_payload_check(&h, &p, &why), 0);
	h.flags = 0x000e;
	assert_int_equal(rps_proto_payload_check(&h, &p, &why), -EPROTO);
	rps_proto_hdr_init(&h, RPS_OP_ASSIGN, sizeof(p) + 20, 1);
	h.flags = RPS_CODEC_FP16;
	assert_int_equal(rps_proto_payload_check(&h, &p, &why), -EPROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fp16_representable_exact),
	    cmocka_unit_test(test_fp16_round_nearest_even),
	    cmocka_unit_test(test_bf16_exact_and_rne),
	    cmocka_unit_test(test_simd_matches_portable),
	    cmocka_unit_test(test_topk_known),
	    cmocka_unit_test(test_topk_matches_sort),
	    cmocka_unit_test(test_sign_known),
	    cmocka_unit_test(test_error_feedback_conserves_sum),
	    cmocka_unit_test(test_randk_draws_k_distinct),
	    cmocka_unit_test(test_check_refuses),
	    cmocka_unit_test(test_sizes),
	    cmocka_unit_test(test_parse_and_validate),
	    cmocka_unit_test(test_proto_push_flags),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
