/* The codec options for accuracy (src/codec.h, docs/compression.md): sign
 * with a scale per block (signb: round trip of a known vector, its exact
 * receiver check, error feedback conserving the sum, less error than one
 * scale), top-k's sparsity warm-up (the ratio of each push) and momentum
 * correction (what is sent plus the residual is the sum of the velocities;
 * sent elements' velocities cleared), and the options' text form. */
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

static size_t enc_b(uint32_t block, float *res, const float *g, uint64_t n, void *out)
{
	struct rps_codec_enc e = {.kind = RPS_CODEC_SIGNB, .residual = res, .block = block};
	size_t len = rps_codec_encode(&e, g, n, out);

	assert_int_equal(len, rps_codec_bytes_blk(RPS_CODEC_SIGNB, n, 0, block));
	return len;
}

/* 10 elements in blocks of 8: two scales (2.5 and 1.0, exact means), the
 * bits LSB first, decoded to +-scale of the element's block. */
static void test_signb_known(void **state)
{
	const float g[10] = {1, -2, 3, -4, 1, -2, 3, -4, 0.5f, -1.5f};
	const float want[10] = {2.5f, -2.5f, 2.5f, -2.5f, 2.5f, -2.5f, 2.5f, -2.5f, 1.0f, -1.0f};
	uint8_t buf[32];
	float out[10], s[2];
	uint32_t bl;
	char why[200];
	size_t len;

	(void)state;
	len = enc_b(8, NULL, g, 10, buf);
	assert_int_equal(len, 4 + 2 * 4 + 2); /* B, two scales, two bytes of bits */
	memcpy(&bl, buf, 4);
	assert_int_equal(bl, 8);
	memcpy(s, buf + 4, 8);
	assert_true(s[0] == 2.5f && s[1] == 1.0f);
	assert_int_equal(buf[12], 0x55);
	assert_int_equal(buf[13], 0x01);
	assert_int_equal(rps_codec_check(RPS_CODEC_SIGNB, buf, len, 10, why, sizeof(why)), 0);
	rps_codec_decode(RPS_CODEC_SIGNB, buf, len, 10, out);
	assert_memory_equal(out, want, sizeof(want));
	/* one block of all 10 (B above the count) */
	len = enc_b(16, NULL, g, 10, buf);
	assert_int_equal(len, 4 + 4 + 2);
	rps_codec_decode(RPS_CODEC_SIGNB, buf, len, 10, out);
	for (int i = 0; i < 10; i++) /* the mean of all: 22 / 10 */
		assert_true(fabsf(out[i] - (g[i] >= 0 ? 2.2f : -2.2f)) < 1e-6f);
}

/* The receiver's check: exact size for the block the frame names, block 0
 * and a frame too short for the block refused with the sizes named. */
static void test_signb_check_refuses(void **state)
{
	uint8_t buf[64] = {0};
	uint32_t bl = 8;
	char why[200];

	(void)state;
	memcpy(buf, &bl, 4);
	/* 10 elements, B 8: 4 + 8 + 2 */
	assert_int_equal(rps_codec_check(RPS_CODEC_SIGNB, buf, 14, 10, why, sizeof(why)), 0);
	assert_int_equal(rps_codec_check(RPS_CODEC_SIGNB, buf, 13, 10, why, sizeof(why)),
			 -EPROTO);
	assert_non_null(strstr(why, "signb"));
	assert_non_null(strstr(why, "exactly 14"));
	assert_int_equal(rps_codec_check(RPS_CODEC_SIGNB, buf, 15, 10, why, sizeof(why)),
			 -EPROTO);
	/* the plain sign size (4 + 2) is not a signb frame */
	assert_int_equal(rps_codec_check(RPS_CODEC_SIGNB, buf, 6, 10, why, sizeof(why)), -EPROTO);
	assert_int_equal(rps_codec_check(RPS_CODEC_SIGNB, buf, 3, 10, why, sizeof(why)), -EPROTO);
	bl = 0;
	memcpy(buf, &bl, 4);
	assert_int_equal(rps_codec_check(RPS_CODEC_SIGNB, buf, 14, 10, why, sizeof(why)),
			 -EPROTO);
	assert_non_null(strstr(why, "block of 0"));
	bl = 1; /* any block >= 1 is decodable: 4 + 4 * 10 + 2 */
	memcpy(buf, &bl, 4);
	assert_int_equal(rps_codec_check(RPS_CODEC_SIGNB, buf, 46, 10, why, sizeof(why)), 0);
	assert_int_equal(rps_codec_check(7, buf, 46, 10, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "unknown codec"));
}

