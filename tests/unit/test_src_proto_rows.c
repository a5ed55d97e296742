/* ROWS_PULL / ROWS_PULL_RESP frames with a storage precision in their flags
 * (src/proto.c check_rows): the answer's length follows the precision (2
 * bytes an element for fp16 / bf16), unknown precisions and any flag on a
 * push are refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "src/proto.h"

static int check(uint8_t op, uint32_t flags, uint32_t dim, uint32_t count, uint64_t len)
{
	struct rps_frame_hdr h;
	struct rps_rows r;
	const char *why = NULL;

	memset(&h, 0, sizeof(h));
	memset(&r, 0, sizeof(r));
	h.op = op;
	h.len = (uint32_t)len;
	r.count = count;
	r.dim = dim;
	r.flags = flags;
	return rps_proto_payload_check(&h, &r, &why);
}

static void test_prec_flags(void **state)
{
	const uint64_t fixed = sizeof(struct rps_rows);

	(void)state;
	/* answer rows: f32, or u16 for fp16 / bf16; slots after them */
	assert_int_equal(check(RPS_OP_ROWS_PULL_RESP, 0, 8, 3, fixed + 3 * 32), 0);
	assert_int_equal(check(RPS_OP_ROWS_PULL_RESP, RPS_ROWS_FLAG_PREC(1), 8, 3, fixed + 3 * 16),
			 0);
	assert_int_equal(check(RPS_OP_ROWS_PULL_RESP, RPS_ROWS_FLAG_PREC(1), 8, 3, fixed + 3 * 32),
			 -EPROTO);
	assert_int_equal(check(RPS_OP_ROWS_PULL_RESP, RPS_ROWS_FLAG_PREC(2) | RPS_ROWS_FLAG_SLOTS,
			       8, 3, fixed + 3 * (16 + 4)),
			 0);
	/* a pull names the precision; 3 is none */
	assert_int_equal(check(RPS_OP_ROWS_PULL, RPS_ROWS_FLAG_PREC(2), 8, 3, fixed + 3 * 8), 0);
	assert_int_equal(check(RPS_OP_ROWS_PULL, RPS_ROWS_FLAG_PREC(3), 8, 3, fixed + 3 * 8),
			 -EPROTO);
	assert_int_equal(check(RPS_OP_ROWS_PULL, 0x8, 8, 3, fixed + 3 * 8), -EPROTO);
	/* pushes: fp32 gradients, flags 0 */
	assert_int_equal(check(RPS_OP_ROWS_PUSH, 0, 8, 3, fixed + 3 * (8 + 32)), 0);
	assert_int_equal(check(RPS_OP_ROWS_PUSH, RPS_ROWS_FLAG_PREC(1), 8, 3, fixed + 3 * (8 + 32)),
			 -EPROTO);
	assert_int_equal(RPS_ROWS_PREC_OF(RPS_ROWS_FLAG_PREC(2) | RPS_ROWS_FLAG_SLOTS), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_prec_flags),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
