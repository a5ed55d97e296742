/* Table rows stored as fp16 / bf16 (src/rowprec.c, server/rowtab.c): the
 * conversions round to nearest even and widen exactly, at any alignment;
 * a 16-bit table's slots are half the size, hold the rounded initial row
 * (rps_table_initial_row), and give back exactly the rounded values stored. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <rdmaps/table.h>

#include "server/rowtab.h"
#include "src/codec.h"
#include "src/rowinit.h"
#include "src/rowprec.h"

static void test_convert(void **state)
{
	/* ties to even: 1 + 2^-11 is halfway between fp16 1 and 1 + 2^-10 */
	const float in[6] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, -2.5f, 65504.0f, 1e-8f, 70000.0f};
	const float f16[6] = {1.0f, 1.0f + 0x1p-9f, -2.5f, 65504.0f, 0.0f, INFINITY};
	/* bf16 keeps 8 bits of mantissa: 1 + 2^-8 is halfway, to even 1 */
	const float bin[3] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 3.0f};
	const float bf16[3] = {1.0f, 1.0f + 0x1p-6f, 3.0f};
	char raw[2 * 600 + 1];
	float a[600], b[600], c[600], r[6];

	(void)state;
	assert_true(rps_row_prec_valid(RPS_TABLE_FP32));
	assert_true(rps_row_prec_valid(RPS_TABLE_BF16));
	assert_false(rps_row_prec_valid(3));
	assert_int_equal(rps_row_elem_bytes(RPS_TABLE_FP32), 4);
	assert_int_equal(rps_row_elem_bytes(RPS_TABLE_FP16), 2);
	assert_string_equal(rps_row_prec_name(RPS_TABLE_BF16), "bf16");

	memcpy(r, in, sizeof(r));
	rps_row_round(RPS_TABLE_FP16, r, 6);
	assert_memory_equal(r, f16, sizeof(r));
	memcpy(r, bin, sizeof(bin));
	rps_row_round(RPS_TABLE_BF16, r, 3);
	assert_memory_equal(r, bf16, sizeof(bf16));
	memcpy(r, in, sizeof(r));
	rps_row_round(RPS_TABLE_FP32, r, 6); /* fp32: unchanged */
	assert_memory_equal(r, in, sizeof(r));

	/* aligned and unaligned buffers, longer than a block: the same bits, and
	 * the round trip of a rounded value is exact */
	for (int i = 0; i < 600; i++)
		a[i] = (float)(i - 300) * 0.0173f;
	for (uint32_t p = RPS_TABLE_FP16; p <= RPS_TABLE_BF16; p++) {
		uint16_t al[600];

		rps_row_narrow(p, a, al, 600);
		rps_row_narrow(p, a, raw + 1, 600);
		assert_memory_equal(al, raw + 1, sizeof(al));
		rps_row_widen(p, al, b, 600);
		rps_row_widen(p, raw + 1, c, 600);
		assert_memory_equal(b, c, sizeof(b));
		for (int i = 0; i < 600; i++) {
			float one = a[i];

			rps_row_round(p, &one, 1);
			assert_memory_equal(&one, &b[i], 4);
			assert_true(fabsf(b[i] - a[i]) <= fabsf(a[i]) * (p == RPS_TABLE_FP16 ? 0x1p-11f : 0x1p-8f));
			assert_int_equal(al[i], p == RPS_TABLE_FP16 ? rps_codec_f16_one(a[i])
								    : rps_codec_bf16_one(a[i]));
		}
		rps_row_narrow(p, b, raw + 1, 600); /* rounded values: exact */
		rps_row_widen(p, raw + 1, c, 600);
		assert_memory_equal(b, c, sizeof(b));
	}
}

static void test_rowtab_16(void **state)
{
	struct rps_rowtab rt;
	struct rps_table_spec spec;
	float want[13], got[13], vals[13];
	const char *slot;
	uint32_t bv, ev;
	int64_t s;

	(void)state;
	for (uint32_t p = RPS_TABLE_FP16; p <= RPS_TABLE_BF16; p++) {
		assert_int_equal(
		    rps_rowtab_init(&rt, 4, 13, RPS_TABLE_INIT_NORMAL, 0.3f, 99, RPS_OPT_ADAM, 0), 0);
		assert_int_equal(rt.slot_bytes, 72); /* fp32: 16 + 52 -> 72 */
		assert_int_equal(rps_rowtab_set_precision(&rt, 7), -EINVAL);
		assert_int_equal(rps_rowtab_set_precision(&rt, p), 0);
		assert_int_equal(rt.slot_bytes, 48); /* 16 + 26 rounded up to 8 */
		assert_int_equal(rt.eb, 2);
		s = rps_rowtab_get(&rt, 1234, NULL);
		assert_true(s >= 0);
		assert_int_equal(rps_rowtab_set_precision(&rt, RPS_TABLE_FP32), -EINVAL);

		/* the initial row: the fp32 one rounded, as rps_table_initial_row */
		rps_table_spec_init(&spec);
		spec.dim = 13;
		spec.precision = p;
		spec.init = RPS_TABLE_INIT_NORMAL;
		spec.init_scale = 0.3f;
		spec.seed = 99;
		assert_int_equal(rps_table_initial_row(&spec, 1234, want), 0);
		rps_rowtab_load(&rt, (uint64_t)s, got);
		assert_memory_equal(got, want, sizeof(want));
		rps_row_init(RPS_TABLE_INIT_NORMAL, 0.3f, 99, 1234, 13, vals);
		rps_row_round(p, vals, 13);
		assert_memory_equal(got, vals, sizeof(vals));

		/* put (restore) and store round to nearest even; load is exact */
		for (int e = 0; e < 13; e++)
			vals[e] = 1.0f + (float)e * 0x1p-12f;
		assert_int_equal(rps_rowtab_put(&rt, 1234, vals), s);
		rps_rowtab_load(&rt, (uint64_t)s, got);
		memcpy(want, vals, sizeof(want));
		rps_row_round(p, want, 13);
		assert_memory_equal(got, want, sizeof(want));
		assert_int_equal(rps_rowtab_put(&rt, 77, want), s + 1); /* a new row */
		rps_rowtab_load(&rt, (uint64_t)s + 1, got);
		assert_memory_equal(got, want, sizeof(want));

		/* the raw row is 16 bits an element; versions at both ends, even */
		slot = rps_rowtab_slot(&rt, (uint64_t)s);
		for (int e = 0; e < 13; e++) {
			uint16_t h;

			memcpy(&h, slot + RPS_ROWTAB_HDR + 2 * e, 2);
			assert_int_equal(h, p == RPS_TABLE_FP16 ? rps_codec_f16_one(want[e])
								: rps_codec_bf16_one(want[e]));
		}
		memcpy(&bv, slot + 8, 4);
		memcpy(&ev, slot + rt.slot_bytes - 4, 4);
		assert_int_equal(bv, ev);
		assert_int_equal(bv & 1, 0);
		assert_int_equal(bv, 2); /* one write (the put over the row) */
		assert_non_null(rps_rowtab_v(&rt, (uint64_t)s)); /* state stays fp32 */
		rps_rowtab_fini(&rt);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_convert),
	    cmocka_unit_test(test_rowtab_16),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