static uint64_t lcg = 12345;

static float rnd(void)
{
	lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((double)(lcg >> 11) / 9007199254740992.0 - 0.5);
}

/* A gradient whose magnitude differs by region (as layers' do): 1000
 * elements, the first 300 small. */
static float grad_at(int i)
{
	return rnd() * (i < 300 ? 0.001f : i % 7 ? 0.05f : 1.0f);
}

/* Error feedback over 50 steps: sent + residual == given (a block that does
 * not divide the count: 1000 = 3 * 256 + 232). */
static void test_signb_ef_conserves_sum(void **state)
{
	enum { N = 1000, T = 50 };
	static float g[N], res[N], out[N];
	static double given[N], sent[N];
	static uint8_t buf[4 + 4 * N + N / 8 + 8];

	(void)state;
	for (int t = 0; t < T; t++) {
		size_t len;

		for (int i = 0; i < N; i++) {
			g[i] = grad_at(i);
			given[i] += g[i];
		}
		len = enc_b(256, res, g, N, buf);
		rps_codec_decode(RPS_CODEC_SIGNB, buf, len, N, out);
		for (int i = 0; i < N; i++)
			sent[i] += out[i];
	}
	for (int i = 0; i < N; i++)
		if (fabs(sent[i] + res[i] - given[i]) > 1e-4 * (1 + fabs(given[i])))
			fail_msg("signb element %d: sent %g + residual %g != given %g", i, sent[i],
				 (double)res[i], given[i]);
}

/* Per-block scales: the compression error ||g - decode(encode(g))|| of one
 * step is well below one scale's on a gradient whose regions differ (half
 * of it 100x smaller than the rest, as the weights of an image's border
 * pixels are next to the centre's). */
static void test_signb_less_error(void **state)
{
	enum { N = 1000 };
	static float g[N], out[N];
	static uint8_t buf[4 + 4 * N + N / 8 + 8];
	double e1 = 0, e64 = 0;
	size_t len;

	(void)state;
	for (int i = 0; i < N; i++)
		g[i] = rnd() * (i < N / 2 ? 0.001f : 0.1f);
	{
		struct rps_codec_enc e = {.kind = RPS_CODEC_SIGN};

		len = rps_codec_encode(&e, g, N, buf);
		rps_codec_decode(RPS_CODEC_SIGN, buf, len, N, out);
	}
	for (int i = 0; i < N; i++)
		e1 += ((double)g[i] - out[i]) * ((double)g[i] - out[i]);
	len = enc_b(64, NULL, g, N, buf);
	rps_codec_decode(RPS_CODEC_SIGNB, buf, len, N, out);
	for (int i = 0; i < N; i++)
		e64 += ((double)g[i] - out[i]) * ((double)g[i] - out[i]);
	print_message("sign error %.4g, signb:64 error %.4g\n", sqrt(e1), sqrt(e64));
	assert_true(e64 < 0.75 * e1);
}

/* Warm-up: the ratio falls geometrically from warmup_ratio to ratio over
 * warmup_steps pushes, then stays. */
static void test_warmup_ratio(void **state)
{
	struct rps_compress_opts o;
	float prev = 2;

	(void)state;
	rps_compress_opts_kind(&o, RPS_CODEC_TOPK);
	assert_true(rps_codec_step_ratio(&o, 0) == o.ratio); /* no warm-up */
	o.warmup_steps = 100;
	o.warmup_ratio = 0.25f;
	assert_true(fabsf(rps_codec_step_ratio(&o, 0) - 0.25f) < 1e-7f);
	assert_true(fabsf(rps_codec_step_ratio(&o, 50) - 0.05f) < 1e-6f); /* sqrt(0.25 * 0.01) */
	for (uint64_t t = 0; t < 100; t++) {
		float r = rps_codec_step_ratio(&o, t);

		assert_true(r < prev && r > o.ratio);
		prev = r;
	}
	assert_true(rps_codec_step_ratio(&o, 100) == o.ratio);
	assert_true(rps_codec_step_ratio(&o, 1000000) == o.ratio);
}

/* Momentum correction on top-k: u = m u + g accumulates into the residual,
 * the k largest of the residual are sent, and sent elements' residual and
 * velocity are cleared (factor masking). Checked against a reference kept
 * here, step by step, and the sum: sent + residual == the sum of the
 * velocities accumulated. */
static void test_momentum_correction(void **state)
{
	enum { N = 1000, T = 40 };
	static float g[N], res[N], vel[N], out[N], scratch[N];
	static float rres[N], rvel[N];
	static double acc[N], sent[N];
	static uint8_t buf[4 + 8 * N];
	const float m = 0.9f;
	uint64_t rng = 1;

	(void)state;
	for (int t = 0; t < T; t++) {
		struct rps_codec_enc e = {.kind = RPS_CODEC_TOPK,
					  .ratio = 0.02f,
					  .residual = res,
					  .scratch = scratch,
					  .rng = &rng,
					  .momentum = m,
					  .velocity = vel};
		size_t len;
		uint32_t k;

		for (int i = 0; i < N; i++) {
			g[i] = grad_at(i);
			rvel[i] = m * rvel[i] + g[i];
			rres[i] += rvel[i];
			acc[i] += rvel[i];
		}
		len = rps_codec_encode(&e, g, N, buf);
		assert_int_equal(len, rps_codec_bytes(RPS_CODEC_TOPK, N, 0.02f));
		memcpy(&k, buf, 4);
		assert_int_equal(k, 20);
		rps_codec_decode(RPS_CODEC_TOPK, buf, len, N, out);
		for (uint32_t j = 0; j < k; j++) {
			uint32_t i;
			float v;

			memcpy(&i, buf + 4 + j * 4, 4);
			memcpy(&v, buf + 4 + k * 4 + j * 4, 4);
			assert_true(v == rres[i]); /* the residual with the velocity added */
			rres[i] = 0;
			rvel[i] = 0;
		}
		for (int i = 0; i < N; i++) {
			sent[i] += out[i];
			if (res[i] != rres[i] || vel[i] != rvel[i])
				fail_msg("step %d element %d: residual %g velocity %g, want %g %g", t,
					 i, (double)res[i], (double)vel[i], (double)rres[i],
					 (double)rvel[i]);
		}
	}
	for (int i = 0; i < N; i++)
		if (fabs(sent[i] + res[i] - acc[i]) > 1e-4 * (1 + fabs(acc[i])))
			fail_msg("element %d: sent %g + residual %g != velocities %g", i, sent[i],
				 (double)res[i], acc[i]);
}

static void test_parse(void **state)
{
	struct rps_compress_opts o;
	float g[4] = {1, 2, 3, 4}, res[4] = {0};
	uint8_t out[64];
	size_t len;

	(void)state;
	assert_int_equal(rps_compress_parse("sign:256", &o), 0);
	assert_int_equal(o.kind, RPS_CODEC_SIGNB);
	assert_int_equal(o.block, 256);
	assert_int_equal(o.error_feedback, 1);
	assert_int_equal(rps_compress_parse("signb", &o), 0);
	assert_int_equal(o.kind, RPS_CODEC_SIGNB);
	assert_int_equal(o.block, 256);
	assert_int_equal(rps_compress_parse("signb:1024", &o), 0);
	assert_int_equal(o.block, 1024);
	assert_int_equal(rps_compress_parse("sign", &o), 0);
	assert_int_equal(o.kind, RPS_CODEC_SIGN);
	assert_int_equal(rps_compress_parse("sign:4", &o), -EINVAL);
	assert_int_equal(rps_compress_parse("sign:-8", &o), -EINVAL);
	assert_int_equal(rps_compress_parse("sign:x", &o), -EINVAL);
	assert_int_equal(rps_compress_parse("sign:", &o), -EINVAL);
	assert_int_equal(rps_compress_parse("topk:0.01,warmup=234,from=0.1,momentum=0.9", &o), 0);
	assert_int_equal(o.kind, RPS_CODEC_TOPK);
	assert_true(fabsf(o.ratio - 0.01f) < 1e-9f);
	assert_int_equal(o.warmup_steps, 234);
	assert_true(fabsf(o.warmup_ratio - 0.1f) < 1e-9f);
	assert_true(fabsf(o.momentum - 0.9f) < 1e-9f);
	assert_int_equal(rps_compress_parse("topk:0.01,warmup=10", &o), 0);
	assert_true(o.warmup_ratio == 0.25f && o.momentum == 0.0f);
	assert_int_equal(rps_compress_parse("randk:0.05,momentum=0.5", &o), 0);
	assert_int_equal(o.kind, RPS_CODEC_RANDK);
	assert_int_equal(rps_compress_parse("topk:0.01,warmup=10,from=0.005", &o), -EINVAL);
	assert_int_equal(rps_compress_parse("topk:0.01,warmup=1.5", &o), -EINVAL);
	assert_int_equal(rps_compress_parse("topk:0.01,momentum=1", &o), -EINVAL);
	assert_int_equal(rps_compress_parse("topk:0.01,bogus=1", &o), -EINVAL);
	assert_int_equal(rps_compress_parse("topk:0.01,", &o), -EINVAL);
	assert_int_equal(rps_compress_parse("topk:0.01x,warmup=3", &o), -EINVAL);
	assert_int_equal(rps_compress_parse("fp16,warmup=3", &o), -EINVAL);
	assert_int_equal(rps_compress_parse("sign:256,momentum=0.9", &o), 0);
	assert_int_equal(o.kind, RPS_CODEC_SIGNB);
	assert_true(o.block == 256 && fabsf(o.momentum - 0.9f) < 1e-9f);
	assert_int_equal(rps_compress_parse("sign,momentum=0.5", &o), 0);
	assert_int_equal(o.kind, RPS_CODEC_SIGN);
	assert_int_equal(rps_compress_parse("sign:256,warmup=3", &o), -EINVAL);
	assert_int_equal(rps_compress_parse("fp16,momentum=0.9", &o), -EINVAL);
	assert_int_equal(rps_compress_parse("none,", &o), -EINVAL);
	assert_int_equal(rps_compress_parse("topk:0.0100000000000000000000000000000000000000000000000"
					    "00000000000000000000000000",
					    &o),
			 -EINVAL);

	rps_compress_opts_kind(&o, RPS_CODEC_SIGNB);
	assert_int_equal(rps_compress_opts_validate(&o), 0);
	o.block = 4;
	assert_int_equal(rps_compress_opts_validate(&o), -EINVAL);
	o.block = 16;
	assert_int_equal(rps_compress_bytes(&o, 100), 4 + 4 * 7 + 13);
	assert_int_equal(rps_compress_encode(&o, g, 4, res, out, &len), 0);
	assert_int_equal(len, 4 + 4 + 1);
	assert_int_equal(rps_compress_decode(RPS_CODEC_SIGNB, out, len, 4, g), 0);
	assert_true(g[0] == 2.5f && g[3] == 2.5f);
	assert_int_equal(rps_compress_decode(RPS_CODEC_SIGNB, out, len - 1, 4, g), -EPROTO);
	o.momentum = 0.9f;
	assert_int_equal(rps_compress_opts_validate(&o), 0);
	rps_compress_opts_kind(&o, RPS_CODEC_BF16);
	o.momentum = 0.9f; /* nothing to correct without error feedback */
	assert_int_equal(rps_compress_opts_validate(&o), -EINVAL);
	rps_compress_opts_kind(&o, RPS_CODEC_TOPK);
	o.momentum = 0.9f;
	o.error_feedback = 0; /* momentum correction needs the residual */
	assert_int_equal(rps_compress_opts_validate(&o), -EINVAL);
	o.error_feedback = 1;
	assert_int_equal(rps_compress_opts_validate(&o), 0);
	/* the caller's arrays have no velocity: refused, not ignored */
	assert_int_equal(rps_compress_encode(&o, g, 4, res, out, &len), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_signb_known),
	    cmocka_unit_test(test_signb_check_refuses),
	    cmocka_unit_test(test_signb_ef_conserves_sum),
	    cmocka_unit_test(test_signb_less_error),
	    cmocka_unit_test(test_warmup_ratio),
	    cmocka_unit_test(test_momentum_correction),
	    cmocka_unit_test(test_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
